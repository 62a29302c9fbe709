"""``telesrv bench e2e``: MTProto load against a real ``telesrv serve`` process.

The server runs as a ``telesrv serve`` subprocess (on PostgreSQL and Redis started
here in a temporary directory unless URLs are given). The load comes from separate
processes (``--client-processes``) speaking MTProto with telesrv's own small client
(:mod:`telesrv.bench._client`), so client and server never share an interpreter.

- Setup: ``--pairs`` sender/receiver pairs log in (dev login code, auto-register);
  each sender imports its receiver as a contact; receivers stay online.
- Online phase: every sender sends ``--messages`` messages to its receiver, the next
  one when the previous answer arrived (closed loop). Measured: msg/s, send round
  trip, push latency (send start to arrival at the receiver, both stamped by the same
  process), lost and duplicate pushes, and the CPU time the server used meanwhile:
  the telesrv processes and their PostgreSQL and Redis processes, from /proc.
- Catch-up phase: receivers go offline, senders send ``--offline-messages`` each,
  then receivers reconnect and fetch them with updates.getDifference (msg/s of the
  catch-up, lost and duplicates).

The last line is one JSON object with the figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import click

LOGIN_CODE = "24680"
READY_PREFIX = "telesrv listening on "
START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
ACK_BATCH = 64  # content messages acknowledged in one msgs_ack


# -- load (runs in the client processes) ------------------------------------------------


def _decode(body: bytes) -> Any:
    from telesrv.bench._client import ClientError
    from telesrv.tl import decode, mt

    obj = decode(body)
    if isinstance(obj, mt.RpcError):
        raise ClientError(f"rpc error {obj.error_code} {obj.error_message}")
    return obj


def _text_ids(text: str) -> tuple[int, int] | None:
    """(pair, sequence) of a bench message text, None for any other text."""
    head, _, rest = text.partition(" ")
    if head != "e2e":
        return None
    pair, _, seq = rest.partition(":")
    try:
        return int(pair), int(seq)
    except ValueError:
        return None


class Device:
    """One logged-in device: an auth key, a connection and acknowledgements."""

    def __init__(self, host: str, port: int, server_key: Any, phone: str) -> None:
        self.host = host
        self.port = port
        self.server_key = server_key
        self.phone = phone
        self.client: Any = None
        self.key: Any = None
        self.user_id = 0
        self._unacked: list[int] = []

    async def call(self, request: Any) -> Any:
        answer = _decode(await self.client.call(request.to_bytes()))
        self.note_received(self.client.received)
        self.client.received.clear()
        return answer

    def note_received(self, messages: Iterable[Any]) -> None:
        """Acknowledge the server's content messages (odd seq_no), a batch at a time."""
        self._unacked.extend(m.msg_id for m in messages if m.seq_no & 1)
        if len(self._unacked) >= ACK_BATCH:
            self.flush_acks()

    def flush_acks(self) -> None:
        from telesrv.tl import mt

        if self._unacked and self.client is not None:
            body = mt.MsgsAck(msg_ids=self._unacked).to_bytes()
            self._unacked = []
            _msg_id, payload = self.client.session.encrypt(body, content=False)
            self.client.conn.send(payload)

    async def log_in(self, code: str = LOGIN_CODE) -> None:
        from telesrv.bench._client import connect_new_key
        from telesrv.tl import LAYER, functions, types

        self.client, self.key = await connect_new_key(self.host, self.port, self.server_key)
        send_code = functions.auth.SendCode(
            phone_number=self.phone, api_id=1, api_hash="0" * 32, settings=types.CodeSettings()
        )
        sent = await self.call(
            functions.InvokeWithLayer(
                layer=LAYER,
                query=functions.InitConnection(
                    api_id=1, device_model="telesrv bench", system_version="1",
                    app_version="1", system_lang_code="en", lang_pack="", lang_code="en",
                    query=send_code,
                ),
            )
        )  # fmt: skip
        auth = await self.call(
            functions.auth.SignIn(
                phone_number=self.phone,
                phone_code_hash=sent.phone_code_hash,
                phone_code=code,
            )
        )
        self.user_id = auth.user.id

    async def reconnect(self) -> None:
        """A new connection and a new session on the same key (the salt carries over)."""
        from telesrv.bench._client import (
            EncryptedClient,
            EncryptedSession,
            MsgIdClock,
            RawConnection,
        )

        salt = self.client.session.salt
        await self.close()
        conn = await RawConnection.open(self.host, self.port)
        session = EncryptedSession(self.key.auth_key, salt, clock=MsgIdClock(self.key.time_offset))
        self.client = EncryptedClient(conn, session)

    async def close(self) -> None:
        if self.client is not None:
            self.flush_acks()
            await self.client.conn.close()


