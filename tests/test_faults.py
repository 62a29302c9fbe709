"""Faults of the process and its databases while clients are sending.

- the server process is SIGKILLed mid-stream; clients retry on a new process: every
  answered message is there, none twice, and the pts log is dense;
- Redis is killed and started again, or flushed, mid-stream: requests fail cleanly
  while it is gone and everything continues afterwards with dense pts;
- PostgreSQL stalls (a table lock, or every pooled connection taken): requests get a
  clean ``TIMEOUT`` rpc error, logged, instead of hanging; key exchanges fail instead
  of waiting forever; everything works again once the stall ends.

The timeouts are settings made small here; nothing asserts on elapsed time.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import asyncpg
import pytest
from e2e.conftest import API_HASH, API_ID, RunningServer, e2e_settings, make_client
from gateway.test_hostile import encrypted_client_on, still_works
from serve_process import Serve, dev_flags, serve_args, start
from telethon import TelegramClient, functions, types
from telethon.crypto import rsa as telethon_rsa
from telethon.network import ConnectionTcpFull
from telethon.sessions import StringSession

from telesrv.app import open_resources
from telesrv.bench._client import PublicKey, RawConnection, create_auth_key
from telesrv.services.updates import HOLE_GRACE, UpdatesService
from telesrv.store import db as dbmod
from telesrv.store.counters import Counters
from telesrv.store.embedded import EmbeddedRedis
from telesrv.store.redis_client import open_redis
from telesrv.tl import decode, mt
from telesrv.tl import functions as tl_functions
from telesrv.tl import types as tl_types
from telesrv.wiring import build_server

__all__ = ["make_client"]

CODE = "12345"
STALL = 1.0  # statement and pool-acquire timeouts of this module's server, seconds
GUARD = 30.0  # only against a hang: far above anything the server should take
_phones = itertools.count(15557000)


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A Redis of this module alone: tests kill and flush it."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("faults-redis") / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, own_redis: EmbeddedRedis
) -> AsyncIterator[RunningServer]:
    settings = e2e_settings(
        tmp_path_factory.mktemp("telesrv-data"),
        database_url,
        own_redis.url,
        db_statement_timeout=STALL,
        db_acquire_timeout=STALL,
        pg_pool_min_size=1,
        pg_pool_max_size=3,
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


# -- helpers ---------------------------------------------------------------------------


async def sign_in(client: TelegramClient, phone: str | None = None) -> TelegramClient:
    await client.start(phone=phone or f"+{next(_phones)}", code_callback=lambda: CODE)
    return client


async def input_peer(client: TelegramClient, other: TelegramClient) -> Any:
    me = await other.get_me()
    username = f"f{me.id}"
    if me.username != username:
        await other(functions.account.UpdateUsernameRequest(username))
    return await client.get_input_entity(username)


async def send(client: TelegramClient, peer: Any, text: str, random_id: int) -> int:
    """messages.sendMessage with our own random_id (so a retry is the same send)."""
    result = await client(
        functions.messages.SendMessageRequest(peer=peer, message=text, random_id=random_id)
    )
    for update in getattr(result, "updates", []):
        if isinstance(update, types.UpdateMessageID) and update.random_id == random_id:
            return int(update.id)
    raise AssertionError(f"no message id in {result!r}")


async def assert_dense(database_url: str, *clients: TelegramClient) -> None:
    """Each account's pts log has no hole, and updates.getState reports its end."""
    conn = await asyncpg.connect(database_url)
    try:
        for client in clients:
            me = await client.get_me()
            rows = await conn.fetch(
                "SELECT pts, pts_count FROM user_update_events WHERE user_id = $1 ORDER BY pts",
                me.id,
            )
            assert rows, "no events"
            for before, after in itertools.pairwise(rows):
                assert after["pts"] - after["pts_count"] == before["pts"], (before, after)
            state = await client(functions.updates.GetStateRequest())
            assert state.pts == rows[-1]["pts"]
    finally:
        await conn.close()


async def repair_stale_holes(db: Any, redis: Any, *clients: TelegramClient) -> None:
    """What the server does on getState once a hole is older than the grace (a write
    that died with its process or its database), run now with the clock moved on."""
    updates = UpdatesService(db, Counters(redis, db))
    later = int(time.time()) + HOLE_GRACE + 5
    for client in clients:
        await updates.contiguous((await client.get_me()).id, later)


