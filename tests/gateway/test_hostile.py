"""Hostile input against the real gateway over real sockets.

Each bad connection must be closed (or told with a transport error, then closed),
a well-behaved Telethon client connected before and during the abuse keeps
working, and nothing is left behind: the gateway's connection set shrinks back
and no session of the bad connections remains.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import struct
from collections.abc import AsyncIterator

import cryptg
import pytest
from e2e.conftest import ClientFactory, RunningServer
from telethon import TelegramClient, functions, types

from telesrv.bench._client import (
    EncryptedClient,
    EncryptedSession,
    MsgIdClock,
    RawConnection,
    TransportErrorCode,
    plain_call,
)
from telesrv.gateway.budgets import TokenBucket
from telesrv.mtproto.crypto import auth_key_id
from telesrv.tl import decode, mt
from telesrv.tl import functions as tl_functions

INTERMEDIATE = b"\xee\xee\xee\xee"
CLOSE_TIMEOUT = 2.5
GET_CONFIG_ID = tl_functions.help.GetConfig.CONSTRUCTOR_ID
SEND_MESSAGE_ID = tl_functions.messages.SendMessage.CONSTRUCTOR_ID


async def read_until_closed(reader: asyncio.StreamReader, timeout: float = CLOSE_TIMEOUT) -> bytes:
    """Everything the server sends until it closes the connection (fails on timeout)."""
    data = bytearray()
    async with asyncio.timeout(timeout):
        while True:
            try:
                chunk = await reader.read(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    return bytes(data)


async def open_raw(server: RunningServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(server.host, server.port)


async def wait_for_connections(server: RunningServer, count: int) -> None:
    """The gateway drops closed connections from its set (bounded wait)."""
    async with asyncio.timeout(CLOSE_TIMEOUT):
        while len(server.gateway.connections) > count:
            await asyncio.sleep(0.02)


@pytest.fixture
async def good_client(make_client: ClientFactory) -> AsyncIterator[TelegramClient]:
    """A Telethon client connected before the abuse starts."""
    client = make_client()
    await client.connect()
    await client(functions.help.GetConfigRequest())
    yield client


async def still_works(client: TelegramClient) -> None:
    config = await client(functions.help.GetConfigRequest())
    assert isinstance(config, types.Config)


def baseline(server: RunningServer) -> tuple[int, int]:
    return len(server.gateway.connections), len(server.gateway.sessions)


async def assert_nothing_leaked(
    server: RunningServer, before: tuple[int, int], *good_clients: TelegramClient
) -> None:
    """Connections are back to ``before``; new sessions belong only to ``good_clients``
    (sessions of good clients outlive their connections by design)."""
    await wait_for_connections(server, before[0])
    assert len(server.gateway.connections) == before[0]
    sessions = server.gateway.sessions
    good = sum(
        len(sessions.sessions_of_key(auth_key_id(c.session.auth_key.key))) for c in good_clients
    )
    assert len(sessions) == before[1] + good


def encrypted_client_on(conn: RawConnection, telethon: TelegramClient) -> EncryptedClient:
    """Our own session on the (server-known) auth key of a Telethon client."""
    key = telethon.session.auth_key.key
    return EncryptedClient(conn, EncryptedSession(auth_key=key, salt=0))


# -- framing ----------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_random_bytes_are_dropped(
    server: RunningServer, good_client: TelegramClient, seed: int
) -> None:
    before = baseline(server)
    reader, writer = await open_raw(server)
    writer.write(random.Random(seed).randbytes(4096))
    received = await read_until_closed(reader)
    assert len(received) <= 8  # at most a transport error
    writer.close()
    await still_works(good_client)
    await assert_nothing_leaked(server, before)


async def test_truncated_frame_then_eof(server: RunningServer, good_client: TelegramClient) -> None:
    before = baseline(server)
    reader, writer = await open_raw(server)
    writer.write(INTERMEDIATE + struct.pack("<i", 200) + os.urandom(50))
    await writer.drain()
    writer.write_eof()
    assert await read_until_closed(reader) == b""
    writer.close()
    await still_works(good_client)
    await assert_nothing_leaked(server, before)


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack("<q", 0)[:6],  # shorter than an auth_key_id
        struct.pack("<qqi", 0, 1 << 62, 5000) + bytes(8),  # plain length beyond the frame
        struct.pack("<qqi", 0, 1 << 62, 8) + bytes(4),  # plain body cut short
    ],
    ids=["short", "length-too-big", "body-cut"],
)
async def test_truncated_message_inside_a_frame(
    server: RunningServer, good_client: TelegramClient, payload: bytes
) -> None:
    before = baseline(server)
    reader, writer = await open_raw(server)
    padded = payload + bytes(-len(payload) % 4)
    writer.write(INTERMEDIATE + struct.pack("<i", len(padded)) + padded)
    assert len(await read_until_closed(reader)) <= 8
    writer.close()
    await still_works(good_client)
    await assert_nothing_leaked(server, before)


@pytest.mark.parametrize("transport", ["intermediate", "abridged", "full"])
async def test_oversized_frame_is_refused_before_its_body(
    server: RunningServer, good_client: TelegramClient, transport: str
) -> None:
    before = baseline(server)
    too_big = server.gateway.limits.max_frame + 16
    reader, writer = await open_raw(server)
    if transport == "intermediate":
        head = INTERMEDIATE + struct.pack("<i", too_big)
    elif transport == "abridged":
        head = b"\xef\x7f" + (too_big // 4).to_bytes(3, "little")
    else:
        head = struct.pack("<ii", too_big + 12, 0)
    # Only the head and a little data: the server must not wait for a megabyte.
    writer.write(head + bytes(64))
    assert await read_until_closed(reader) == b""
    writer.close()
    await still_works(good_client)
    await assert_nothing_leaked(server, before)


# -- encrypted messages ---------------------------------------------------------------


async def test_unknown_auth_key_id_gets_404_then_close(
    server: RunningServer, good_client: TelegramClient
) -> None:
    before = baseline(server)
    reader, writer = await open_raw(server)
    payload = os.urandom(8) + os.urandom(16) + os.urandom(64)
    writer.write(INTERMEDIATE + struct.pack("<i", len(payload)) + payload)
    assert await read_until_closed(reader) == struct.pack("<ii", 4, -404)
    writer.close()
    await still_works(good_client)
    await assert_nothing_leaked(server, before)


@pytest.mark.parametrize("where", ["msg_key", "ciphertext"])
async def test_tampered_message_gets_404_then_close(
    server: RunningServer, good_client: TelegramClient, where: str
) -> None:
    before = baseline(server)
    conn = await RawConnection.open(server.host, server.port)
    client = encrypted_client_on(conn, good_client)
    _, payload = client.session.encrypt(mt.Ping(ping_id=7).to_bytes())
    index = 8 + 3 if where == "msg_key" else len(payload) - 5
    tampered = payload[:index] + bytes([payload[index] ^ 0x40]) + payload[index + 1 :]
    conn.send(tampered)
    with pytest.raises(TransportErrorCode) as info:
        await conn.recv()
    assert info.value.code == -404
    assert await read_until_closed(conn.reader) == b""
    await conn.close()
    assert (
        server.gateway.sessions.get(auth_key_id(client.session.auth_key), client.session.session_id)
        is None
    )
    await still_works(good_client)
    await assert_nothing_leaked(server, before)


async def test_replayed_message_is_answered_once(
    server: RunningServer, good_client: TelegramClient
) -> None:
    conn = await RawConnection.open(server.host, server.port)
    client = encrypted_client_on(conn, good_client)
    await client.ping(1)  # learns the salt
    msg_id, payload = client.session.encrypt(mt.Ping(ping_id=2).to_bytes())
    conn.send(payload)
    conn.send(payload)  # byte-for-byte replay: same msg_id
    await client.ping(3)  # answered after both copies were processed
    await asyncio.sleep(0.05)
    pongs = [m for m in client.received if m.constructor == mt.Pong.CONSTRUCTOR_ID]
    assert [decode(m.body).ping_id for m in pongs] == [1, 2, 3]  # type: ignore[attr-defined]
    assert sum(decode(m.body).msg_id == msg_id for m in pongs) == 1  # type: ignore[attr-defined]
    await conn.close()
    await still_works(good_client)


async def test_garbage_tl_gets_rpc_error_and_connection_stays(
    server: RunningServer, good_client: TelegramClient
) -> None:
    conn = await RawConnection.open(server.host, server.port)
    client = encrypted_client_on(conn, good_client)
    await client.ping(1)
    for garbage in (
        struct.pack("<I", 0x0BADF00D) + os.urandom(60),  # unknown constructor
        struct.pack("<I", GET_CONFIG_ID) + b"\xff" * 12,  # a real method with trailing junk
        struct.pack("<Ii", SEND_MESSAGE_ID, 0),  # a real method cut after its flags
    ):
        answer = await client.call(garbage)
        error = decode(answer)
        assert isinstance(error, mt.RpcError)
        assert error.error_code == 400
        assert error.error_message == "INPUT_CONSTRUCTOR_INVALID"
    await client.ping(2)  # the same connection keeps serving
    assert not conn.reader.at_eof()
    await conn.close()
    await still_works(good_client)


# -- handshake abuse ------------------------------------------------------------------


async def _garbage_handshake(server: RunningServer, rng: random.Random) -> bytes:
    """req_pq_multi, then req_DH_params with the right p, q but junk encrypted_data."""
    conn = await RawConnection.open(server.host, server.port)
    clock = MsgIdClock()
    nonce = rng.getrandbits(127)
    res_pq = await plain_call(conn, clock, mt.ReqPqMulti(nonce=nonce))
    assert isinstance(res_pq, mt.ResPQ)
    p, q = cryptg.factorize_pq_pair(int.from_bytes(res_pq.pq, "big"))
    request = mt.ReqDHParams(
        nonce=nonce,
        server_nonce=res_pq.server_nonce,
        p=p.to_bytes(4, "big"),
        q=q.to_bytes(4, "big"),
        public_key_fingerprint=res_pq.server_public_key_fingerprints[0],
        encrypted_data=rng.randbytes(256),
    ).to_bytes()
    conn.send(struct.pack("<qqi", 0, clock.next(), len(request)) + request)
    try:
        return await read_until_closed(conn.reader)
    finally:
        await conn.close()


async def test_handshake_flood_and_silent_connections(
    server: RunningServer, good_client: TelegramClient, make_client: ClientFactory
) -> None:
    before = baseline(server)
    gateway = server.gateway
    saved_limits = gateway.limits
    # Silent connections are closed at the handshake deadline; shorten it for the test,
    # but not below what the garbage handshakes need for their two round trips on a
    # loaded machine (a deadline close before the junk arrives would fail them early).
    gateway.limits = dataclasses.replace(saved_limits, handshake_timeout=1.0)
    silent: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        for _ in range(40):
            silent.append(await open_raw(server))
        rng = random.Random(42)
        late_client = make_client()

        async def well_behaved() -> None:
            for _ in range(5):
                await still_works(good_client)
            await late_client.connect()
            await still_works(late_client)

        results = await asyncio.gather(
            *(_garbage_handshake(server, rng) for _ in range(30)),
            *(read_until_closed(reader, timeout=2.5) for reader, _ in silent),
            well_behaved(),
        )
        assert all(r == b"" for r in results[:70])  # closed without an answer
    finally:
        gateway.limits = saved_limits
        for _, writer in silent:
            writer.close()
    await still_works(good_client)
    await late_client.disconnect()
    await assert_nothing_leaked(server, before, late_client)


async def test_handshake_budget_exhausted_gets_429(
    server: RunningServer, good_client: TelegramClient
) -> None:
    before = baseline(server)
    gateway = server.gateway
    saved = gateway.handshake_budget
    gateway.handshake_budget = TokenBucket(rate=0.0, burst=0)
    try:
        conn = await RawConnection.open(server.host, server.port)
        body = mt.ReqPqMulti(nonce=12345).to_bytes()
        conn.send(struct.pack("<qqi", 0, MsgIdClock().next(), len(body)) + body)
        with pytest.raises(TransportErrorCode) as info:
            await conn.recv()
        assert info.value.code == -429
        assert await read_until_closed(conn.reader) == b""
        await conn.close()
    finally:
        gateway.handshake_budget = saved
    await still_works(good_client)
    await assert_nothing_leaked(server, before)
