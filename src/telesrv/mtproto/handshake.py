"""Server side of MTProto auth key creation (sans-io).

One :class:`AuthKeyExchange` per connection walks ``req_pq(_multi)`` ->
``req_DH_params`` -> ``set_client_DH_params``. Randomness comes from the
``random_bytes`` callable and time from the ``now`` argument; the caller
stores the resulting :class:`NewAuthKey` and decides whether its id is free.
Unencrypted framing (auth_key_id 0) lives in :func:`parse_plain` /
:func:`encode_plain`.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateNumbers

from telesrv.mtproto.bigint import powmod
from telesrv.mtproto.crypto import (
    CryptoError,
    aes_ige_decrypt,
    aes_ige_encrypt,
    auth_key_id,
    new_nonce_hash,
    tmp_aes_key_iv,
)
from telesrv.mtproto.rsa import RsaError, rsa_decrypt_inner_data
from telesrv.tl import DecodeError, TLObject, mt, read_object

# Telegram's standard 2048-bit safe prime (published in the MTProto auth key
# page); clients compare it byte for byte or check it as a safe prime.
DH_PRIME = int(
    "C71CAEB9C6B1C9048E6C522F70F13F73980D40238E3E21C14934D037563D930F"
    "48198A0AA7C14058229493D22530F4DBFA336F6E0AC925139543AED44CCE7C37"
    "20FD51F69458705AC68CD4FE6B6B13ABDC9746512969328454F18FAF8C595F64"
    "2477FE96BB2A941D5BCD1D4AC8CC49880708FA9B378E3C4F3A9060BEE67CF9A4"
    "A4A695811051907E162753B56B0F6B410DBA74D8A84B2A14B3144E0EF1284754"
    "FD17ED950D5965B4B9DD46582DB1178D169C6BC465B0D6FF9CA3928FEF5B9AE4"
    "E418FC15E83EBEA0F87FA9FF5EED70050DED2849F47BF959D956850CE929851F"
    "0D8115F635B105EE2E4E15D04B2454BF6F4FADF034B10403119CD8E3B92FCC5B",
    16,
)
DH_G = 3  # a generator of the prime's large subgroup, as Telegram uses
# A 320-bit secret exponent gives ~160-bit security against discrete logs in a
# 2048-bit safe-prime group; a full 2048-bit one costs 28 ms per pow in Python.
DH_EXPONENT_BITS = 320
_RANGE_MARGIN = 1 << (2048 - 64)  # spec: 2^(2048-64) < g_a, g_b < p - 2^(2048-64)

MAX_PLAIN_LENGTH = 2048  # handshake messages are < 1 KiB
_PLAIN_HEAD = struct.Struct("<qqi")


class HandshakeError(Exception):
    """The client broke the protocol; the connection should be closed."""


class Stage(Enum):
    START = "start"
    PQ_SENT = "pq_sent"
    DH_SENT = "dh_sent"


@dataclass(frozen=True, slots=True)
class NewAuthKey:
    auth_key: bytes
    auth_key_id: int
    is_temp: bool
    expires_at: int | None  # unix time, temporary keys only
    dc_id: int | None  # the dc the client asked for (p_q_inner_data_dc), if any
    first_salt: int  # new_nonce[0:8] XOR server_nonce[0:8], the client's first salt


@dataclass(frozen=True, slots=True)
class PlainMessage:
    msg_id: int
    body: bytes


def parse_plain(payload: bytes) -> PlainMessage:
    """An unencrypted message: auth_key_id 0, msg_id, length, body."""
    if len(payload) < 20:
        raise HandshakeError("unencrypted message shorter than its header")
    key_id, msg_id, length = _PLAIN_HEAD.unpack_from(payload, 0)
    if key_id != 0:
        raise HandshakeError("not an unencrypted message")
    if not 4 <= length <= MAX_PLAIN_LENGTH or 20 + length > len(payload):
        raise HandshakeError(f"unencrypted message length {length} is invalid")
    return PlainMessage(msg_id, payload[20 : 20 + length])


def encode_plain(msg_id: int, body: bytes) -> bytes:
    return _PLAIN_HEAD.pack(0, msg_id, len(body)) + body


def _int128(b: bytes) -> int:
    return int.from_bytes(b, "little", signed=True)


def _wire128(v: int) -> bytes:
    return v.to_bytes(16, "little", signed=True)


def _wire256(v: int) -> bytes:
    return v.to_bytes(32, "little", signed=True)


def _is_probable_prime(n: int) -> bool:
    if n < 2:
        return False
    for sp in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        if n % sp == 0:
            return n == sp
    d, r = n - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    # These bases are deterministic for every n < 3.3e24.
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41):
        x = powmod(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _random_prime(random_bytes: Callable[[int], bytes], bits: int) -> int:
    while True:
        candidate = int.from_bytes(random_bytes((bits + 7) // 8), "big") >> (-bits % 8)
        candidate |= (1 << (bits - 1)) | (1 << (bits - 2)) | 1  # full size, odd
        if _is_probable_prime(candidate):
            return candidate


class AuthKeyExchange:
    """The handshake state of one connection."""

    def __init__(
        self,
        *,
        rsa_key: RSAPrivateNumbers,
        fingerprint: int,
        random_bytes: Callable[[int], bytes],
        dh_prime: int = DH_PRIME,
        g: int = DH_G,
    ) -> None:
        self._rsa_key = rsa_key
        self._fingerprint = fingerprint
        self._random = random_bytes
        self._prime = dh_prime
        self._prime_bytes = dh_prime.to_bytes(256, "big")
        self._g = g
        self._reset()

    def _reset(self) -> None:
        self.stage = Stage.START
        self._nonce = 0
        self._server_nonce = 0
        self._p = b""
        self._q = b""
        self._pq = b""
        self._new_nonce = b""
        self._a = 0
        self._is_temp = False
        self._expires_in = 0
        self._dc: int | None = None
        self._retry_aux = 0  # auth_key_aux_hash of the key we asked to retry, as a long

    def handle(self, request: TLObject, now: int) -> tuple[TLObject, NewAuthKey | None]:
        """Answer one handshake request; the second item is set once a key exists."""
        if isinstance(request, mt.ReqPqMulti | mt.ReqPq):
            return self._req_pq(request.nonce), None
        if isinstance(request, mt.ReqDHParams):
            return self._req_dh_params(request, now), None
        if isinstance(request, mt.SetClientDHParams):
            return self._set_client_dh_params(request, now)
        raise HandshakeError(f"unexpected {request.TL_NAME} during key exchange")

    # -- step 1 --------------------------------------------------------------------

    def _req_pq(self, nonce: int) -> TLObject:
        self._reset()
        # 31-bit primes keep pq below 2^63: clients read it as a signed long.
        p = _random_prime(self._random, 31)
        q = _random_prime(self._random, 31)
        while q == p:
            q = _random_prime(self._random, 31)
        p, q = min(p, q), max(p, q)
        self._nonce = nonce
        self._server_nonce = _int128(self._random(16))
        self._p = p.to_bytes(4, "big")
        self._q = q.to_bytes(4, "big")
        self._pq = (p * q).to_bytes(8, "big")
        self.stage = Stage.PQ_SENT
        return mt.ResPQ(
            nonce=nonce,
            server_nonce=self._server_nonce,
            pq=self._pq,
            server_public_key_fingerprints=[self._fingerprint],
        )

    # -- step 2 --------------------------------------------------------------------

    def _check_nonces(self, nonce: int, server_nonce: int) -> None:
        if nonce != self._nonce or server_nonce != self._server_nonce:
            raise HandshakeError("nonce mismatch")

    def _req_dh_params(self, req: TLObject, now: int) -> TLObject:
        if self.stage is not Stage.PQ_SENT:
            raise HandshakeError("req_DH_params before resPQ")
        assert isinstance(req, mt.ReqDHParams)
        self._check_nonces(req.nonce, req.server_nonce)
        if req.public_key_fingerprint != self._fingerprint:
            raise HandshakeError("unknown public key fingerprint")
        try:
            inner = rsa_decrypt_inner_data(self._rsa_key, req.encrypted_data)
            data, consumed = read_object(inner.data)
        except (RsaError, DecodeError) as e:
            raise HandshakeError(f"bad encrypted_data: {e}") from None
        if not inner.verify(consumed):
            raise HandshakeError("p_q_inner_data does not match its hash")
        if not isinstance(
            data, mt.PQInnerData | mt.PQInnerDataDc | mt.PQInnerDataTemp | mt.PQInnerDataTempDc
        ):
            raise HandshakeError(f"expected p_q_inner_data, got {data.TL_NAME}")
        self._check_nonces(data.nonce, data.server_nonce)
        if data.pq != self._pq or data.p != req.p or data.q != req.q:
            raise HandshakeError("p_q_inner_data disagrees with req_DH_params")
        self._new_nonce = _wire256(data.new_nonce)
        if req.p != self._p or req.q != self._q:
            # A wrong factorization, told in the one answer the protocol has for it, so
            # that the client may start over on this connection: some clients'
            # factoring now and then gives 1 and pq. It then takes a new pq.
            refused = mt.ServerDHParamsFail(
                nonce=req.nonce,
                server_nonce=req.server_nonce,
                new_nonce_hash=_int128(hashlib.sha1(self._new_nonce).digest()[4:20]),
            )
            self._reset()
            return refused
        self._is_temp = isinstance(data, mt.PQInnerDataTemp | mt.PQInnerDataTempDc)
        self._expires_in = data.expires_in if self._is_temp else 0  # type: ignore[union-attr]
        if self._is_temp and not 0 < self._expires_in <= 365 * 86400:
            raise HandshakeError("expires_in out of range")
        self._dc = data.dc if isinstance(data, mt.PQInnerDataDc | mt.PQInnerDataTempDc) else None

        while True:
            self._a = int.from_bytes(self._random(DH_EXPONENT_BITS // 8), "big") | 1 << (
                DH_EXPONENT_BITS - 1
            )
            g_a = powmod(self._g, self._a, self._prime)
            if _RANGE_MARGIN < g_a < self._prime - _RANGE_MARGIN:
                break
        answer = mt.ServerDHInnerData(
            nonce=self._nonce,
            server_nonce=self._server_nonce,
            g=self._g,
            dh_prime=self._prime_bytes,
            g_a=g_a.to_bytes(256, "big"),
            server_time=now,
        ).to_bytes()
        with_hash = hashlib.sha1(answer).digest() + answer
        with_hash += self._random(-len(with_hash) % 16)
        key, iv = tmp_aes_key_iv(self._new_nonce, _wire128(self._server_nonce))
        self.stage = Stage.DH_SENT
        return mt.ServerDHParamsOk(
            nonce=self._nonce,
            server_nonce=self._server_nonce,
            encrypted_answer=aes_ige_encrypt(with_hash, key, iv),
        )

    # -- step 3 --------------------------------------------------------------------

    def _set_client_dh_params(self, req: TLObject, now: int) -> tuple[TLObject, NewAuthKey | None]:
        if self.stage is not Stage.DH_SENT:
            raise HandshakeError("set_client_DH_params before server_DH_params")
        assert isinstance(req, mt.SetClientDHParams)
        self._check_nonces(req.nonce, req.server_nonce)
        data = req.encrypted_data
        if not data or len(data) % 16 or len(data) > 1024:
            raise HandshakeError("encrypted_data has a bad length")
        key, iv = tmp_aes_key_iv(self._new_nonce, _wire128(self._server_nonce))
        try:
            plain = aes_ige_decrypt(data, key, iv)
            inner, end = read_object(plain, 20)
        except (CryptoError, DecodeError) as e:
            raise HandshakeError(f"bad client_DH_inner_data: {e}") from None
        if not hmac.compare_digest(hashlib.sha1(plain[20:end]).digest(), plain[:20]):
            raise HandshakeError("client_DH_inner_data does not match its hash")
        if not isinstance(inner, mt.ClientDHInnerData):
            raise HandshakeError(f"expected client_DH_inner_data, got {inner.TL_NAME}")
        self._check_nonces(inner.nonce, inner.server_nonce)
        if inner.retry_id != self._retry_aux:
            raise HandshakeError("retry_id does not match")
        g_b = int.from_bytes(inner.g_b, "big")
        if not _RANGE_MARGIN < g_b < self._prime - _RANGE_MARGIN:
            raise HandshakeError("g_b out of the safe range")
        auth_key = powmod(g_b, self._a, self._prime).to_bytes(256, "big")
        server_nonce = _wire128(self._server_nonce)
        new_key = NewAuthKey(
            auth_key=auth_key,
            auth_key_id=auth_key_id(auth_key),
            is_temp=self._is_temp,
            expires_at=now + self._expires_in if self._is_temp else None,
            dc_id=self._dc,
            first_salt=int.from_bytes(
                bytes(a ^ b for a, b in zip(self._new_nonce[:8], server_nonce[:8], strict=True)),
                "little",
                signed=True,
            ),
        )
        answer = mt.DhGenOk(
            nonce=self._nonce,
            server_nonce=self._server_nonce,
            new_nonce_hash1=_int128(new_nonce_hash(self._new_nonce, 1, auth_key)),
        )
        return answer, new_key

    def retry(self, key: NewAuthKey) -> TLObject:
        """``dh_gen_retry`` for a key whose id is taken; the client sends new g_b."""
        self._retry_aux = int.from_bytes(
            hashlib.sha1(key.auth_key).digest()[:8], "little", signed=True
        )
        self.stage = Stage.DH_SENT
        return mt.DhGenRetry(
            nonce=self._nonce,
            server_nonce=self._server_nonce,
            new_nonce_hash2=_int128(new_nonce_hash(self._new_nonce, 2, key.auth_key)),
        )
