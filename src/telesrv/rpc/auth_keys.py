"""auth.bindTempAuthKey: bind a temporary auth key to a permanent one (PFS).

The request arrives encrypted with the temporary key; ``encrypted_message`` is a message
encrypted with the *permanent* key in MTProto **v1** style (msg_key = SHA1 of the
unpadded plaintext, SHA1-based key derivation, 0..15 bytes of padding). Its plaintext is
random:int128 (in place of salt and session_id), the msg_id of the request, seq_no 0,
msg_len 40 and bind_auth_key_inner.

The v1 arithmetic lives here rather than in ``mtproto/``: this is its only user,
and the RPC layer does not import the transport layers.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

import cryptg

from telesrv.rpc.context import RequestContext
from telesrv.rpc.registry import method
from telesrv.services.auth_keys import AuthKeyService, BindResult
from telesrv.tl import DecodeError, decode, functions, mt
from telesrv.tl.errors import EncryptedMessageInvalid, TempAuthKeyAlreadyBound, TempAuthKeyEmpty

AUTH_KEY_SIZE = 256
_KEY_ID = struct.Struct("<q")
_V1_HEADER = struct.Struct("<16sqii")  # random, msg_id, seq_no, msg_len
_INNER_LENGTH = 40  # bind_auth_key_inner: constructor + 4 longs + int
# auth_key_id + msg_key + one header-and-inner message padded to 16 bytes.
ENCRYPTED_MESSAGE_SIZE = 8 + 16 + (_V1_HEADER.size + _INNER_LENGTH + 15) // 16 * 16


def v1_aes_key_iv(auth_key: bytes, msg_key: bytes, *, from_client: bool) -> tuple[bytes, bytes]:
    """MTProto v1 key derivation (SHA1-based); x is 0 for client messages, 8 otherwise."""
    x = 0 if from_client else 8
    sha1_a = hashlib.sha1(msg_key + auth_key[x : x + 32]).digest()
    sha1_b = hashlib.sha1(auth_key[32 + x : 48 + x] + msg_key + auth_key[48 + x : 64 + x]).digest()
    sha1_c = hashlib.sha1(auth_key[64 + x : 96 + x] + msg_key).digest()
    sha1_d = hashlib.sha1(msg_key + auth_key[96 + x : 128 + x]).digest()
    aes_key = sha1_a[:8] + sha1_b[8:20] + sha1_c[4:16]
    aes_iv = sha1_a[8:20] + sha1_b[:8] + sha1_c[16:20] + sha1_d[:8]
    return aes_key, aes_iv


def decrypt_v1_client_message(auth_key: bytes, body: bytes) -> tuple[int, int, bytes] | None:
    """(msg_id, seq_no, message) of a v1 message (``body`` = msg_key + ciphertext).

    None when it does not decrypt to a well-formed message under ``auth_key``.
    """
    if len(auth_key) != AUTH_KEY_SIZE or len(body) < 16 + 48 or (len(body) - 16) % 16:
        return None
    msg_key = body[:16]
    aes_key, aes_iv = v1_aes_key_iv(auth_key, msg_key, from_client=True)
    plaintext = cryptg.decrypt_ige(body[16:], aes_key, aes_iv)
    _random, msg_id, seq_no, length = _V1_HEADER.unpack_from(plaintext, 0)
    end = _V1_HEADER.size + length
    if length < 0 or not 0 <= len(plaintext) - end < 16:
        return None
    if not hmac.compare_digest(hashlib.sha1(plaintext[:end]).digest()[4:20], msg_key):
        return None
    return msg_id, seq_no, plaintext[_V1_HEADER.size : end]


class TempKeyHandlers:
    def __init__(self, auth_keys: AuthKeyService) -> None:
        self._auth_keys = auth_keys

    # Clients bind before they log in (and must, before anything else, under PFS).
    @method(functions.auth.BindTempAuthKey, requires_auth=False)
    async def bind_temp_auth_key(
        self, ctx: RequestContext, request: functions.auth.BindTempAuthKey
    ) -> bool:
        temp = await self._auth_keys.get(ctx.auth_key_id, ctx.now)
        if temp is None or not temp.is_temp:
            raise TempAuthKeyEmpty()
        perm_auth_key_id = request.perm_auth_key_id
        message = request.encrypted_message
        if len(message) != ENCRYPTED_MESSAGE_SIZE:
            raise EncryptedMessageInvalid()
        if _KEY_ID.unpack_from(message, 0)[0] != perm_auth_key_id:
            raise EncryptedMessageInvalid()
        perm = await self._auth_keys.get(perm_auth_key_id, ctx.now)
        if perm is None or perm.is_temp:
            # The pfs page tells clients to recreate both keys on this error.
            raise EncryptedMessageInvalid()
        opened = decrypt_v1_client_message(perm.auth_key, message[8:])
        if opened is None:
            raise EncryptedMessageInvalid()
        msg_id, seq_no, body = opened
        try:
            inner = decode(body)
        except DecodeError:
            raise EncryptedMessageInvalid() from None
        if not (
            isinstance(inner, mt.BindAuthKeyInner)
            and msg_id == ctx.msg_id
            and seq_no == 0
            and inner.nonce == request.nonce
            and inner.temp_auth_key_id == ctx.auth_key_id
            and inner.perm_auth_key_id == perm_auth_key_id
            and inner.temp_session_id == ctx.session_id
            and inner.expires_at == request.expires_at
            and request.expires_at > ctx.now
        ):
            raise EncryptedMessageInvalid()
        expires_at = float(request.expires_at)
        if temp.expires_at is not None:
            # A binding cannot keep the key alive past the lifetime it was created with.
            expires_at = min(expires_at, temp.expires_at)
        result = await self._auth_keys.bind_temp(ctx.auth_key_id, perm_auth_key_id, expires_at)
        if result is BindResult.ALREADY_BOUND:
            raise TempAuthKeyAlreadyBound()
        if result is BindResult.TEMP_KEY_NOT_FOUND:
            raise TempAuthKeyEmpty()
        if result is BindResult.PERM_KEY_NOT_FOUND:
            raise EncryptedMessageInvalid()
        ctx.sessions.key_bound(ctx.auth_key_id, perm_auth_key_id)
        return True
