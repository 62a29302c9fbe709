"""A browser's side of MTProto over WebSocket, for tests: wsproto as the client, the
obfuscated2 intermediate transport inside binary messages.

:class:`WsClient` speaks WebSocket (and lets a test send what a browser never would);
:class:`ObfuscatedIntermediate` is the transport a web app runs inside it;
:class:`WsRawConnection` joins the two behind ``RawConnection``'s interface, so the
key exchange and encrypted calls of ``telesrv.bench._client`` run over WebSocket.
It checks on every answer that one message holds exactly one transport packet.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import struct
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms, modes
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Message,
    Ping,
    Pong,
    RejectConnection,
    Request,
    TextMessage,
)

from telesrv.bench._client import MsgIdClock, RawConnection, TransportErrorCode
from telesrv.tl import decode, mt

WAIT = 5.0  # bound on waiting for the server to act on something already sent
_LEN = struct.Struct("<i")
_PLAIN_HEAD = struct.Struct("<qqi")
_INTERMEDIATE_TAG = b"\xee\xee\xee\xee"
# First words a client's random header must not start with (they name plain transports).
_RESERVED_STARTS = (b"\xee\xee\xee\xee", b"\xdd\xdd\xdd\xdd", b"GET ", b"POST", b"HEAD")


def _ctr(key: bytes, iv: bytes) -> CipherContext:
    return Cipher(algorithms.AES(key), modes.CTR(iv)).encryptor()


class ObfuscatedIntermediate:
    """Client side of obfuscated2 over intermediate framing (what Web K sends)."""

    def __init__(self, dc_id: int = 2) -> None:
        while True:
            plain = bytearray(os.urandom(64))
            if (
                plain[0] != 0xEF
                and bytes(plain[:4]) not in _RESERVED_STARTS
                and plain[4:8] != bytes(4)
            ):
                break
        plain[56:60] = _INTERMEDIATE_TAG
        plain[60:62] = dc_id.to_bytes(2, "little", signed=True)
        self._encryptor = _ctr(bytes(plain[8:40]), bytes(plain[40:56]))
        reversed_part = bytes(plain[8:56])[::-1]
        self._decryptor = _ctr(reversed_part[:32], reversed_part[32:48])
        encrypted = self._encryptor.update(bytes(plain))
        self.header = bytes(plain[:56]) + encrypted[56:]

    def encode(self, payload: bytes) -> bytes:
        return self._encryptor.update(_LEN.pack(len(payload)) + payload)

    def decode_one(self, message: bytes) -> bytes:
        """The payload of a message that must hold exactly one whole packet."""
        plain = self._decryptor.update(message)
        assert len(plain) >= 4, f"message of {len(plain)} bytes"
        (size,) = _LEN.unpack_from(plain, 0)
        assert size == len(plain) - 4, f"packet of {size} bytes in a message of {len(plain)}"
        return plain[4:]


def req_pq_packet(nonce: int) -> bytes:
    body = mt.ReqPqMulti(nonce=nonce).to_bytes()
    return _PLAIN_HEAD.pack(0, MsgIdClock().next(), len(body)) + body


def res_pq_of(payload: bytes) -> mt.ResPQ:
    key_id, _msg_id, length = _PLAIN_HEAD.unpack_from(payload, 0)
    assert key_id == 0
    answer = decode(payload[20 : 20 + length])
    assert isinstance(answer, mt.ResPQ)
    return answer


def upgrade_request(
    path: str = "/apiws",
    *,
    host: str = "localhost",
    subprotocols: tuple[str, ...] = ("binary",),
    extra: list[tuple[bytes, bytes]] | None = None,
) -> bytes:
    """The bytes of a browser's upgrade request (for tests that size or cut it)."""
    ws = WSConnection(ConnectionType.CLIENT)
    return ws.send(
        Request(
            host=host,
            target=path,
            subprotocols=list(subprotocols),
            extra_headers=extra or [],
        )
    )


