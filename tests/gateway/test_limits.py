"""Limits on what a client can hold without logging in, over real sockets.

Deadlines are checked by calling the server-side connection's ``check_health`` with
chosen times (at the limit, and just past it), so no test waits for a timeout or
depends on how fast the machine is. A well-behaved Telethon client connected before
the abuse keeps working throughout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import resource
import struct
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from e2e.conftest import RunningServer, e2e_settings
from telethon import TelegramClient
from telethon.crypto import rsa as telethon_rsa

from gateway.test_hostile import (
    INTERMEDIATE,
    encrypted_client_on,
    open_raw,
    read_until_closed,
    still_works,
)
from gateway.test_hostile_mtproto import GET_CONFIG, new_raw_client
from gateway.test_push import make_gateway
from telesrv.app import open_resources
from telesrv.bench._client import (
    ClientKey,
    MsgIdClock,
    PublicKey,
    RawConnection,
    TransportErrorCode,
    connect_new_key,
    create_auth_key,
    plain_call,
)
from telesrv.config import Settings
from telesrv.gateway import server as server_module
from telesrv.gateway.budgets import TokenBucket
from telesrv.gateway.connection import ClientConnection
from telesrv.gateway.server import Gateway, GatewayLimits
from telesrv.mtproto.crypto import auth_key_id
from telesrv.store import auth_keys as key_store
from telesrv.tl import mt
from telesrv.wiring import build_server

WAIT = 5.0  # bound on waiting for the server to act on something already sent


@pytest.fixture(scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, redis: Any
) -> AsyncIterator[RunningServer]:
    """The e2e server, with deadlines checked often and keys cleaned up often."""
    settings = e2e_settings(
        tmp_path_factory.mktemp("telesrv-data"),
        database_url,
        redis_url,
        housekeeping_interval=0.05,
        auth_key_cleanup_interval=0.1,
    )
    async with open_resources(settings) as resources:
        built = build_server(settings, resources)
        host, port = await built.start(settings.listen_host, settings.listen_port)
        running = RunningServer(settings, resources, built, host, port)
        telethon_rsa.add_key(resources.server_key.public_pem, old=False)
        try:
            yield running
        finally:
            await running.server.stop()


@pytest.fixture
async def good_client(make_client: Any) -> AsyncIterator[TelegramClient]:
    client = make_client()
    await client.connect()
    await still_works(client)
    yield client


async def server_side(server: RunningServer, writer: asyncio.StreamWriter) -> ClientConnection:
    """The gateway's connection object for our end of a socket."""
    peer = f"127.0.0.1:{writer.get_extra_info('sockname')[1]}"
    async with asyncio.timeout(WAIT):
        while True:
            for conn in server.gateway.connections:
                if conn.peer == peer:
                    return conn
            await asyncio.sleep(0.01)


async def until(condition: Any) -> None:
    async with asyncio.timeout(WAIT):
        while not condition():
            await asyncio.sleep(0.01)


def public_key(server: RunningServer) -> PublicKey:
    numbers = server.resources.server_key.private_key.public_key().public_numbers()
    return PublicKey(numbers.n, numbers.e)


async def req_pq(conn: RawConnection) -> object:
    return await plain_call(conn, MsgIdClock(), mt.ReqPqMulti(nonce=4242))


# -- settings -------------------------------------------------------------------------


def test_gateway_limits_come_from_settings(server: RunningServer) -> None:
    settings = Settings(
        frame_timeout=3.0,
        idle_timeout=40.0,
        handshake_timeout=7.0,
        incomplete_frames_budget=1234,
        max_connections_per_ip=9,
        handshakes_per_ip_per_second=0.5,
        handshake_burst_per_ip=4,
        unused_auth_key_ttl=60.0,
    )
    limits = GatewayLimits.from_settings(settings)
    for name in (
        "frame_timeout",
        "idle_timeout",
        "handshake_timeout",
        "incomplete_frames_budget",
        "max_connections_per_ip",
        "handshakes_per_ip_per_second",
        "handshake_burst_per_ip",
        "unused_auth_key_ttl",
    ):
        assert getattr(limits, name) == getattr(settings, name)
    assert server.gateway.limits.housekeeping_interval == 0.05  # what build_server passed


