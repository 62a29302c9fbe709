"""`telesrv serve` as an operator runs it, in subprocesses: a killed worker is started
again, a killed parent leaves no worker behind, a data directory serves one server
unless told to join, /metrics counts what every worker did, and SIGTERM answers the
requests already read before the process exits.

Waits are on conditions (a process gone, a line logged), with generous guards only
against a hang; nothing asserts on elapsed time."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from prometheus_client.multiprocess import MultiProcessCollector
from serve_process import Serve, dev_flags, serve_args, spawn
from telethon import TelegramClient, functions, types
from telethon.crypto import rsa as telethon_rsa
from telethon.network import ConnectionTcpFull
from telethon.sessions import StringSession

from telesrv.bench._client import PublicKey, RawConnection, create_auth_key

from .conftest import API_HASH, API_ID
from .test_metrics import http_get

CODE = "12345"
GUARD = 60.0  # only against a hang
_phones = itertools.count(15559700)


@pytest.fixture
async def serves() -> AsyncIterator[list[Serve]]:
    """Every server a test starts; whatever still runs is killed at the end, workers too."""
    started: list[Serve] = []
    yield started
    for serve in started:
        if serve.process.returncode is None:
            for pid in workers_of(serve.process.pid):
                with _gone_ok():
                    os.kill(pid, signal.SIGKILL)
            serve.process.kill()
            await serve.process.wait()


def serve_command(
    data_dir: Path, database_url: str, redis_url: str, *extra: str, listen: str = "127.0.0.1:0"
) -> list[str]:
    return serve_args(
        data_dir,
        *dev_flags(CODE),
        "--handshakes-per-ip-per-second", "1000",
        *extra,
        database_url=database_url,
        redis_url=redis_url,
        listen=listen,
    )  # fmt: skip


async def start(
    serves: list[Serve],
    data_dir: Path,
    database_url: str,
    redis_url: str,
    *extra: str,
    listen: str = "127.0.0.1:0",
) -> Serve:
    """Started and ready; in ``serves`` before it is ready, so that the fixture stops it
    and its workers whatever happens."""
    log_path = data_dir.parent / f"serve-{len(serves)}.log"
    serve = await spawn(
        serve_command(data_dir, database_url, redis_url, *extra, listen=listen), log_path
    )
    serves.append(serve)
    await serve.ready()
    return serve


class _gone_ok:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, value: object, tb: object) -> bool:
        return kind is ProcessLookupError


# -- processes, from /proc -------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """State, ppid, ... of a process (None: no such process)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet has ended)."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def workers_of(parent: int) -> list[int]:
    """The live `telesrv worker` processes started by ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if stat is not None and int(stat[1]) == parent and stat[0] not in ("Z", "X"):
            if b"worker" in cmdline:
                found.append(int(entry.name))
    return found


def listening_pids(port: int) -> set[int]:
    """Processes holding a listening TCP socket on ``port``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with _missing_ok():
            for row in Path(table).read_text().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and int(cols[1].rpartition(":")[2], 16) == port:
                    inodes.add(cols[9])
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with _missing_ok():
            for fd in (entry / "fd").iterdir():
                with _missing_ok():
                    target = os.readlink(fd)
                    if target.startswith("socket:[") and target[8:-1] in inodes:
                        pids.add(int(entry.name))
    return pids


class _missing_ok:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, value: object, tb: object) -> bool:
        return kind is not None and issubclass(kind, OSError)  # type: ignore[arg-type]


async def until(condition: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(GUARD):
            while not condition():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"still not {what}") from None


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def public_key(data_dir: Path) -> PublicKey:
    key = serialization.load_pem_public_key((data_dir / "server_key.pub.pem").read_bytes())
    assert isinstance(key, rsa.RSAPublicKey)
    numbers = key.public_numbers()
    return PublicKey(numbers.n, numbers.e)


async def handshake(port: int, key: PublicKey) -> None:
    """A whole auth key exchange on a new connection."""
    conn = await RawConnection.open("127.0.0.1", port)
    try:
        await create_auth_key(conn, key)
    finally:
        await conn.close()


# -- the tests -------------------------------------------------------------------------------


