"""Fewer writes per answer: the acks of a request wait (a little) for its answer and
leave in the same packet; everything one loop turn flushes to a connection goes out in
one write. Over real sockets against the real gateway, and on a bare Gateway."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from e2e.conftest import RunningServer

from gateway.test_hostile_mtproto import GET_CONFIG, new_raw_client
from gateway.test_push import make_gateway
from telesrv.bench._client import EncryptedClient, ServerMessage, rpc_result_of
from telesrv.gateway.connection import ClientConnection
from telesrv.gateway.server import Gateway
from telesrv.tl import decode, mt

MSGS_ACK = mt.MsgsAck.CONSTRUCTOR_ID


def acked_ids(messages: list[ServerMessage]) -> list[int]:
    ids: list[int] = []
    for m in messages:
        if m.constructor == MSGS_ACK:
            ack = decode(m.body)
            assert isinstance(ack, mt.MsgsAck)
            ids.extend(ack.msg_ids)
    return ids


def answered_ids(messages: list[ServerMessage]) -> list[int]:
    answers = [rpc_result_of(m) for m in messages]
    return [a[0] for a in answers if a is not None]


def set_ack_hold(gateway: Gateway, seconds: float) -> Iterator[None]:
    saved = gateway.limits
    gateway.limits = dataclasses.replace(saved, ack_hold=seconds)
    try:
        yield
    finally:
        gateway.limits = saved


@pytest.fixture
def long_ack_hold(server: RunningServer) -> Iterator[None]:
    """Acks wait for their answers far longer than any answer takes here."""
    yield from set_ack_hold(server.gateway, 60.0)


@pytest.fixture
def short_ack_hold(server: RunningServer) -> Iterator[None]:
    yield from set_ack_hold(server.gateway, 0.01)


def send(client: EncryptedClient, body: bytes, msg_id: int | None = None) -> int:
    msg_id, payload = client.session.encrypt(body, msg_id=msg_id)
    client.conn.send(payload)
    return msg_id


async def test_ack_of_a_request_leaves_with_its_answer(
    server: RunningServer, long_ack_hold: None
) -> None:
    client = await new_raw_client(server)
    async with asyncio.timeout(10):
        for _ in range(3):
            msg_id = send(client, GET_CONFIG)
            # The first packet after the request holds both its ack and its answer.
            packet = await client.recv_messages()
            assert msg_id in acked_ids(packet)
            assert answered_ids(packet) == [msg_id]
    await client.conn.close()


async def test_ack_of_a_request_still_running_goes_alone(
    server: RunningServer, short_ack_hold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatcher = server.gateway.dispatcher
    original: Callable[..., Awaitable[Any]] = dispatcher.call
    release = asyncio.Event()
    held: set[int] = set()

    async def gated(ctx: Any, request: Any) -> Any:
        if ctx.msg_id in held:
            await release.wait()
        return await original(ctx, request)

    monkeypatch.setattr(dispatcher, "call", gated)
    client = await new_raw_client(server)
    async with asyncio.timeout(10):
        msg_id = client.session.clock.next()
        held.add(msg_id)
        assert send(client, GET_CONFIG, msg_id) == msg_id
        first = await client.recv_messages()
        assert acked_ids(first) == [msg_id]
        assert answered_ids(first) == []
        release.set()
        second = await client.recv_messages()
        assert answered_ids(second) == [msg_id]
        assert acked_ids(second) == []
    await client.conn.close()


async def test_ping_is_answered_at_once(server: RunningServer, long_ack_hold: None) -> None:
    """Only acks waiting on requests are held: a pong (an answer) goes at once."""
    client = await new_raw_client(server)
    async with asyncio.timeout(10):
        await client.ping(7)  # would wait the minute for a held ack
    await client.conn.close()


# -- one write per connection per flush ----------------------------------------------------


class Codec:
    def encode(self, packet: bytes) -> bytes:
        return b"<" + packet + b">"


class WritingConnection:
    def __init__(self) -> None:
        self.sessions: set[Any] = set()
        self.codec = Codec()
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def write_packets(self, packets: list[bytes]) -> None:
        ClientConnection.write_packets(self, packets)  # type: ignore[arg-type]


class QueuedSession:
    def __init__(self, packets: list[bytes]) -> None:
        self.packets = packets

    def on_reconnect(self) -> None:
        pass

    def flush(self, now: float) -> list[bytes]:
        packets, self.packets = self.packets, []
        return packets


async def test_flush_writes_once_per_connection() -> None:
    gateway = make_gateway()
    queued = iter([[b"a1", b"a2"], [b"b1"], [b"c1", b"c2"], []])
    gateway.sessions._make_session = lambda *a: QueuedSession(next(queued))  # type: ignore[assignment]
    shared, alone, idle = WritingConnection(), WritingConnection(), WritingConnection()
    first = gateway.sessions.attach(b"k", 1, 1, 1, shared, 0.0)  # type: ignore[arg-type]
    second = gateway.sessions.attach(b"k", 1, 1, 2, shared, 0.0)  # type: ignore[arg-type]
    third = gateway.sessions.attach(b"k", 2, 2, 1, alone, 0.0)  # type: ignore[arg-type]
    nothing = gateway.sessions.attach(b"k", 3, 3, 1, idle, 0.0)  # type: ignore[arg-type]
    for entry in (first, second, third, nothing):
        gateway.schedule_flush(entry)
    await asyncio.sleep(0)  # the coalesced flush runs
    assert len(shared.writes) == 1
    # Each session's packets in their order; sessions in either order.
    assert shared.writes[0] in (b"<a1><a2><b1>", b"<b1><a1><a2>")
    assert alone.writes == [b"<c1><c2>"]
    assert idle.writes == []  # nothing to send: no write at all
