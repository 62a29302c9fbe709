"""A small MTProto 2.0 client for load tests and protocol tests (not a user client).

It speaks the intermediate transport over asyncio streams, creates permanent or
temporary auth keys (RSA_PAD, DH) and sends encrypted messages, using telesrv's
own sans-io crypto. It does only what benchmarks and tests need: no reconnects,
no acknowledgements beyond what a single request needs, no update handling.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cryptg

from telesrv.mtproto import crypto
from telesrv.mtproto.bigint import powmod
from telesrv.mtproto.rsa import rsa_fingerprint
from telesrv.tl import TLObject, decode, mt
from telesrv.tl.core import GZIP_PACKED_ID, MSG_CONTAINER_ID
from telesrv.tl.service import unwrap_gzip

_INTERMEDIATE_TAG = b"\xee\xee\xee\xee"
_LEN = struct.Struct("<i")
_PLAIN_HEAD = struct.Struct("<qqi")
_HEADER = struct.Struct("<qqqii")  # salt, session_id, msg_id, seq_no, length
_ITEM_HEAD = struct.Struct("<qii")
_RPC_RESULT_ID = mt.RpcResult.CONSTRUCTOR_ID
_DH_EXPONENT_BYTES = 40  # 320-bit client secret, like the server's: cheap and sufficient here
_RANGE_MARGIN = 1 << (2048 - 64)
# Enough for a key that begins with a zero byte (one in 256) all but once in 10^7.
_EXPONENT_DRAWS = 4096
MAX_FRAME = 4 << 20


class ClientError(Exception):
    """The server answered something this client did not expect."""


class TransportErrorCode(ClientError):
    """The server sent a 4-byte transport error (e.g. -404) instead of a message."""

    def __init__(self, code: int) -> None:
        super().__init__(f"transport error {code}")
        self.code = code


@dataclass(frozen=True)
class PublicKey:
    n: int
    e: int

    @property
    def fingerprint(self) -> int:
        return rsa_fingerprint(self.n, self.e)


class RawConnection:
    """One TCP connection speaking the intermediate transport."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, host: str, port: int, source: str | None = None) -> RawConnection:
        """Connect to ``host:port``, from the local address ``source`` when given."""
        local_addr = (source, 0) if source is not None else None
        reader, writer = await asyncio.open_connection(host, port, local_addr=local_addr)
        writer.write(_INTERMEDIATE_TAG)
        return cls(reader, writer)

    def send(self, payload: bytes) -> None:
        self.writer.write(_LEN.pack(len(payload)) + payload)

    async def recv(self) -> bytes:
        (size,) = _LEN.unpack(await self.reader.readexactly(4))
        if not 4 <= size <= MAX_FRAME:
            raise ClientError(f"frame of {size} bytes")
        payload = await self.reader.readexactly(size)
        if size == 4:
            raise TransportErrorCode(_LEN.unpack(payload)[0])
        return payload

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