async def test_a_killed_worker_is_started_again(
    tmp_path: Path, database_url: str, redis_url: str, serves: list[Serve]
) -> None:
    data_dir = tmp_path / "data"
    serve = await start(serves, data_dir, database_url, redis_url, "--workers", "2")
    [first] = workers_of(serve.process.pid)
    os.kill(first, signal.SIGKILL)

    def replaced() -> bool:
        return bool(re.search(rf"worker 1 started \(pid (?!{first}\))\d+\)", serve.log()))

    await until(replaced, "started again")
    [second] = workers_of(serve.process.pid)
    assert second != first
    log = serve.log()
    assert re.search(rf"WARNING .*worker 1 \(pid {first}\) died with killed by SIGKILL", log)
    # The new worker listens on the shared port, and every connection is served.
    await until(lambda: second in listening_pids(serve.port), "listening")
    assert listening_pids(serve.port) == {serve.process.pid, second}
    key = public_key(data_dir)
    for _ in range(8):
        await handshake(serve.port, key)
    await serve.stop(GUARD)
    assert not alive(second)


async def test_a_killed_parent_leaves_no_worker_and_a_new_serve_starts(
    tmp_path: Path, database_url: str, redis_url: str, serves: list[Serve]
) -> None:
    data_dir = tmp_path / "data"
    serve = await start(serves, data_dir, database_url, redis_url, "--workers", "2")
    port = serve.port
    [worker] = workers_of(serve.process.pid)
    serve.process.kill()
    await serve.process.wait()
    await until(lambda: not alive(worker), "gone: the worker outlived its parent")
    await until(lambda: port_free(port), "free: the port is still held")
    # Same port, same data directory: the dead server's lock is no obstacle.
    again = await start(
        serves, data_dir, database_url, redis_url, "--workers", "2", listen=f"127.0.0.1:{port}"
    )
    assert again.port == port
    await handshake(port, public_key(data_dir))
    await again.stop(GUARD)


async def test_a_second_serve_on_a_data_dir_is_refused_unless_it_joins(
    tmp_path: Path, database_url: str, redis_url: str, serves: list[Serve]
) -> None:
    data_dir = tmp_path / "data"
    first = await start(serves, data_dir, database_url, redis_url)
    log_path = tmp_path / "refused.log"
    refused = await spawn(serve_command(data_dir, database_url, redis_url), log_path)
    async with asyncio.timeout(GUARD):
        code = await refused.process.wait()
    assert code != 0
    error = log_path.read_text()
    # One clear line, the last (start-up warnings may come before it), no traceback.
    assert error.splitlines()[-1].endswith(
        f" ERROR telesrv: data directory {data_dir} is in use by another telesrv serve "
        f"(pid {first.process.pid}); pass --join to add this process to that server"
    )
    assert "Traceback" not in error and "ERROR" not in "".join(error.splitlines()[:-1])
    joined = await start(serves, data_dir, database_url, redis_url, "--join")
    await handshake(joined.port, public_key(data_dir))
    await joined.stop(GUARD)
    await first.stop(GUARD)


async def test_metrics_count_the_handshakes_of_every_worker(
    tmp_path: Path, database_url: str, redis_url: str, serves: list[Serve]
) -> None:
    data_dir = tmp_path / "data"
    serve = await start(
        serves, data_dir, database_url, redis_url,
        "--workers", "2", "--metrics-listen", "127.0.0.1:0",
    )  # fmt: skip
    [worker] = workers_of(serve.process.pid)
    values = data_dir / "metrics" / str(serve.process.pid)
    key = public_key(data_dir)

    async def created() -> float:
        status, text = await http_get("127.0.0.1", serve.metrics_port, "/metrics")
        assert status == 200
        found = re.search(r'^telesrv_handshakes_total\{outcome="created"\} (\S+)$', text, re.M)
        return float(found.group(1)) if found else 0.0

    def by_worker() -> float:
        files = [str(p) for p in values.glob(f"counter_{worker}.db")]
        for family in MultiProcessCollector.merge(files):  # type: ignore[no-untyped-call]
            for sample in family.samples:
                if sample.name == "telesrv_handshakes_total":
                    return float(sample.value)
        return 0.0

    # The kernel spreads connections over both processes: go on until each has made
    # some (the first process's share is what the worker's file does not hold).
    made = 0
    while made < 12 or not (0 < by_worker() < made):
        assert made < 400, "every connection landed on one process"
        await handshake(serve.port, key)
        made += 1
    assert await created() == made

    # Gauges too: the open connections of both processes, summed.
    async def connections() -> float:
        _, text = await http_get("127.0.0.1", serve.metrics_port, "/metrics")
        found = re.search(r"^telesrv_connections (\S+)$", text, re.M)
        assert found is not None
        return float(found.group(1))

    held = [await RawConnection.open("127.0.0.1", serve.port) for _ in range(6)]
    try:
        async with asyncio.timeout(GUARD):  # a worker publishes its gauges every second
            while await connections() != 6:
                await asyncio.sleep(0.1)
    finally:
        for conn in held:
            await conn.close()
    async with asyncio.timeout(GUARD):
        while await connections() != 0:
            await asyncio.sleep(0.1)
    await serve.stop(GUARD)