async def texts_with(client: TelegramClient, peer: Any) -> list[str]:
    messages = await client.get_messages(peer, limit=200)
    return [m.message for m in reversed(messages)]


def public_key(server: RunningServer) -> PublicKey:
    numbers = server.resources.server_key.private_key.public_key().public_numbers()
    return PublicKey(numbers.n, numbers.e)


async def raw_send(raw: Any, peer: Any, text: str, random_id: int) -> mt.RpcError | bytes:
    """sendMessage on a raw session: the rpc_error, or the answer's bytes."""
    request = tl_functions.messages.SendMessage(
        peer=tl_types.InputPeerUser(user_id=peer.user_id, access_hash=peer.access_hash),
        message=text,
        random_id=random_id,
    )
    async with asyncio.timeout(GUARD):
        answer: bytes = await raw.call(request.to_bytes())
    if answer[:4] == mt.RpcError.CONSTRUCTOR_ID.to_bytes(4, "little"):
        error = decode(answer)
        assert isinstance(error, mt.RpcError)
        return error
    return answer


def assert_timeout_error(answer: object) -> None:
    assert isinstance(answer, mt.RpcError), answer
    assert (answer.error_code, answer.error_message) == (500, "TIMEOUT")


# -- PostgreSQL stalls -------------------------------------------------------------------