@pytest.mark.parametrize(
    "changes",
    [
        {"frame_timeout": 0},
        {"idle_timeout": -1},
        {"incomplete_frames_budget": 0},
        {"max_connections_per_ip": 0},
        {"handshakes_per_ip_per_second": 0},
        {"db_statement_timeout": 0},
        {"db_acquire_timeout": 0},
        {"unused_auth_key_ttl": 0},
    ],
)
def test_limit_settings_are_checked(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Settings(**changes)


# -- a frame must complete in time -------------------------------------------------------


async def test_half_sent_frame_is_dropped_at_the_frame_deadline(
    server: RunningServer, good_client: TelegramClient
) -> None:
    reader, writer = await open_raw(server)
    writer.write(INTERMEDIATE + struct.pack("<i", 1024) + bytes(100))
    conn = await server_side(server, writer)
    await until(lambda: conn.frame_started_at is not None)
    started = conn.frame_started_at
    assert started is not None
    # Only the frame deadline is under test here, not the one for creating a key.
    conn.limits = dataclasses.replace(conn.limits, handshake_timeout=1e9)
    deadline = started + conn.limits.frame_timeout
    conn.check_health(deadline)  # at the limit: still waiting for the rest
    assert not conn.transport.is_closing()  # type: ignore[union-attr]
    writer.write(bytes(100))  # more bytes of the same frame do not move the deadline
    await until(lambda: conn._incomplete >= 200)
    assert conn.frame_started_at == started
    conn.check_health(deadline + 0.001)  # past it
    assert await read_until_closed(reader) == b""
    writer.close()
    await still_works(good_client)


async def test_frame_deadline_closes_through_housekeeping(
    server: RunningServer, good_client: TelegramClient, limits: Any
) -> None:
    limits(frame_timeout=0.05)
    reader, writer = await open_raw(server)
    writer.write(INTERMEDIATE + struct.pack("<i", 1024) + bytes(10))
    assert await read_until_closed(reader, timeout=WAIT) == b""
    writer.close()
    await still_works(good_client)


async def test_frames_split_across_reads_are_served(
    server: RunningServer, good_client: TelegramClient
) -> None:
    conn = await RawConnection.open(server.host, server.port)
    body = mt.ReqPqMulti(nonce=77).to_bytes()
    packet = struct.pack("<qqi", 0, MsgIdClock().next(), len(body)) + body
    framed = struct.pack("<i", len(packet)) + packet
    for i in range(0, len(framed), 7):  # a slow but steady client
        conn.writer.write(framed[i : i + 7])
        await conn.writer.drain()
        await asyncio.sleep(0)
    answer = await conn.recv()
    assert answer[:8] == bytes(8)  # an unencrypted resPQ
    side = await server_side(server, conn.writer)
    assert side.frame_started_at is None and side._incomplete == 0
    await conn.close()
    await still_works(good_client)


# -- idle connections ------------------------------------------------------------------


async def test_a_trickle_of_bytes_does_not_keep_a_connection(
    server: RunningServer, good_client: TelegramClient
) -> None:
    raw = await RawConnection.open(server.host, server.port)
    client = encrypted_client_on(raw, good_client)
    await client.ping(1)
    conn = await server_side(server, raw.writer)
    active = conn.last_activity
    # No frame deadline here: only the idle deadline is under test.
    conn.limits = dataclasses.replace(conn.limits, frame_timeout=1e9)
    for _ in range(3):
        raw.writer.write(b"\x01")  # one byte at a time of a frame that never completes
        await raw.writer.drain()
        await asyncio.sleep(0.02)
    await until(lambda: conn._incomplete >= 3)
    assert conn.last_activity == active
    conn.check_health(active + conn.limits.idle_timeout)  # at the limit
    assert not conn.transport.is_closing()  # type: ignore[union-attr]
    conn.check_health(active + conn.limits.idle_timeout + 0.001)
    assert await read_until_closed(raw.reader) == b""
    await raw.close()
    await still_works(good_client)


async def test_complete_messages_keep_a_connection(
    server: RunningServer, good_client: TelegramClient
) -> None:
    raw = await RawConnection.open(server.host, server.port)
    client = encrypted_client_on(raw, good_client)
    await client.ping(1)
    conn = await server_side(server, raw.writer)
    first = conn.last_activity
    await asyncio.sleep(0.01)
    await client.ping(2)
    assert conn.last_activity > first
    await raw.close()


# -- memory of incomplete frames ----------------------------------------------------------


async def test_incomplete_frames_share_one_budget_oldest_goes_first(
    server: RunningServer, good_client: TelegramClient, limits: Any
) -> None:
    gateway = server.gateway
    initial = gateway.incomplete_bytes
    budget = initial + 3000
    limits(incomplete_frames_budget=budget)
    reader_a, writer_a = await open_raw(server)
    writer_a.write(INTERMEDIATE + struct.pack("<i", 4000) + bytes(1500))
    conn_a = await server_side(server, writer_a)
    await until(lambda: conn_a._incomplete >= 1500)

    reader_b, writer_b = await open_raw(server)
    writer_b.write(INTERMEDIATE + struct.pack("<i", 4000) + bytes(100))
    conn_b = await server_side(server, writer_b)
    await until(lambda: conn_b._incomplete >= 100)
    room = budget - gateway.incomplete_bytes
    writer_b.write(bytes(room))  # exactly at the budget: both stay
    await until(lambda: gateway.incomplete_bytes == budget)
    assert not conn_a.transport.is_closing()  # type: ignore[union-attr]
    assert not conn_b.transport.is_closing()  # type: ignore[union-attr]
    writer_b.write(b"\0")  # one byte past it: the oldest incomplete frame (A's) goes
    assert await read_until_closed(reader_a) == b""
    assert not conn_b.transport.is_closing()  # type: ignore[union-attr]
    assert gateway.incomplete_bytes == conn_b._incomplete + initial <= budget
    writer_a.close()
    writer_b.close()
    await until(lambda: conn_a not in gateway.connections and conn_b not in gateway.connections)
    assert gateway.incomplete_bytes == initial
    assert not gateway.partial_frames
    del reader_b
    await still_works(good_client)


@pytest.mark.slow
async def test_many_half_sent_frames_stay_within_the_budget(
    server: RunningServer, good_client: TelegramClient, limits: Any
) -> None:
    """The attack: many connections each send most of a 1 MiB frame and stop."""
    gateway = server.gateway
    budget = gateway.incomplete_bytes + 2 * 1024 * 1024
    limits(incomplete_frames_budget=budget)
    part = 256 * 1024
    writers = []
    readers = []
    for _ in range(48):  # 12 MiB sent in all
        reader, writer = await open_raw(server)
        writer.write(INTERMEDIATE + struct.pack("<i", 1024 * 1024) + bytes(part))
        readers.append(reader)
        writers.append(writer)
    for writer in writers:
        await writer.drain()
    # Each connection's bytes arrive, and the oldest frames are dropped to make room.
    closed = await asyncio.gather(
        *(read_until_closed(r, timeout=WAIT) for r in readers), return_exceptions=True
    )
    assert gateway.incomplete_bytes <= budget
    dropped = sum(1 for c in closed if c == b"")
    assert dropped >= 48 - budget // part
    await still_works(good_client)
    for writer in writers:
        writer.close()
    await until(lambda: gateway.incomplete_bytes == budget - 2 * 1024 * 1024)


async def test_queued_frames_are_bounded_in_bytes(
    server: RunningServer, good_client: TelegramClient, limits: Any
) -> None:
    limit = limits(max_queued_bytes=256 * 1024).max_queued_bytes
    gateway = server.gateway
    busy = threading.Event()
    # The key-exchange thread is busy: the connection's first frame waits for it, and
    # everything after queues behind that frame.
    blocker = asyncio.ensure_future(gateway.run_cpu(busy.wait))
    try:
        conn = await RawConnection.open(server.host, server.port)
        body = mt.ReqPqMulti(nonce=5).to_bytes()
        conn.send(struct.pack("<qqi", 0, MsgIdClock().next(), len(body)) + body)
        chunk = bytes(64 * 1024)
        sent = 0
        for _ in range(40):
            conn.send(chunk)
            sent += len(chunk)
        side = await server_side(server, conn.writer)
        await until(lambda: side._reading_paused)
        await asyncio.sleep(0.05)  # let anything already read settle
        # Reading stopped near the byte bound, far below what the client sent.
        assert side._queued_bytes + side._incomplete < limit + 512 * 1024 < sent
    finally:
        busy.set()
        await blocker
    received = await read_until_closed(conn.reader)  # resPQ, then closed on the junk
    assert received[4:12] == bytes(8)
    await conn.close()
    await still_works(good_client)


# -- connections per address ---------------------------------------------------------------


async def test_connections_per_address_are_limited(
    server: RunningServer, good_client: TelegramClient, limits: Any
) -> None:
    gateway = server.gateway
    already = gateway.connections_per_ip.get("127.0.0.1", 0)
    limits(max_connections_per_ip=already + 2)
    allowed = [await RawConnection.open(server.host, server.port) for _ in range(2)]
    for conn in allowed:  # at the limit: served
        assert isinstance(await req_pq(conn), mt.ResPQ)
    reader, writer = await open_raw(server)  # past it: closed at once
    assert await read_until_closed(reader) == b""
    writer.close()
    await allowed[0].close()
    await until(lambda: gateway.connections_per_ip.get("127.0.0.1", 0) == already + 1)
    again = await RawConnection.open(server.host, server.port)  # a slot is free again
    assert isinstance(await req_pq(again), mt.ResPQ)
    for conn in (allowed[1], again):
        await conn.close()
    await until(lambda: gateway.connections_per_ip.get("127.0.0.1", 0) == already)
    await still_works(good_client)


async def test_connections_in_all_are_limited(
    server: RunningServer, good_client: TelegramClient, limits: Any
) -> None:
    gateway = server.gateway
    already = len(gateway.connections)
    limits(max_connections=already + 2)
    allowed = [await RawConnection.open(server.host, server.port) for _ in range(2)]
    for conn in allowed:  # at the limit: served
        assert isinstance(await req_pq(conn), mt.ResPQ)
    reader, writer = await open_raw(server)  # past it: closed at once
    assert await read_until_closed(reader) == b""
    writer.close()
    await allowed[0].close()
    await until(lambda: len(gateway.connections) == already + 1)
    again = await RawConnection.open(server.host, server.port)  # a slot is free again
    assert isinstance(await req_pq(again), mt.ResPQ)
    for conn in (allowed[1], again):
        await conn.close()
    await until(lambda: len(gateway.connections) == already)
    await still_works(good_client)


# -- key exchanges per address --------------------------------------------------------------


async def test_key_exchanges_are_budgeted_per_address_not_per_connection(
    server: RunningServer, good_client: TelegramClient, limits: Any, make_client: Any
) -> None:
    limits(handshake_burst_per_ip=2, handshakes_per_ip_per_second=1e-6)
    server.gateway._ip_handshake_budgets.clear()
    conn = await RawConnection.open(server.host, server.port)
    for _ in range(2):  # at the limit: two exchanges on one connection
        await create_auth_key(conn, public_key(server))
    with pytest.raises(TransportErrorCode) as info:  # a third on the same connection
        await create_auth_key(conn, public_key(server))
    assert info.value.code == -429
    await conn.close()
    other = await RawConnection.open(server.host, server.port)  # nor on another one
    with pytest.raises(TransportErrorCode) as info:
        await req_pq(other)
    assert info.value.code == -429
    await other.close()
    await still_works(good_client)  # an existing key is not affected


def test_per_address_budget_is_forgotten_once_refilled() -> None:
    gateway = Gateway.__new__(Gateway)
    gateway.limits = GatewayLimits(handshake_burst_per_ip=2, handshakes_per_ip_per_second=1.0)
    gateway._ip_handshake_budgets = {}
    gateway.handshake_budget = TokenBucket(1e9, 10**9)
    assert gateway.take_handshake("10.0.0.1", 100.0)
    assert gateway.take_handshake("10.0.0.1", 100.0)
    assert not gateway.take_handshake("10.0.0.1", 100.0)
    assert gateway.take_handshake("10.0.0.2", 100.0)  # another address has its own
    assert not gateway._ip_handshake_budgets["10.0.0.1"].full(101.0)
    assert gateway._ip_handshake_budgets["10.0.0.1"].full(102.0)


# -- temporary keys expire on open connections ----------------------------------------------


async def test_expired_temporary_key_closes_its_connection_with_404(
    server: RunningServer, good_client: TelegramClient
) -> None:
    gateway = server.gateway
    client, key = await connect_new_key(
        server.host, server.port, public_key(server), temp_expires_in=60
    )
    assert key.expires_at is not None
    await client.ping(1)
    conn = await server_side(server, client.conn.writer)
    stored = conn.auth_key
    assert stored is not None and stored.expires_at is not None
    real_clock = gateway.clock
    try:
        gateway.clock = lambda: stored.expires_at - 0.5  # type: ignore[operator]
        await client.ping(2)  # at the limit: still valid
        gateway.clock = lambda: stored.expires_at + 0.5  # type: ignore[operator]
        with pytest.raises(TransportErrorCode) as info:
            await client.ping(3)
        assert info.value.code == -404
        assert await read_until_closed(client.conn.reader) == b""
    finally:
        gateway.clock = real_clock
    await client.conn.close()
    await still_works(good_client)


async def test_idle_connection_on_expired_temporary_key_is_closed_with_404(
    server: RunningServer, good_client: TelegramClient
) -> None:
    client, key = await connect_new_key(
        server.host, server.port, public_key(server), temp_expires_in=60
    )
    await client.ping(1)
    conn = await server_side(server, client.conn.writer)
    assert conn.auth_key is not None and conn.auth_key.expires_at is not None
    conn.check_health(conn.auth_key.expires_at - 0.5)  # before expiry: nothing happens
    assert conn._key_check is None
    conn.check_health(conn.auth_key.expires_at + 0.5)
    with pytest.raises(TransportErrorCode) as info:
        await client.conn.recv()
    assert info.value.code == -404
    await client.conn.close()
    await still_works(good_client)


# -- unused keys are deleted ---------------------------------------------------------------


async def _new_key(server: RunningServer, *, temp_expires_in: int | None = None) -> ClientKey:
    client, key = await connect_new_key(
        server.host, server.port, public_key(server), temp_expires_in=temp_expires_in
    )
    await client.conn.close()
    return key


async def test_cleanup_deletes_expired_and_never_used_keys(
    server: RunningServer, good_client: TelegramClient
) -> None:
    db = server.resources.db
    service = server.gateway.auth_keys
    expired_temp = await _new_key(server, temp_expires_in=60)
    unused_perm = await _new_key(server)
    logged_in = good_client.session.auth_key.key
    logged_in_id = auth_key_id(logged_in)
    await good_client.start(phone="+15559990001", code_callback=lambda: "12345")
    row = await key_store.get_auth_key(db.pool, unused_perm.auth_key_id)
    assert row is not None
    created = row.created_at.timestamp()
    ttl = 30.0  # shorter than the temporary key's life

    async def exists(key_id: int) -> bool:
        return await key_store.get_auth_key(db.pool, key_id) is not None

    # Not yet: the temporary key is valid, the permanent one younger than the ttl.
    await service.delete_unused(created + ttl - 1, ttl)
    assert await exists(expired_temp.auth_key_id) and await exists(unused_perm.auth_key_id)
    # Past both: the expired temporary key and the permanent key nobody logged in with
    # go; the logged-in key stays. Both sides keep the expiry in whole seconds from the
    # server's clock, the client's from the time the server told it one step earlier,
    # so the server's may be one second later than the client's: two seconds past the
    # client's is past the server's.
    await service.delete_unused(expired_temp.expires_at + 2, ttl)  # type: ignore[operator]
    assert not await exists(expired_temp.auth_key_id)
    assert not await exists(unused_perm.auth_key_id)
    assert await exists(logged_in_id)
    assert await service.get(unused_perm.auth_key_id, time.time()) is None  # not cached
    await still_works(good_client)


async def test_periodic_cleanup_removes_expired_temporary_keys(server: RunningServer) -> None:
    db = server.resources.db
    key_id = 0x1234_5678_9ABC
    expired = datetime.now(UTC) - timedelta(seconds=5)
    assert await key_store.save_auth_key(
        db.pool, key_id, bytes(255) + b"\1", is_temp=True, expires_at=expired
    )
    async with asyncio.timeout(WAIT):
        while await key_store.get_auth_key(db.pool, key_id) is not None:
            await asyncio.sleep(0.05)


# -- existing clients keep working -----------------------------------------------------------


async def test_key_exchange_with_telethon_still_works(
    server: RunningServer, make_client: Any
) -> None:
    client = make_client()
    await client.connect()
    await still_works(client)
    assert isinstance(client, TelegramClient)


# -- requests in flight, and what an idle connection holds --------------------------------


async def test_requests_in_flight_per_connection_at_and_past_the_limit(
    server: RunningServer, good_client: TelegramClient, limits: Any, monkeypatch: Any
) -> None:
    limit = limits(max_inflight_rpcs=2).max_inflight_rpcs
    dispatcher = server.gateway.dispatcher
    original = dispatcher.call
    release = asyncio.Event()
    started: list[int] = []

    async def gated(ctx: Any, request: Any) -> Any:
        started.append(ctx.msg_id)
        await release.wait()
        return await original(ctx, request)

    client = await new_raw_client(server)
    await client.ping(1)  # learns the salt
    side = await server_side(server, client.conn.writer)
    monkeypatch.setattr(dispatcher, "call", gated)
    sent = []
    for _ in range(limit + 1):
        msg_id, payload = client.session.encrypt(GET_CONFIG)
        client.conn.send(payload)
        sent.append(msg_id)
    await until(lambda: len(started) == limit)  # at the limit: all run
    await asyncio.sleep(0.05)
    assert started == sent[:limit]  # past it: the next waits for a slot
    assert side._rpcs_running == limit
    release.set()
    await until(lambda: len(started) == limit + 1)
    await until(lambda: side._rpcs_running == 0)
    answered: set[int] = set()
    async with asyncio.timeout(WAIT):
        while not answered >= set(sent):
            for m in await client.recv_messages():
                if m.constructor == mt.RpcResult.CONSTRUCTOR_ID:
                    answered.add(struct.unpack_from("<q", m.body, 4)[0])
    await client.conn.close()
    await still_works(good_client)


async def test_an_idle_connection_holds_no_task(server: RunningServer) -> None:
    client = await new_raw_client(server)
    side = await server_side(server, client.conn.writer)
    await client.ping(1)
    await until(lambda: side._worker is None)  # the frames were handled: no task left
    await client.ping(2)  # the next frame starts one again
    await until(lambda: side._worker is None)
    assert side._inbox == [] and side._queued_bytes == 0
    await client.conn.close()


async def test_gateway_listens_with_the_backlog_of_its_limits(monkeypatch: Any) -> None:
    """Python's default (100) overflows when a thousand clients connect at once."""
    gateway = make_gateway()
    assert gateway.limits.listen_backlog == 4096
    loop = asyncio.get_running_loop()
    original = loop.create_server
    backlogs: list[int] = []

    async def recording(*args: Any, **kwargs: Any) -> Any:
        backlogs.append(kwargs["backlog"])
        return await original(*args, **kwargs)

    monkeypatch.setattr(loop, "create_server", recording)
    await gateway.start("127.0.0.1", 0)
    await gateway.start_websocket("127.0.0.1", 0)
    await gateway.stop()
    assert backlogs == [4096, 4096]


@pytest.mark.parametrize(
    ("soft", "hard", "wanted", "raised_to"),
    [
        (1024, 1 << 20, 11_024, 11_024),  # below: raised to what is wanted
        (11_024, 1 << 20, 11_024, None),  # at it: left alone
        (1024, 8192, 11_024, 8192),  # the hard limit is lower: up to it, no further
        (8192, 8192, 11_024, None),  # already at the hard limit
    ],
)
def test_open_files_limit_is_raised_for_the_connections_allowed(
    monkeypatch: pytest.MonkeyPatch, soft: int, hard: int, wanted: int, raised_to: int | None
) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "getrlimit", lambda _which: (soft, hard))
    monkeypatch.setattr(resource, "setrlimit", lambda _which, limits: calls.append(limits))
    now = server_module.raise_open_files_limit(wanted)
    if raised_to is None:
        assert calls == [] and now == soft
    else:
        assert calls == [(raised_to, hard)] and now == raised_to
