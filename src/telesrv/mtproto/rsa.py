"""Server RSA key helpers for the auth-key exchange (pure functions, no IO)."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

import cryptg
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPrivateNumbers

from telesrv.mtproto.bigint import powmod

__all__ = ["RsaError", "RsaInnerData", "rsa_decrypt_inner_data", "rsa_fingerprint"]

_BLOCK = 256  # 2048-bit key
_PADDED_DATA = 192  # RSA_PAD: data_with_padding length
_LEGACY_HASH = 20
_ZERO_IV = bytes(32)


class RsaError(ValueError):
    """Encrypted inner data could not be decrypted or is malformed."""


def _tl_bytes(value: bytes) -> bytes:
    """TL ``bytes`` serialization (length prefix, padding to 4)."""
    size = len(value)
    if size < 254:
        head = bytes((size,))
    else:
        head = b"\xfe" + size.to_bytes(3, "little")
    body = head + value
    return body + bytes(-len(body) % 4)


def _big_endian(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def rsa_fingerprint(n: int, e: int) -> int:
    """Telegram's key fingerprint as a **signed** int64 (TL ``long``).

    Lower 64 bits of SHA1(TL bytes(n) + TL bytes(e)), big-endian numbers
    without leading zeros; the value Telethon computes and clients send in
    req_DH_params.public_key_fingerprint.
    """
    digest = hashlib.sha1(_tl_bytes(_big_endian(n)) + _tl_bytes(_big_endian(e))).digest()
    return int.from_bytes(digest[-8:], "little", signed=True)


@dataclass(frozen=True, slots=True)
class RsaInnerData:
    """Decrypted p_q_inner_data candidate.

    ``legacy`` False (RSA_PAD): ``data`` is the 192-byte data_with_padding,
    already authenticated; the TL object is at the front, random padding after.
    ``legacy`` True: ``data`` is exactly the bytes covered by the SHA1, so the
    TL object must consume all of it.
    """

    data: bytes
    legacy: bool

    def verify(self, consumed_len: int) -> bool:
        """Whether a TL object that consumed ``consumed_len`` bytes is acceptable."""
        if self.legacy:
            return consumed_len == len(self.data)
        return 0 < consumed_len <= len(self.data)


def _raw_decrypt(numbers: RSAPrivateNumbers, value: int) -> int:
    # CRT: two half-size exponentiations instead of one full-size one.
    p, q = numbers.p, numbers.q
    m1 = powmod(value % p, numbers.dmp1, p)
    m2 = powmod(value % q, numbers.dmq1, q)
    h = (numbers.iqmp * (m1 - m2)) % p
    return m2 + h * q


def _unpad_rsa_pad(block: bytes) -> bytes | None:
    temp_key_xor = block[:32]
    aes_encrypted = block[32:]
    key_mask = hashlib.sha256(aes_encrypted).digest()
    temp_key = (int.from_bytes(temp_key_xor) ^ int.from_bytes(key_mask)).to_bytes(32)
    data_with_hash = cryptg.decrypt_ige(aes_encrypted, temp_key, _ZERO_IV)
    data_with_padding = data_with_hash[:_PADDED_DATA][::-1]
    expected = hashlib.sha256(temp_key + data_with_padding).digest()
    if hmac.compare_digest(expected, data_with_hash[_PADDED_DATA:]):
        return data_with_padding
    return None


def _unpad_legacy(block: bytes) -> bytes | None:
    # Legacy block: 0x00 + SHA1(data) + data + random padding (255 bytes after the zero).
    if block[0] != 0:
        return None
    digest = block[1 : 1 + _LEGACY_HASH]
    rest = block[1 + _LEGACY_HASH :]
    # The data length is not sent, so find the prefix the hash covers. TL data
    # is a multiple of 4 bytes: at most 58 SHA1s, cheap next to the RSA step.
    for size in range(4, len(rest) + 1, 4):
        if hmac.compare_digest(hashlib.sha1(rest[:size]).digest(), digest):
            return rest[:size]
    return None


def rsa_decrypt_inner_data(
    key: RSAPrivateKey | RSAPrivateNumbers, encrypted: bytes
) -> RsaInnerData:
    """Decrypt ``encrypted_data`` from req_DH_params with the server's private key.

    Tries RSA_PAD (MTProto 2.0) first, then the legacy SHA1 format. Raises
    :class:`RsaError` when neither matches.
    """
    numbers = key.private_numbers() if isinstance(key, RSAPrivateKey) else key
    n = numbers.public_numbers.n
    if n.bit_length() != _BLOCK * 8:
        raise RsaError("server key must be 2048 bits")
    if not encrypted or len(encrypted) > _BLOCK:
        raise RsaError("encrypted data must be 1..256 bytes")
    value = int.from_bytes(encrypted, "big")
    if value >= n:
        raise RsaError("encrypted value is not below the modulus")
    block = _raw_decrypt(numbers, value).to_bytes(_BLOCK, "big")

    data = _unpad_rsa_pad(block)
    if data is not None:
        return RsaInnerData(data, legacy=False)
    data = _unpad_legacy(block)
    if data is not None:
        return RsaInnerData(data, legacy=True)
    raise RsaError("encrypted data matches neither RSA_PAD nor the legacy format")