async def test_locked_table_gives_clean_timeout_errors_then_recovers(
    server: RunningServer,
    make_client: Any,
    database_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    alice = await sign_in(make_client())
    bob = await sign_in(make_client())
    peer = await input_peer(alice, bob)
    await send(alice, peer, "before", 1001)
    raw_conn = await RawConnection.open(server.host, server.port)
    raw = encrypted_client_on(raw_conn, alice)
    await raw.ping(1)

    locker = await asyncpg.connect(database_url)
    try:
        transaction = locker.transaction()
        await transaction.start()
        await locker.execute("LOCK TABLE dialogs, auth_keys IN ACCESS EXCLUSIVE MODE")
        with caplog.at_level(logging.WARNING):
            assert_timeout_error(await raw_send(raw, peer, "during", 1002))
        assert any("timed out" in r.getMessage() for r in caplog.records)
        # A key exchange cannot store its key: the connection is closed, not left waiting.
        exchange = await RawConnection.open(server.host, server.port)
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            async with asyncio.timeout(GUARD):
                await create_auth_key(exchange, public_key(server))
        await exchange.close()
        await still_works(bob)  # what needs no locked table keeps working
        await transaction.rollback()
    finally:
        await locker.close()

    # The stall is over: the same send (same random_id) goes through, once.
    assert isinstance(await raw_send(raw, peer, "during", 1002), bytes)
    await send(alice, peer, "after", 1003)
    assert await texts_with(alice, peer) == ["before", "during", "after"]
    assert await texts_with(bob, await input_peer(bob, alice)) == ["before", "during", "after"]
    await raw_conn.close()
    await assert_dense(database_url, alice, bob)


async def test_exhausted_pool_gives_clean_timeout_errors_then_recovers(
    server: RunningServer, make_client: Any, database_url: str
) -> None:
    alice = await sign_in(make_client())
    bob = await sign_in(make_client())
    peer = await input_peer(alice, bob)
    raw_conn = await RawConnection.open(server.host, server.port)
    raw = encrypted_client_on(raw_conn, alice)
    await raw.ping(1)
    pool = server.resources.db.pool
    held = []
    try:
        for _ in range(server.settings.pg_pool_max_size):
            held.append(await pool.acquire(timeout=GUARD))
        assert_timeout_error(await raw_send(raw, peer, "while busy", 2001))
    finally:
        for conn in held:
            await pool.release(conn)
    assert isinstance(await raw_send(raw, peer, "while busy", 2001), bytes)
    assert await texts_with(alice, peer) == ["while busy"]
    await raw_conn.close()
    await assert_dense(database_url, alice, bob)


class StallingProxy:
    """A TCP proxy in front of PostgreSQL that can stop forwarding (a server that
    accepts connections and then answers nothing: stopped, or cut off by the network)."""

    def __init__(self, database_url: str) -> None:
        parts = urlsplit(database_url)
        query = parse_qs(parts.query)
        host = query.pop("host", [parts.hostname or "localhost"])[0]
        port = parts.port or int(query.pop("port", ["5432"])[0])
        self._unix = f"{host}/.s.PGSQL.{port}" if host.startswith("/") else None
        self._tcp = (host, port)
        self._parts = parts
        self._query = query
        self.flowing = asyncio.Event()
        self.flowing.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        userinfo = self._parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
        return urlunsplit(
            (self._parts.scheme, netloc, self._parts.path, urlencode(self._query, doseq=True), "")
        )

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._unix is not None:
            up_reader, up_writer = await asyncio.open_unix_connection(self._unix)
        else:
            up_reader, up_writer = await asyncio.open_connection(*self._tcp)
        pumps = [
            asyncio.ensure_future(self._pump(reader, up_writer)),
            asyncio.ensure_future(self._pump(up_reader, writer)),
        ]
        self._tasks.update(pumps)
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pumps:
            task.cancel()
        for w in (writer, up_writer):
            w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def test_unresponsive_database_gives_clean_errors_then_recovers(
    server: RunningServer, database_url: str, own_redis: EmbeddedRedis
) -> None:
    proxy = StallingProxy(database_url)
    settings = server.settings.replace(database_url=await proxy.start())
    clients: list[TelegramClient] = []
    try:
        async with open_resources(settings) as resources:
            stalled = build_server(settings, resources)
            host, port = await stalled.start(settings.listen_host, settings.listen_port)
            try:
                alice = await sign_in(client_for(port))
                bob = await sign_in(client_for(port))
                clients += [alice, bob]
                peer = await input_peer(alice, bob)
                await send(alice, peer, "before", 6001)
                raw_conn = await RawConnection.open(host, port)
                raw = encrypted_client_on(raw_conn, alice)
                await raw.ping(1)

                proxy.flowing.clear()  # the database stops answering
                assert_timeout_error(await raw_send(raw, peer, "during", 6002))
                exchange = await RawConnection.open(host, port)
                with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
                    async with asyncio.timeout(GUARD):
                        await create_auth_key(exchange, public_key(server))
                await exchange.close()
                await raw.ping(2)  # the connection itself is still served
                proxy.flowing.set()

                assert isinstance(await raw_send(raw, peer, "during", 6002), bytes)
                await send(alice, peer, "after", 6003)
                assert await texts_with(alice, peer) == ["before", "during", "after"]
                await raw_conn.close()
                # The pts the failed send took could not be written as a noop either (the
                # database was gone): the stale-hole repair fills it once it is old enough.
                await repair_stale_holes(resources.db, resources.redis, alice, bob)
                await assert_dense(database_url, alice, bob)
            finally:
                for client in clients:
                    await client.disconnect()
                await stalled.stop()
    finally:
        proxy.flowing.set()
        await proxy.stop()


# -- Redis faults -----------------------------------------------------------------------


async def test_redis_killed_and_restarted(
    server: RunningServer, make_client: Any, database_url: str, own_redis: EmbeddedRedis
) -> None:
    alice = await sign_in(make_client())
    bob = await sign_in(make_client())
    peer = await input_peer(alice, bob)
    await send(alice, peer, "one", 3001)
    raw_conn = await RawConnection.open(server.host, server.port)
    raw = encrypted_client_on(raw_conn, alice)
    await raw.ping(1)

    own_redis.stop()
    try:
        assert_timeout_error(await raw_send(raw, peer, "two", 3002))
    finally:
        own_redis.start()  # same directory, same socket: empty, counters recover
    assert isinstance(await raw_send(raw, peer, "two", 3002), bytes)
    await send(alice, peer, "three", 3003)
    await send(bob, await input_peer(bob, alice), "back", 3004)
    assert await texts_with(alice, peer) == ["one", "two", "three", "back"]
    await raw_conn.close()
    await assert_dense(database_url, alice, bob)


async def test_redis_flushed_mid_stream(
    server: RunningServer, make_client: Any, database_url: str
) -> None:
    alice = await sign_in(make_client())
    bob = await sign_in(make_client())
    peer = await input_peer(alice, bob)
    back = await input_peer(bob, alice)
    redis = server.resources.redis

    async def stream(client: TelegramClient, to: Any, name: str, base: int) -> None:
        for i in range(15):
            await send(client, to, f"{name}{i}", base + i)

    async def flusher() -> None:
        for _ in range(3):
            await asyncio.sleep(0.02)
            await redis.flushall()

    await asyncio.gather(stream(alice, peer, "a", 4000), stream(bob, back, "b", 5000), flusher())
    texts = await texts_with(alice, peer)
    assert sorted(texts) == sorted([f"a{i}" for i in range(15)] + [f"b{i}" for i in range(15)])
    ids = [m.id for m in await alice.get_messages(peer, limit=100)]
    assert len(ids) == len(set(ids)) == 30
    await assert_dense(database_url, alice, bob)


# -- the server process is killed --------------------------------------------------------


async def start_serve(data_dir: Path, database_url: str, redis_url: str, log_path: Path) -> Serve:
    args = serve_args(data_dir, *dev_flags(CODE), database_url=database_url, redis_url=redis_url)
    return await start(args, log_path)


def client_for(port: int, session: str | None = None) -> TelegramClient:
    client = TelegramClient(
        StringSession(session), API_ID, API_HASH, connection=ConnectionTcpFull,
        receive_updates=False, request_retries=1, connection_retries=5, retry_delay=0,
        timeout=10,
    )  # fmt: skip
    client.session.set_dc(2, "127.0.0.1", port)
    return client


@pytest.mark.slow
async def test_sigkill_mid_stream_then_retries_lose_and_duplicate_nothing(
    tmp_path: Path, database_url: str, own_redis: EmbeddedRedis
) -> None:
    redis_url = own_redis.url
    data_dir = tmp_path / "data"
    log_path = tmp_path / "serve.log"
    serve = await start_serve(data_dir, database_url, redis_url, log_path)
    clients: list[TelegramClient] = []
    try:
        telethon_rsa.add_key((data_dir / "server_key.pub.pem").read_text(), old=False)
        alice = await sign_in(client_for(serve.port))
        bob = await sign_in(client_for(serve.port))
        clients += [alice, bob]
        peer = await input_peer(alice, bob)
        sessions = (alice.session.save(), bob.session.save())
        total, kill_after = 24, 8
        answered: dict[int, int] = {}

        async def one(i: int) -> None:
            answered[i] = await send(alice, peer, f"m{i}", 9000 + i)

        for i in range(kill_after):
            await one(i)
        # Several sends in flight, then the process dies without any cleanup.
        in_flight = [asyncio.ensure_future(one(i)) for i in range(kill_after, kill_after + 4)]
        sender = (await alice.get_me()).id
        db = await asyncpg.connect(database_url)
        try:  # kill once at least one of them is committed (its answer may not be out)
            async with asyncio.timeout(GUARD):
                while await db.fetchval(
                    "SELECT count(*) FROM private_messages WHERE sender_user_id = $1", sender
                ) <= kill_after and not all(f.done() for f in in_flight):
                    await asyncio.sleep(0.002)
        finally:
            await db.close()
        serve.process.kill()
        await serve.process.wait()
        await asyncio.gather(*in_flight, return_exceptions=True)
        for client in clients:
            await client.disconnect()
        clients.clear()

        serve = await start_serve(data_dir, database_url, redis_url, log_path)
        alice = client_for(serve.port, sessions[0])
        bob = client_for(serve.port, sessions[1])
        clients += [alice, bob]
        for client in clients:
            await client.connect()
            assert await client.is_user_authorized()
        peer = await input_peer(alice, bob)
        before = dict(answered)
        for i in range(total):  # the client retries whatever it has no answer for
            if i not in answered:
                await one(i)
        history = await alice.get_messages(peer, limit=100)
        texts = [m.message for m in reversed(history)]
        # Each message exactly once; the in-flight ones were concurrent, so in any order.
        assert sorted(texts) == sorted(f"m{i}" for i in range(total))
        assert texts[:kill_after] == [f"m{i}" for i in range(kill_after)]
        by_text = {m.message: m.id for m in history}
        assert all(by_text[f"m{i}"] == msg_id for i, msg_id in before.items())
        # pts the killed process had taken for sends it never committed are holes until
        # they are stale; then they are filled and the log is dense.
        db = await dbmod.open_db(database_url, min_size=1, max_size=1)
        redis = await open_redis(redis_url)
        try:
            await repair_stale_holes(db, redis, alice, bob)
        finally:
            await redis.aclose()
            await db.close()
        await assert_dense(database_url, alice, bob)
    finally:
        for client in clients:
            await client.disconnect()
        await serve.kill()