def client_for(port: int, session: str | None = None) -> TelegramClient:
    client = TelegramClient(
        StringSession(session), API_ID, API_HASH, connection=ConnectionTcpFull,
        receive_updates=False, request_retries=1, connection_retries=3, retry_delay=0,
        timeout=20,
    )  # fmt: skip
    client.session.set_dc(2, "127.0.0.1", port)
    return client


async def send(client: TelegramClient, text: str, random_id: int) -> int:
    """A message to the sender's own chat, with our random_id (a retry is the same send)."""
    result = await client(
        functions.messages.SendMessageRequest(
            peer=types.InputPeerSelf(), message=text, random_id=random_id
        )
    )
    for update in getattr(result, "updates", []):
        if isinstance(update, types.UpdateMessageID) and update.random_id == random_id:
            return int(update.id)
    raise AssertionError(f"no message id in {result!r}")


async def test_sigterm_answers_what_was_read_and_loses_no_answered_send(
    tmp_path: Path, database_url: str, redis_url: str, serves: list[Serve]
) -> None:
    data_dir = tmp_path / "data"
    serve = await start(serves, data_dir, database_url, redis_url)
    port = serve.port
    telethon_rsa.add_key((data_dir / "server_key.pub.pem").read_text(), old=False)
    client = client_for(port)
    clients = [client]
    try:
        await client.start(phone=f"+{next(_phones)}", code_callback=lambda: CODE)
        me = (await client.get_me()).id
        session = client.session.save()
        answered: dict[int, int] = {}
        tried: set[int] = set()

        async def one(i: int) -> None:
            tried.add(i)
            answered[i] = await send(client, f"t{i}", 7000 + i)

        async def lane(numbers: range) -> None:
            """Sends one after another, as an app does, until the server is gone."""
            for i in numbers:
                try:
                    await one(i)
                except (TimeoutError, ConnectionError, OSError):
                    return

        first = 4
        for i in range(first):
            await one(i)
        # Four senders in a loop; SIGTERM lands while they send.
        lanes = [asyncio.ensure_future(lane(range(first + k, 100_000, 4))) for k in range(4)]
        db = await asyncpg.connect(database_url)
        try:
            async with asyncio.timeout(GUARD):
                while (
                    await db.fetchval(
                        "SELECT count(*) FROM private_messages WHERE sender_user_id = $1", me
                    )
                    < first + 12
                ):
                    await asyncio.sleep(0.002)
            serve.process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(GUARD):
                assert await serve.process.wait() == 0
                await asyncio.gather(*lanes)
            # Every send the server committed was answered before it exited.
            committed = await db.fetch(
                "SELECT message FROM private_messages WHERE sender_user_id = $1", me
            )
        finally:
            await db.close()
        assert sorted(r["message"] for r in committed) == sorted(f"t{i}" for i in answered)
        assert "unanswered" not in serve.log()
        await client.disconnect()
        clients.clear()

        # The next server: the client sends again whatever got no answer.
        again = await start(serves, data_dir, database_url, redis_url, listen=f"127.0.0.1:{port}")
        client = client_for(again.port, session)
        clients.append(client)
        await client.connect()
        before = dict(answered)
        for i in sorted(tried - answered.keys()):
            await one(i)
        history = await client.get_messages("me", limit=1000)
        by_text = {m.message: m.id for m in history}
        assert sorted(m.message for m in history) == sorted(f"t{i}" for i in tried)
        assert all(by_text[f"t{i}"] == msg_id for i, msg_id in before.items())
        await client.disconnect()
        await again.stop(GUARD)
    finally:
        for c in clients:
            await c.disconnect()