@dataclass
class Pair:
    index: int
    sender: Device
    receiver: Device
    access_hash: int = 0
    starts: dict[int, float] = field(default_factory=dict)
    arrivals: dict[int, float] = field(default_factory=dict)
    duplicates: int = 0
    send_rtts: list[float] = field(default_factory=list)
    expected: int = 0
    complete: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task[None] | None = None
    pending: dict[int, asyncio.Future[bytes]] = field(default_factory=dict)

    def arrived(self, seq: int, at: float) -> None:
        if seq in self.arrivals:
            self.duplicates += 1
            return
        self.arrivals[seq] = at
        if len(self.arrivals) >= self.expected:
            self.complete.set()


def _messages_in(update: Any) -> list[str]:
    """Texts of the new messages an ``updates`` push carries."""
    from telesrv.tl import types

    if isinstance(update, types.UpdateShortMessage):
        return [update.message]
    texts = []
    for u in getattr(update, "updates", None) or []:
        if isinstance(u, types.UpdateNewMessage) and isinstance(u.message, types.Message):
            texts.append(u.message.message)
    return texts


async def _read_pushes(pair: Pair) -> None:
    """The receiver's connection while online: pushes, and answers to its requests."""
    from telesrv.bench._client import rpc_result_of

    device = pair.receiver
    client = device.client
    while True:
        messages = await client.recv_messages()
        now = time.perf_counter()
        client.received.clear()
        for m in messages:
            answer = rpc_result_of(m)
            if answer is not None:
                future = pair.pending.pop(answer[0], None)
                if future is not None and not future.done():
                    future.set_result(answer[1])
                continue
            try:
                update = _decode(m.body)
            except Exception:
                continue  # service messages the bench has no use for
            for text in _messages_in(update):
                ids = _text_ids(text)
                if ids is not None and ids[0] == pair.index:
                    pair.arrived(ids[1], now)
        device.note_received(messages)


async def _receiver_request(pair: Pair, request: Any) -> Any:
    """A request on the receiver's connection while its reader runs."""
    session = pair.receiver.client.session
    msg_id, payload = session.encrypt(request.to_bytes())
    future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    pair.pending[msg_id] = future
    pair.receiver.client.conn.send(payload)
    return _decode(await asyncio.wait_for(future, 30.0))