@dataclass
class WsClient:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    ws: WSConnection
    accepted: AcceptConnection
    events: list[Event] = field(default_factory=list)  # not yet taken by a reader
    close_code: int | None = None

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        path: str = "/apiws",
        *,
        subprotocols: tuple[str, ...] = ("binary",),
        extra: list[tuple[bytes, bytes]] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> WsClient:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=tls, server_hostname="localhost" if tls else None
        )
        ws = WSConnection(ConnectionType.CLIENT)
        writer.write(
            ws.send(
                Request(
                    host="localhost",
                    target=path,
                    subprotocols=list(subprotocols),
                    extra_headers=extra or [],
                )
            )
        )
        pending: list[Event] = []
        async with asyncio.timeout(WAIT):
            while True:
                data = await reader.read(65536)
                assert data, "closed during the upgrade"
                ws.receive_data(data)
                pending.extend(ws.events())
                for i, event in enumerate(pending):
                    if isinstance(event, AcceptConnection):
                        return cls(reader, writer, ws, event, pending[i + 1 :])
                    assert not isinstance(event, RejectConnection), event

    def send(self, data: bytes, *, fragments: int = 1) -> None:
        """One binary message, in ``fragments`` frames."""
        step = max(1, -(-len(data) // fragments))
        parts = [data[i : i + step] for i in range(0, len(data), step)] or [b""]
        parts += [b""] * (fragments - len(parts))
        out = b"".join(
            self.ws.send(Message(data=part, message_finished=i == len(parts) - 1))
            for i, part in enumerate(parts)
        )
        self.writer.write(out)

    def send_event(self, event: Event) -> None:
        self.writer.write(self.ws.send(event))

    async def next_event(self) -> Event:
        async with asyncio.timeout(WAIT):
            while not self.events:
                data = await self.reader.read(65536)
                if not data:
                    self.ws.receive_data(None)
                else:
                    self.ws.receive_data(data)
                self.events.extend(self.ws.events())
        return self.events.pop(0)

    async def recv_message(self) -> bytes:
        """The next whole binary message (pings, pongs and closes are not expected)."""
        data = bytearray()
        while True:
            event = await self.next_event()
            assert isinstance(event, BytesMessage), event
            data += event.data
            if event.message_finished:
                return bytes(data)

    async def recv_control(self) -> Event:
        event = await self.next_event()
        assert isinstance(event, Ping | Pong | CloseConnection | TextMessage), event
        return event

    async def closed(self) -> int | None:
        """Read until the server closes; the close code it sent (None: none)."""
        async with asyncio.timeout(WAIT):
            while True:
                try:
                    data = await self.reader.read(65536)
                except ConnectionResetError:
                    data = b""
                if not data:
                    break
                self.ws.receive_data(data)
                for event in self.ws.events():
                    if isinstance(event, CloseConnection) and self.close_code is None:
                        self.close_code = event.code
        return self.close_code

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


class WsRawConnection(RawConnection):
    """``RawConnection`` over WebSocket: one packet per message each way."""

    def __init__(self, client: WsClient, transport: ObfuscatedIntermediate) -> None:
        super().__init__(client.reader, client.writer)
        self.client = client
        self.transport = transport
        self._started = False

    @classmethod
    async def open_ws(cls, host: str, port: int, path: str = "/apiws") -> WsRawConnection:
        return cls(await WsClient.open(host, port, path), ObfuscatedIntermediate())

    def send(self, payload: bytes) -> None:
        packet = self.transport.encode(payload)
        if not self._started:  # the header goes with the first packet, as Web K does
            packet = self.transport.header + packet
            self._started = True
        self.client.send(packet)

    async def recv(self) -> bytes:
        payload = self.transport.decode_one(await self.client.recv_message())
        if len(payload) == 4:
            raise TransportErrorCode(_LEN.unpack(payload)[0])
        return payload

    async def close(self) -> None:
        await self.client.close()


async def read_http_response(reader: asyncio.StreamReader) -> bytes:
    """Everything until the server closes (an HTTP refusal and its body)."""
    data = bytearray()
    async with asyncio.timeout(WAIT):
        while True:
            try:
                chunk = await reader.read(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    return bytes(data)


__all__ = [
    "WAIT",
    "ObfuscatedIntermediate",
    "WsClient",
    "WsRawConnection",
    "read_http_response",
    "req_pq_packet",
    "res_pq_of",
    "upgrade_request",
]
