"""MTProto 2.0 symmetric crypto: AES-256-IGE, msg_key, key derivation.

``x`` in the spec is 0 for client->server messages and 8 for server->client.
All functions are pure; randomness (padding) is passed in by the caller.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

import cryptg

__all__ = [
    "CryptoError",
    "aes_ige_decrypt",
    "aes_ige_encrypt",
    "auth_key_id",
    "auth_key_id_bytes",
    "decrypt_client_message",
    "decrypt_client_message_with_ack",
    "encrypt_server_message",
    "message_key",
    "message_aes_key_iv",
    "new_nonce_hash",
    "padding_length",
    "quick_ack_token",
    "tmp_aes_key_iv",
]

AUTH_KEY_SIZE = 256
HEADER_SIZE = 32  # salt(8) session_id(8) msg_id(8) seq_no(4) length(4)
MIN_PADDING = 12
MAX_PADDING = 1024
_X_CLIENT = 0
_X_SERVER = 8
_LENGTH = struct.Struct("<I")


class CryptoError(ValueError):
    """Malformed or unauthentic encrypted data, or invalid crypto arguments."""


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _sha1(data: bytes) -> bytes:
    return hashlib.sha1(data).digest()


def _check_auth_key(auth_key: bytes) -> None:
    if len(auth_key) != AUTH_KEY_SIZE:
        raise CryptoError("auth key must be 256 bytes")


def aes_ige_encrypt(plaintext: bytes, key: bytes, iv: bytes) -> bytes:
    if len(plaintext) % 16 or len(key) != 32 or len(iv) != 32:
        raise CryptoError("bad AES-IGE input sizes")
    return cryptg.encrypt_ige(plaintext, key, iv)


def aes_ige_decrypt(ciphertext: bytes, key: bytes, iv: bytes) -> bytes:
    if len(ciphertext) % 16 or len(key) != 32 or len(iv) != 32:
        raise CryptoError("bad AES-IGE input sizes")
    return cryptg.decrypt_ige(ciphertext, key, iv)


def auth_key_id_bytes(auth_key: bytes) -> bytes:
    """The 8 bytes that prefix every encrypted message (low 64 bits of SHA1)."""
    return _sha1(auth_key)[-8:]


def auth_key_id(auth_key: bytes) -> int:
    """auth_key_id as a signed int64 (TL ``long``, little-endian on the wire)."""
    return int.from_bytes(auth_key_id_bytes(auth_key), "little", signed=True)


def _msg_key_large(auth_key: bytes, plaintext: bytes, x: int) -> bytes:
    # Hashed in two steps: joining would copy the whole message (up to a 1 MiB chunk).
    digest = hashlib.sha256(auth_key[88 + x : 120 + x])
    digest.update(plaintext)
    return digest.digest()


def message_key(auth_key: bytes, plaintext: bytes, *, from_client: bool) -> bytes:
    """msg_key: middle 128 bits of SHA256(auth_key part + plaintext incl. padding)."""
    x = _X_CLIENT if from_client else _X_SERVER
    return _msg_key_large(auth_key, plaintext, x)[8:24]


def message_aes_key_iv(
    auth_key: bytes, msg_key: bytes, *, from_client: bool
) -> tuple[bytes, bytes]:
    """aes_key and aes_iv for a message, per MTProto 2.0."""
    x = _X_CLIENT if from_client else _X_SERVER
    sha256_a = _sha256(msg_key + auth_key[x : x + 36])
    sha256_b = _sha256(auth_key[40 + x : 76 + x] + msg_key)
    aes_key = sha256_a[:8] + sha256_b[8:24] + sha256_a[24:32]
    aes_iv = sha256_b[:8] + sha256_a[8:24] + sha256_b[24:32]
    return aes_key, aes_iv


def _quick_ack_from_large(msg_key_large: bytes) -> int:
    return int.from_bytes(msg_key_large[:4], "little") | 0x80000000


def quick_ack_token(auth_key: bytes, plaintext: bytes) -> int:
    """Quick-ack token for a client message: first 32 bits of msg_key_large, top bit set.

    ``plaintext`` is the decrypted client message including its padding.
    """
    return _quick_ack_from_large(_msg_key_large(auth_key, plaintext, _X_CLIENT))


def decrypt_client_message_with_ack(
    auth_key: bytes, body: bytes, *, allow_trailing: bool = False
) -> tuple[bytes, int]:
    """Like :func:`decrypt_client_message`, also returning the quick-ack token."""
    _check_auth_key(auth_key)
    if allow_trailing:
        # Padded intermediate may append bytes past the ciphertext; the
        # ciphertext itself is always whole AES blocks.
        body = body[: len(body) - len(body) % 16]
    if len(body) < 16 + HEADER_SIZE + 16 or len(body) % 16:
        raise CryptoError("encrypted message has a bad length")
    msg_key = body[:16]
    aes_key, aes_iv = message_aes_key_iv(auth_key, msg_key, from_client=True)
    plaintext = cryptg.decrypt_ige(body[16:], aes_key, aes_iv)

    msg_key_large = _msg_key_large(auth_key, plaintext, _X_CLIENT)
    key_ok = hmac.compare_digest(msg_key_large[8:24], msg_key)
    length = _LENGTH.unpack_from(plaintext, 28)[0]
    padding = len(plaintext) - HEADER_SIZE - length
    # Evaluate every check before failing so that timing says little about
    # which one was wrong.
    shape_ok = length % 4 == 0 and MIN_PADDING <= padding <= MAX_PADDING
    if not (key_ok & shape_ok):
        raise CryptoError("encrypted message failed validation")
    return plaintext[: HEADER_SIZE + length], _quick_ack_from_large(msg_key_large)


def decrypt_client_message(auth_key: bytes, body: bytes, *, allow_trailing: bool = False) -> bytes:
    """Decrypt a client message; ``body`` is msg_key(16) + ciphertext (after auth_key_id).

    Returns the header (salt, session_id, msg_id, seq_no, length; 32 bytes)
    followed by the message body, with the padding removed. Set
    ``allow_trailing`` for frames from padded intermediate.
    """
    return decrypt_client_message_with_ack(auth_key, body, allow_trailing=allow_trailing)[0]


def padding_length(n: int, extra_blocks: int = 0) -> int:
    """Padding (12..1024 bytes) that makes ``n + padding`` a multiple of 16.

    ``extra_blocks`` adds whole 16-byte blocks, e.g. to hide message length.
    """
    if n < 0 or extra_blocks < 0:
        raise CryptoError("negative length")
    size = MIN_PADDING + (-(n + MIN_PADDING)) % 16 + 16 * extra_blocks
    if size > MAX_PADDING:
        raise CryptoError("too many extra padding blocks")
    return size


def encrypt_server_message(auth_key: bytes, plaintext: bytes, padding: bytes) -> bytes:
    """Encrypt a server message: returns auth_key_id(8) + msg_key(16) + ciphertext.

    ``plaintext`` starts with the 32-byte header; ``padding`` is random bytes of
    :func:`padding_length` size.
    """
    _check_auth_key(auth_key)
    if not MIN_PADDING <= len(padding) <= MAX_PADDING:
        raise CryptoError("padding must be 12..1024 bytes")
    data = plaintext + padding
    if len(data) % 16:
        raise CryptoError("plaintext + padding must be a multiple of 16 bytes")
    msg_key = _msg_key_large(auth_key, data, _X_SERVER)[8:24]
    aes_key, aes_iv = message_aes_key_iv(auth_key, msg_key, from_client=False)
    return auth_key_id_bytes(auth_key) + msg_key + cryptg.encrypt_ige(data, aes_key, aes_iv)


def tmp_aes_key_iv(new_nonce: bytes, server_nonce: bytes) -> tuple[bytes, bytes]:
    """Key and IV that protect server_DH_inner_data / client_DH_inner_data.

    Nonces are in wire form (int256 / int128 little-endian bytes).
    """
    if len(new_nonce) != 32 or len(server_nonce) != 16:
        raise CryptoError("new_nonce must be 32 bytes and server_nonce 16")
    new_server = _sha1(new_nonce + server_nonce)
    server_new = _sha1(server_nonce + new_nonce)
    new_new = _sha1(new_nonce + new_nonce)
    key = new_server + server_new[:12]
    iv = server_new[12:20] + new_new + new_nonce[:4]
    return key, iv


def new_nonce_hash(new_nonce: bytes, number: int, auth_key: bytes) -> bytes:
    """new_nonce_hash1/2/3 (16 bytes, wire form) for dh_gen_ok/retry/fail."""
    if len(new_nonce) != 32 or number not in (1, 2, 3):
        raise CryptoError("bad new_nonce_hash arguments")
    aux_hash = _sha1(auth_key)[:8]
    return _sha1(new_nonce + bytes((number,)) + aux_hash)[4:20]