class Load:
    def __init__(self, options: dict[str, Any]) -> None:
        from telesrv.bench._client import PublicKey

        self.options = options
        key = PublicKey(options["n"], options["e"])
        host, port = options["host"], options["port"]
        prefix = options["phone_prefix"]
        self.pairs = [
            Pair(
                index,
                Device(host, port, key, f"{prefix}{2 * index:04d}"),
                Device(host, port, key, f"{prefix}{2 * index + 1:04d}"),
            )
            for index in options["pairs"]
        ]
        self.states: dict[int, Any] = {}

    async def setup(self) -> None:
        from telesrv.tl import functions, types

        async def one(pair: Pair) -> None:
            await pair.receiver.log_in()
            await pair.sender.log_in()
            imported = await pair.sender.call(
                functions.contacts.ImportContacts(
                    contacts=[
                        types.InputPhoneContact(
                            client_id=1, phone=pair.receiver.phone, first_name="r", last_name=""
                        )
                    ]
                )
            )
            [user] = [u for u in imported.users if u.id == pair.receiver.user_id]
            pair.access_hash = user.access_hash
            await pair.receiver.call(functions.updates.GetState())  # online from now on
            pair.reader = asyncio.create_task(_read_pushes(pair))

        await asyncio.gather(*(one(p) for p in self.pairs))

    async def _send(self, pair: Pair, first: int, count: int, record: bool) -> None:
        from telesrv.tl import functions, types

        peer = types.InputPeerUser(user_id=pair.receiver.user_id, access_hash=pair.access_hash)
        rng = random.SystemRandom()  # a repeated random_id would be deduplicated
        for seq in range(first, first + count):
            request = functions.messages.SendMessage(
                peer=peer, message=f"e2e {pair.index}:{seq}", random_id=rng.getrandbits(63)
            )
            started = time.perf_counter()
            if record:
                pair.starts[seq] = started
            await pair.sender.call(request)
            if record:
                pair.send_rtts.append(time.perf_counter() - started)

    async def online(self) -> dict[str, Any]:
        n = self.options["messages"]
        for pair in self.pairs:
            pair.expected = n
        started = time.perf_counter()
        await asyncio.gather(*(self._send(p, 0, n, True) for p in self.pairs))
        send_seconds = time.perf_counter() - started
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.options["drain_timeout"]):
                await asyncio.gather(*(p.complete.wait() for p in self.pairs))
        push, rtts = [], []
        lost = duplicates = 0
        for pair in self.pairs:
            rtts += pair.send_rtts
            push += [at - pair.starts[seq] for seq, at in pair.arrivals.items()]
            lost += n - len(pair.arrivals)
            duplicates += pair.duplicates
        return {
            "sent": n * len(self.pairs),
            "send_seconds": send_seconds,
            "send_rtts": rtts,
            "push_latencies": push,
            "lost": lost,
            "duplicates": duplicates,
        }

    async def go_offline(self) -> None:
        """Receivers remember their state and disconnect; senders then send to them."""
        from telesrv.tl import functions

        for pair in self.pairs:
            self.states[pair.index] = await _receiver_request(pair, functions.updates.GetState())
            assert pair.reader is not None
            pair.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pair.reader
            pair.reader = None
        await asyncio.gather(*(p.receiver.close() for p in self.pairs))
        n, m = self.options["messages"], self.options["offline_messages"]
        await asyncio.gather(*(self._send(p, n, m, False) for p in self.pairs))

    async def catch_up(self) -> dict[str, Any]:
        from telesrv.tl import functions, types

        n, m = self.options["messages"], self.options["offline_messages"]
        counts: dict[str, float] = {"fetched": 0, "lost": 0, "duplicates": 0, "requests": 0}

        async def one(pair: Pair) -> None:
            await pair.receiver.reconnect()
            state = self.states[pair.index]
            pts, date = state.pts, state.date
            seen: set[int] = set()
            while True:
                diff = await pair.receiver.call(
                    functions.updates.GetDifference(pts=pts, date=date, qts=0)
                )
                counts["requests"] += 1
                if isinstance(diff, types.updates.DifferenceEmpty):
                    break
                for message in getattr(diff, "new_messages", []):
                    ids = _text_ids(getattr(message, "message", ""))
                    if ids is None or ids[0] != pair.index or not n <= ids[1] < n + m:
                        continue
                    counts["fetched"] += 1
                    if ids[1] in seen:
                        counts["duplicates"] += 1
                    seen.add(ids[1])
                if isinstance(diff, types.updates.DifferenceSlice):
                    pts, date = diff.intermediate_state.pts, diff.intermediate_state.date
                    continue
                if isinstance(diff, types.updates.Difference):
                    break
                raise RuntimeError(f"unexpected difference {type(diff).__name__}")
            counts["lost"] += m - len(seen)

        started = time.perf_counter()
        await asyncio.gather(*(one(p) for p in self.pairs))
        counts["seconds"] = time.perf_counter() - started
        return counts

    async def close(self) -> None:
        for pair in self.pairs:
            if pair.reader is not None:
                pair.reader.cancel()
            for device in (pair.sender, pair.receiver):
                with contextlib.suppress(Exception):
                    await device.close()