class MsgIdClock:
    """Client msg_ids: about unix time * 2^32, divisible by 4, strictly increasing."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset
        self._last = 0

    def next(self) -> int:
        msg_id = int((time.time() + self.offset) * 2**32) & ~3
        if msg_id <= self._last:
            msg_id = self._last + 4
        self._last = msg_id
        return msg_id


# -- key exchange -------------------------------------------------------------------


@dataclass(frozen=True)
class ClientKey:
    auth_key: bytes
    auth_key_id: int
    salt: int  # the first server salt (new_nonce XOR server_nonce)
    time_offset: float  # server time minus local time
    expires_at: int | None  # temporary keys


def _int_from(b: bytes) -> int:
    return int.from_bytes(b, "little", signed=True)


def rsa_pad_encrypt(data: bytes, key: PublicKey, random_bytes: Callable[[int], bytes]) -> bytes:
    """RSA_PAD of the MTProto 2.0 key exchange (client side)."""
    if len(data) > 144:
        raise ValueError("inner data too long for RSA_PAD")
    padded = data + random_bytes(192 - len(data))
    while True:
        temp_key = random_bytes(32)
        with_hash = padded[::-1] + hashlib.sha256(temp_key + padded).digest()
        aes_encrypted = cryptg.encrypt_ige(with_hash, temp_key, bytes(32))
        mask = hashlib.sha256(aes_encrypted).digest()
        temp_key_xor = bytes(a ^ b for a, b in zip(temp_key, mask, strict=True))
        value = int.from_bytes(temp_key_xor + aes_encrypted, "big")
        if value < key.n:
            return powmod(value, key.e, key.n).to_bytes(256, "big")


async def plain_call(conn: RawConnection, clock: MsgIdClock, request: TLObject) -> TLObject:
    body = request.to_bytes()
    conn.send(_PLAIN_HEAD.pack(0, clock.next(), len(body)) + body)
    payload = await conn.recv()
    key_id, _msg_id, length = _PLAIN_HEAD.unpack_from(payload, 0)
    if key_id != 0 or 20 + length > len(payload):
        raise ClientError("bad unencrypted answer")
    return decode(payload[20 : 20 + length])


async def create_auth_key(
    conn: RawConnection,
    server_key: PublicKey,
    *,
    temp_expires_in: int | None = None,
    dc: int = 2,
    random_bytes: Callable[[int], bytes] = os.urandom,
    key_wanted: Callable[[bytes], bool] | None = None,
) -> ClientKey:
    """Run req_pq_multi, req_DH_params and set_client_DH_params on ``conn``.

    ``key_wanted`` lets a test ask for a key of some shape (one that begins with a zero
    byte, say): the client's exponent is drawn again until the key passes."""
    clock = MsgIdClock()
    nonce = _int_from(random_bytes(16))
    res_pq = await plain_call(conn, clock, mt.ReqPqMulti(nonce=nonce))
    if not isinstance(res_pq, mt.ResPQ) or res_pq.nonce != nonce:
        raise ClientError(f"expected resPQ, got {res_pq!r}")
    if server_key.fingerprint not in res_pq.server_public_key_fingerprints:
        raise ClientError("server does not offer the expected key")
    pq = int.from_bytes(res_pq.pq, "big")
    p, q = cryptg.factorize_pq_pair(pq)
    p_bytes = p.to_bytes((p.bit_length() + 7) // 8, "big")
    q_bytes = q.to_bytes((q.bit_length() + 7) // 8, "big")
    new_nonce_wire = random_bytes(32)
    new_nonce = _int_from(new_nonce_wire)
    server_nonce = res_pq.server_nonce
    inner: TLObject
    common: dict[str, Any] = dict(
        pq=res_pq.pq, p=p_bytes, q=q_bytes, nonce=nonce, server_nonce=server_nonce,
        new_nonce=new_nonce, dc=dc,
    )  # fmt: skip
    if temp_expires_in is None:
        inner = mt.PQInnerDataDc(**common)
    else:
        inner = mt.PQInnerDataTempDc(**common, expires_in=temp_expires_in)
    encrypted = rsa_pad_encrypt(inner.to_bytes(), server_key, random_bytes)
    dh_params = await plain_call(
        conn,
        clock,
        mt.ReqDHParams(
            nonce=nonce,
            server_nonce=server_nonce,
            p=p_bytes,
            q=q_bytes,
            public_key_fingerprint=server_key.fingerprint,
            encrypted_data=encrypted,
        ),
    )
    if not isinstance(dh_params, mt.ServerDHParamsOk):
        raise ClientError(f"expected server_DH_params_ok, got {dh_params!r}")
    server_nonce_wire = server_nonce.to_bytes(16, "little", signed=True)
    tmp_key, tmp_iv = crypto.tmp_aes_key_iv(new_nonce_wire, server_nonce_wire)
    answer = crypto.aes_ige_decrypt(dh_params.encrypted_answer, tmp_key, tmp_iv)
    dh_inner = decode(answer[20:], exact=False)
    if not isinstance(dh_inner, mt.ServerDHInnerData):
        raise ClientError("expected server_DH_inner_data")
    if hashlib.sha1(dh_inner.to_bytes()).digest() != answer[:20]:
        raise ClientError("server_DH_inner_data hash mismatch")
    time_offset = dh_inner.server_time - time.time()
    prime = int.from_bytes(dh_inner.dh_prime, "big")
    g_a = int.from_bytes(dh_inner.g_a, "big")
    for _ in range(_EXPONENT_DRAWS):
        b = int.from_bytes(random_bytes(_DH_EXPONENT_BYTES), "big") | 1 << (
            _DH_EXPONENT_BYTES * 8 - 1
        )
        g_b = powmod(dh_inner.g, b, prime)
        if not _RANGE_MARGIN < g_b < prime - _RANGE_MARGIN:
            continue
        auth_key = powmod(g_a, b, prime).to_bytes(256, "big")
        if key_wanted is None or key_wanted(auth_key):
            break
    else:
        raise ClientError(f"no key as wanted in {_EXPONENT_DRAWS} draws")
    client_inner = mt.ClientDHInnerData(
        nonce=nonce, server_nonce=server_nonce, retry_id=0, g_b=g_b.to_bytes(256, "big")
    ).to_bytes()
    data = hashlib.sha1(client_inner).digest() + client_inner
    data += random_bytes(-len(data) % 16)
    result = await plain_call(
        conn,
        clock,
        mt.SetClientDHParams(
            nonce=nonce,
            server_nonce=server_nonce,
            encrypted_data=crypto.aes_ige_encrypt(data, tmp_key, tmp_iv),
        ),
    )
    if not isinstance(result, mt.DhGenOk):
        raise ClientError(f"expected dh_gen_ok, got {result!r}")
    expected = crypto.new_nonce_hash(new_nonce_wire, 1, auth_key)
    if result.new_nonce_hash1.to_bytes(16, "little", signed=True) != expected:
        raise ClientError("new_nonce_hash1 mismatch")
    salt = _int_from(
        bytes(a ^ b for a, b in zip(new_nonce_wire[:8], server_nonce_wire[:8], strict=True))
    )
    expires_at = None
    if temp_expires_in is not None:
        expires_at = int(time.time() + time_offset) + temp_expires_in
    return ClientKey(auth_key, crypto.auth_key_id(auth_key), salt, time_offset, expires_at)


# -- encrypted messages -----------------------------------------------------------


@dataclass(frozen=True)
class ServerMessage:
    msg_id: int
    seq_no: int
    body: bytes

    @property
    def constructor(self) -> int:
        return int.from_bytes(self.body[:4], "little")


@dataclass
class EncryptedSession:
    """Client side of one session on an auth key."""

    auth_key: bytes
    salt: int
    session_id: int = field(default_factory=lambda: _int_from(os.urandom(8)))
    clock: MsgIdClock = field(default_factory=MsgIdClock)
    random_bytes: Callable[[int], bytes] = os.urandom
    _content_sent: int = 0

    def __post_init__(self) -> None:
        self.auth_key_id_bytes = crypto.auth_key_id_bytes(self.auth_key)

    def next_seq_no(self, content: bool) -> int:
        if content:
            self._content_sent += 1
            return 2 * self._content_sent - 1
        return 2 * self._content_sent

    def encrypt(
        self,
        body: bytes,
        *,
        content: bool = True,
        msg_id: int | None = None,
        seq_no: int | None = None,
    ) -> tuple[int, bytes]:
        """An encrypted client message carrying ``body``; returns (msg_id, payload)."""
        if msg_id is None:
            msg_id = self.clock.next()
        if seq_no is None:
            seq_no = self.next_seq_no(content)
        plaintext = _HEADER.pack(self.salt, self.session_id, msg_id, seq_no, len(body)) + body
        plaintext += self.random_bytes(crypto.padding_length(len(plaintext)))
        msg_key = crypto.message_key(self.auth_key, plaintext, from_client=True)
        key, iv = crypto.message_aes_key_iv(self.auth_key, msg_key, from_client=True)
        return msg_id, self.auth_key_id_bytes + msg_key + crypto.aes_ige_encrypt(plaintext, key, iv)

    def decrypt(self, payload: bytes) -> list[ServerMessage]:
        """A server packet as its messages (containers and gzip_packed unwrapped)."""
        if payload[:8] != self.auth_key_id_bytes:
            raise ClientError("answer for another auth key")
        msg_key = payload[8:24]
        key, iv = crypto.message_aes_key_iv(self.auth_key, msg_key, from_client=False)
        plaintext = crypto.aes_ige_decrypt(payload[24:], key, iv)
        if not hmac.compare_digest(
            crypto.message_key(self.auth_key, plaintext, from_client=False), msg_key
        ):
            raise ClientError("server message fails msg_key check")
        _salt, session_id, msg_id, seq_no, length = _HEADER.unpack_from(plaintext, 0)
        if session_id != self.session_id:
            raise ClientError("server message for another session")
        return _expand(ServerMessage(msg_id, seq_no, plaintext[32 : 32 + length]))


def _expand(message: ServerMessage) -> list[ServerMessage]:
    cid = message.constructor
    if cid == GZIP_PACKED_ID:
        return _expand(ServerMessage(message.msg_id, message.seq_no, unwrap_gzip(message.body)))
    if cid != MSG_CONTAINER_ID:
        return [message]
    (count,) = struct.unpack_from("<i", message.body, 4)
    pos = 8
    out: list[ServerMessage] = []
    for _ in range(count):
        msg_id, seq_no, length = _ITEM_HEAD.unpack_from(message.body, pos)
        pos += 16
        out.extend(_expand(ServerMessage(msg_id, seq_no, message.body[pos : pos + length])))
        pos += length
    return out


def rpc_result_of(message: ServerMessage) -> tuple[int, bytes] | None:
    """(req_msg_id, result bytes) when ``message`` is an rpc_result, gzip unwrapped."""
    if message.constructor != _RPC_RESULT_ID:
        return None
    (req_msg_id,) = struct.unpack_from("<q", message.body, 4)
    result = message.body[12:]
    if int.from_bytes(result[:4], "little") == GZIP_PACKED_ID:
        result = unwrap_gzip(result)
    return req_msg_id, result


class EncryptedClient:
    """An established key on a connection; sends requests and waits for their answers."""

    def __init__(self, conn: RawConnection, session: EncryptedSession) -> None:
        self.conn = conn
        self.session = session
        self.received: list[ServerMessage] = []  # everything seen, for tests

    async def recv_messages(self) -> list[ServerMessage]:
        messages = self.session.decrypt(await self.conn.recv())
        self.received.extend(messages)
        for m in messages:
            if m.constructor == mt.BadServerSalt.CONSTRUCTOR_ID:
                self.session.salt = decode(m.body).new_server_salt  # type: ignore[attr-defined]
        return messages

    async def call(
        self, request: bytes, *, content: bool = True, msg_id: int | None = None
    ) -> bytes:
        """Send ``request`` and return the matching answer: the rpc_result's result, or
        the body of a pong. Sent again with a new msg_id after bad_server_salt."""
        for _attempt in range(3):
            msg_id, payload = self.session.encrypt(request, content=content, msg_id=msg_id)
            self.conn.send(payload)
            while True:
                messages = await self.recv_messages()
                answer = _answer_for(msg_id, messages)
                if answer is not None:
                    break
            if answer == b"":
                msg_id = None  # bad_server_salt: salt updated, send again
                continue
            return answer
        raise ClientError("server keeps rejecting the salt")

    async def ping(self, ping_id: int) -> None:
        body = await self.call(mt.Ping(ping_id=ping_id).to_bytes())
        pong = decode(body)
        if not isinstance(pong, mt.Pong) or pong.ping_id != ping_id:
            raise ClientError(f"expected pong {ping_id}, got {pong!r}")


def _answer_for(msg_id: int, messages: list[ServerMessage]) -> bytes | None:
    """The answer to ``msg_id`` in ``messages``; b"" for a bad_server_salt about it."""
    for m in messages:
        cid = m.constructor
        if cid == mt.Pong.CONSTRUCTOR_ID:
            if struct.unpack_from("<q", m.body, 4)[0] == msg_id:
                return m.body
        elif cid == _RPC_RESULT_ID:
            result = rpc_result_of(m)
            if result is not None and result[0] == msg_id:
                return result[1]
        elif cid in (mt.BadServerSalt.CONSTRUCTOR_ID, mt.BadMsgNotification.CONSTRUCTOR_ID):
            notice = decode(m.body)
            if notice.bad_msg_id == msg_id:  # type: ignore[attr-defined]
                if cid == mt.BadServerSalt.CONSTRUCTOR_ID:
                    return b""
                raise ClientError(f"bad_msg_notification {notice.error_code}")  # type: ignore[attr-defined]
    return None


def loopback_source(index: int, per_address: int) -> str:
    """The loopback address client ``index`` connects from, ``per_address`` clients to
    an address: 127.0.0.2, 127.0.0.3, ... (Linux routes all of 127/8 to lo). Load from
    one address would meet the server's per-address connection limit, and past some
    28,000 connections the ephemeral ports of one address run out."""
    n = index // per_address + 2  # 127.0.0.1 is the server's own
    return f"127.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"


async def connect_new_key(
    host: str,
    port: int,
    server_key: PublicKey,
    *,
    temp_expires_in: int | None = None,
    source: str | None = None,
) -> tuple[EncryptedClient, ClientKey]:
    """Open a connection, create a key on it and return a client for a fresh session."""
    conn = await RawConnection.open(host, port, source)
    try:
        key = await create_auth_key(conn, server_key, temp_expires_in=temp_expires_in)
    except BaseException:
        await conn.close()
        raise
    session = EncryptedSession(key.auth_key, key.salt, clock=MsgIdClock(key.time_offset))
    return EncryptedClient(conn, session), key