async def _client_main(pipe: Connection, options: dict[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    load = Load(options)
    try:
        await load.setup()
        pipe.send(("ready", None))
        while True:
            command = await loop.run_in_executor(None, pipe.recv)
            if command == "online":
                pipe.send(("online", await load.online()))
            elif command == "offline":
                await load.go_offline()
                pipe.send(("offline", None))
            elif command == "catchup":
                pipe.send(("catchup", await load.catch_up()))
            else:
                break
    finally:
        await load.close()


def client_process(pipe: Connection, options: dict[str, Any]) -> None:
    """Entry point of a load process: answers the coordinator's commands in order."""
    try:
        asyncio.run(_client_main(pipe, options))
    except BaseException:
        pipe.send(("error", traceback.format_exc()))
    finally:
        pipe.close()


# -- server CPU time from /proc ---------------------------------------------------------

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after its last ')'.
    return raw[raw.rindex(")") + 2 :].split()


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def process_trees(roots: Iterable[int]) -> set[int]:
    """``roots`` and all their descendants that are alive now."""
    children = _children_map()
    found: set[int] = set()
    todo = [pid for pid in roots if _stat_fields(pid) is not None]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system time of ``pids`` including their reaped children, in seconds.

    Counting reaped children keeps a difference of two readings right when a child
    exits in between: its time moves into its parent's."""
    ticks = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the name
            ticks += sum(int(v) for v in fields[11:15])
    return ticks / _CLK_TCK


def parent_pid(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields is not None else None


# -- coordinator ----------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _databases(
    database_url: str | None, redis_url: str | None, work: Path
) -> AsyncIterator[tuple[str, str]]:
    """The URLs to serve from: the given ones, or embedded servers under ``work``."""
    from telesrv.app import EMBEDDED_DATABASE
    from telesrv.store import db as dbmod
    from telesrv.store.embedded import EmbeddedPostgres, EmbeddedRedis

    async with contextlib.AsyncExitStack() as stack:
        if database_url is None:
            postgres = EmbeddedPostgres(work / "pg")
            server_url = await asyncio.to_thread(postgres.start)
            stack.push_async_callback(asyncio.to_thread, postgres.stop)
            database_url = await dbmod.create_database(server_url, EMBEDDED_DATABASE, exist_ok=True)
        if redis_url is None:
            embedded_redis = EmbeddedRedis(work / "redis")
            redis_url = await asyncio.to_thread(embedded_redis.start)
            stack.push_async_callback(asyncio.to_thread, embedded_redis.stop)
        yield database_url, redis_url


async def _database_pids(database_url: str, redis_url: str) -> tuple[int | None, int | None]:
    """The PostgreSQL postmaster and the redis-server of the URLs, when on this machine."""
    import asyncpg
    import redis.asyncio as aioredis

    conn = await asyncpg.connect(database_url)
    try:
        backend = int(await conn.fetchval("SELECT pg_backend_pid()"))
        postmaster = parent_pid(backend)
    finally:
        await conn.close()
    client = aioredis.Redis.from_url(redis_url)
    try:
        info = await client.info("server")
        redis_pid = int(info["process_id"])
    finally:
        await client.aclose()
    if parent_pid(redis_pid) is None:
        return postmaster, None
    return postmaster, redis_pid


@contextlib.asynccontextmanager
async def _serve(
    database_url: str, redis_url: str, work: Path, extra: tuple[str, ...]
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str, int]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TELESRV_")}
    log_path = work / "serve.log"
    with open(log_path, "wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "telesrv", "--log-level", "warning", "serve",
            "--listen", "127.0.0.1:0",
            "--data-dir", str(work / "data"),
            "--database-url", database_url,
            "--redis-url", redis_url,
            "--dev-login-code", LOGIN_CODE,
            "--auto-register",
            "--send-rate-limit", "0",
            *extra,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env=env,
        )  # fmt: skip
    try:
        assert process.stdout is not None
        async with asyncio.timeout(START_TIMEOUT):
            while True:
                line = (await process.stdout.readline()).decode()
                if not line:
                    tail = log_path.read_text(errors="replace")[-3000:]
                    raise click.ClickException(f"telesrv serve exited early:\n{tail}")
                if line.startswith(READY_PREFIX):
                    host, _, port = line[len(READY_PREFIX) :].strip().rpartition(":")
                    break
        yield process, host, int(port)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(STOP_TIMEOUT):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


class Clients:
    """The load processes and their command pipes."""

    def __init__(self, count: int, options: dict[str, Any], pairs: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes: list[Connection] = []
        self.processes: list[Any] = []
        for index in range(count):
            mine = list(range(index, pairs, count))
            if not mine:
                continue
            ours, theirs = context.Pipe()
            process = context.Process(
                target=client_process, args=(theirs, {**options, "pairs": mine}), daemon=True
            )
            process.start()
            theirs.close()
            self.pipes.append(ours)
            self.processes.append(process)

    async def _answer(self, pipe: Connection, expected: str) -> Any:
        kind, value = await asyncio.to_thread(pipe.recv)
        if kind == "error":
            raise click.ClickException(f"load process failed:\n{value}")
        if kind != expected:
            raise click.ClickException(f"load process answered {kind!r}, not {expected!r}")
        return value

    async def wait(self, expected: str) -> list[Any]:
        return list(await asyncio.gather(*(self._answer(p, expected) for p in self.pipes)))

    async def command(self, command: str) -> list[Any]:
        for pipe in self.pipes:
            pipe.send(command)
        return await self.wait(command)

    def close(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(OSError):
                pipe.send("stop")
        for process in self.processes:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join()


def percentile_ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3, 3)


class ServerCpu:
    """CPU seconds of the server's processes over a phase, from /proc."""

    def __init__(self, roots: list[int]) -> None:
        self.roots = roots

    def reading(self) -> float:
        return cpu_seconds(process_trees(self.roots))

    def split(self) -> list[float]:
        """One reading per root's process tree (telesrv, PostgreSQL, Redis)."""
        return [cpu_seconds(process_trees([root])) for root in self.roots]


async def run(
    *,
    pairs: int,
    messages: int,
    offline_messages: int,
    client_processes: int,
    database_url: str | None,
    redis_url: str | None,
    drain_timeout: float,
    serve_args: tuple[str, ...],
) -> dict[str, Any]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    with tempfile.TemporaryDirectory(prefix="telesrv-bench-e2e-") as tmp:
        work = Path(tmp)
        async with (
            _databases(database_url, redis_url, work) as (db_url, r_url),
            _serve(db_url, r_url, work, serve_args) as (process, host, port),
        ):
            pem = (work / "data" / "server_key.pub.pem").read_bytes()
            public_key = serialization.load_pem_public_key(pem)
            assert isinstance(public_key, rsa.RSAPublicKey)
            numbers = public_key.public_numbers()
            postmaster, redis_pid = await _database_pids(db_url, r_url)
            roots = [process.pid] + [p for p in (postmaster, redis_pid) if p is not None]
            cpu = ServerCpu(roots)
            options = {
                "host": host,
                "port": port,
                "n": numbers.n,
                "e": numbers.e,
                "messages": messages,
                "offline_messages": offline_messages,
                "drain_timeout": drain_timeout,
                # Fresh numbers every run: a given database may hold earlier runs' accounts.
                "phone_prefix": f"999{random.randrange(10**6):06d}",
            }
            clients = Clients(client_processes, options, pairs)
            try:
                await clients.wait("ready")
                load_pids = [p.pid for p in clients.processes]
                cpu_before, load_before = cpu.reading(), cpu_seconds(load_pids)
                split_before = cpu.split()
                online = await clients.command("online")
                online_cpu = cpu.reading() - cpu_before
                split = [b - a for a, b in zip(split_before, cpu.split(), strict=True)]
                load_cpu = cpu_seconds(load_pids) - load_before
                await clients.command("offline")
                cpu_before = cpu.reading()
                catch_up = await clients.command("catchup")
                catch_up_cpu = cpu.reading() - cpu_before
            finally:
                clients.close()
    sent = sum(o["sent"] for o in online)
    send_seconds = max(o["send_seconds"] for o in online)
    rtts = [v for o in online for v in o["send_rtts"]]
    push = [v for o in online for v in o["push_latencies"]]
    fetched = sum(c["fetched"] for c in catch_up)
    catch_up_seconds = max(c["seconds"] for c in catch_up)
    return {
        "bench": "e2e",
        "pairs": pairs,
        "messages_per_sender": messages,
        "client_processes": len(online),
        "msgs_per_s": round(sent / send_seconds, 1),
        "send_p50_ms": percentile_ms(rtts, 0.50),
        "send_p99_ms": percentile_ms(rtts, 0.99),
        "push_p50_ms": percentile_ms(push, 0.50),
        "push_p99_ms": percentile_ms(push, 0.99),
        "server_cpu_s": round(online_cpu, 3),
        "msgs_per_server_cpu_s": round(sent / online_cpu, 1) if online_cpu > 0 else None,
        "load_cpu_s": round(load_cpu, 3),
        # The server CPU by process tree: telesrv (all workers), then PostgreSQL, Redis.
        "server_cpu_split_s": [round(v, 3) for v in split],
        "lost": sum(o["lost"] for o in online),
        "duplicates": sum(o["duplicates"] for o in online),
        "catchup_messages": fetched,
        "catchup_msgs_per_s": round(fetched / catch_up_seconds, 1) if catch_up_seconds else None,
        "catchup_get_difference_calls": sum(c["requests"] for c in catch_up),
        "catchup_server_cpu_s": round(catch_up_cpu, 3),
        "catchup_lost": sum(c["lost"] for c in catch_up),
        "catchup_duplicates": sum(c["duplicates"] for c in catch_up),
        "database_cpu_counted": postmaster is not None,
        "redis_cpu_counted": redis_pid is not None,
        "cpus": os.cpu_count(),
    }


@click.command("e2e")
@click.option("--pairs", type=click.IntRange(1, 1000), default=8, show_default=True,
              help="Sender/receiver pairs (K).")  # fmt: skip
@click.option("--messages", type=click.IntRange(1), default=200, show_default=True,
              help="Messages each sender sends online (N), one after the other.")  # fmt: skip
@click.option("--offline-messages", type=click.IntRange(1), default=100, show_default=True,
              help="Messages each sender sends to its offline receiver, fetched with "
              "updates.getDifference in the catch-up phase.")  # fmt: skip
@click.option("--client-processes", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Load processes the pairs are spread over.")  # fmt: skip
@click.option("--drain-timeout", type=click.FloatRange(min=0), default=15.0, show_default=True,
              help="Seconds to wait for outstanding pushes before counting them lost.")  # fmt: skip
@click.option("--serve-arg", "serve_args", multiple=True, metavar="ARG",
              help="Extra argument for `telesrv serve` (repeatable), e.g. "
              "--serve-arg=--outbox-workers=4.")  # fmt: skip
@click.option("--database-url", envvar="TELESRV_DATABASE_URL", default=None, metavar="URL",
              help="PostgreSQL to use instead of an embedded one.")  # fmt: skip
@click.option("--redis-url", envvar="TELESRV_REDIS_URL", default=None, metavar="URL",
              help="Redis to use instead of an embedded one.")  # fmt: skip
def command(
    pairs: int,
    messages: int,
    offline_messages: int,
    client_processes: int,
    drain_timeout: float,
    serve_args: tuple[str, ...],
    database_url: str | None,
    redis_url: str | None,
) -> None:
    """End to end over MTProto: msg/s, send and push latency, server CPU, catch-up."""
    r = asyncio.run(
        run(
            pairs=pairs,
            messages=messages,
            offline_messages=offline_messages,
            client_processes=client_processes,
            database_url=database_url,
            redis_url=redis_url,
            drain_timeout=drain_timeout,
            serve_args=serve_args,
        )
    )
    rows = [
        ("pairs x messages", f"{pairs} x {messages}"),
        ("msg/s", f"{r['msgs_per_s']:.1f}"),
        ("send RTT p50 / p99 ms", f"{r['send_p50_ms']:.2f} / {r['send_p99_ms']:.2f}"),
        ("push p50 / p99 ms", f"{r['push_p50_ms']:.2f} / {r['push_p99_ms']:.2f}"),
        ("server CPU s", f"{r['server_cpu_s']:.2f}"),
        ("msgs per server CPU s", str(r["msgs_per_server_cpu_s"])),
        ("load processes CPU s", f"{r['load_cpu_s']:.2f}"),
        ("lost / duplicates", f"{r['lost']} / {r['duplicates']}"),
        ("catch-up msg/s", str(r["catchup_msgs_per_s"])),
        ("catch-up lost / duplicates", f"{r['catchup_lost']} / {r['catchup_duplicates']}"),
    ]
    for name, value in rows:
        click.echo(f"{name:<28}{value:>18}")
    click.echo(json.dumps(r))
