"""The processes of ``telesrv bench connections`` for one connection count: a server
process and its load process, or several such pairs sharing the count.

The server process runs a gateway on its own event loop (uvloop's when installed, as
``telesrv serve`` does) and starts the load process, which opens the signed-in idle
connections: ``sessions_per_key`` connections share each auth key (one key exchange
and one sign-in per key, as a client's several sessions do), every one of them made
pushable by one request. The server process measures its own resident memory before
and after, then pushes, and the load process times the arrivals (its own reading and
decrypting included: ``push_all_written_ms`` is the server's part, until the last
push was encrypted and handed to the kernel). Both read the same
monotonic clock (``time.perf_counter`` is CLOCK_MONOTONIC on Linux).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import multiprocessing
import resource
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

LOGIN_CODE = "13579"
# Clients per loopback source address, within the default per-address limit (256).
CLIENTS_PER_ADDRESS = 128
KEYS_AT_ONCE = 32  # key exchanges and sign-ins in flight in the load process
SETTLE_SECONDS = 1.0  # for held acks and answers to leave before memory is read
PUSH_TIMEOUT = 120.0
CONTAINER_ITEMS = 1000  # messages in one container of --used-ids
FD_SLACK = 512  # descriptors beyond the connections: listeners, databases, files
# How long the processes of a spread count wait for each other to have connected
# (thousands of key exchanges each, on shared cores).
BARRIER_TIMEOUT = 1800.0


def rss_bytes() -> int:
    """Resident memory of this process, from /proc (0 where there is none)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def settled_rss() -> int:
    """Resident memory once garbage is collected and the C heap's free memory is
    given back (glibc keeps it otherwise, and the figure would count it as held)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss_bytes()


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's descriptor limit towards ``wanted`` (past the hard limit
    only where allowed, as root); returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return soft
    for limits in ((wanted, max(hard, wanted)), (min(wanted, hard), hard)):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)
            break
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# -- load process -------------------------------------------------------------------


class _Session:
    """One idle connection of the load: its client and the arrival times of pushes."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.reader: asyncio.Task[None] | None = None


class Load:
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self.sessions: list[_Session] = []
        # By key index: keys sign in concurrently, and the first (index 0) is the one
        # with the full sessions_per_key the one-user push is timed on.
        self.user_ids: dict[int, int] = {}
        self.arrivals: list[float] = []
        self.arrived = asyncio.Event()
        self.expected = 0

    def _source(self) -> str:
        from telesrv.bench._client import loopback_source

        return loopback_source(len(self.sessions), CLIENTS_PER_ADDRESS)

    async def _ack(self, client: Any) -> None:
        """Acknowledge what the server sent, as a client does: nothing stays held."""
        from telesrv.tl import mt

        ids = [m.msg_id for m in client.received if m.seq_no & 1]
        client.received.clear()
        if ids:
            _msg_id, payload = client.session.encrypt(
                mt.MsgsAck(msg_ids=ids).to_bytes(), content=False
            )
            client.conn.send(payload)

    async def _open_key(self, index: int, count: int) -> None:
        from telesrv.bench._client import (
            EncryptedClient,
            EncryptedSession,
            MsgIdClock,
            PublicKey,
            RawConnection,
        )
        from telesrv.bench._e2e_load import Device
        from telesrv.tl import functions

        options = self.options
        host, port = options["host"], options["port"]
        device = Device(
            host,
            port,
            PublicKey(options["n"], options["e"]),
            f"{options['phone_prefix']}{index:06d}",
            source=self._source(),
        )
        await device.log_in(LOGIN_CODE)
        await device.call(functions.help.GetNearestDc())  # pushable from now on
        device.flush_acks()
        self.user_ids[index] = device.user_id
        self._keep(device.client)
        await self._use_ids(device.client)
        salt = device.client.session.salt
        for _ in range(count - 1):
            conn = await RawConnection.open(host, port, self._source())
            session = EncryptedSession(
                device.key.auth_key, salt, clock=MsgIdClock(device.key.time_offset)
            )
            client = EncryptedClient(conn, session)
            self._keep(client)
            await client.call(functions.help.GetNearestDc().to_bytes())
            await self._ack(client)
            await self._use_ids(client)

    def _keep(self, client: Any) -> None:
        self.sessions.append(_Session(client))

    async def _use_ids(self, client: Any) -> None:
        """Send ``used_ids`` messages the server remembers the ids of (empty msgs_ack,
        a container at a time, nothing answered): a session that has been used."""
        from telesrv.tl import mt
        from telesrv.tl.service import ContainerItem, encode_container

        left = self.options.get("used_ids", 0)
        body = mt.MsgsAck(msg_ids=[]).to_bytes()
        session = client.session
        while left > 0:
            chunk = min(left, CONTAINER_ITEMS)
            items = [
                ContainerItem(session.clock.next(), session.next_seq_no(False), body)
                for _ in range(chunk)
            ]
            _msg_id, payload = session.encrypt(encode_container(items), content=False)
            client.conn.send(payload)
            left -= chunk
        if self.options.get("used_ids", 0):
            await client.ping(1)  # answered after them: the server has them all

    async def connect(self) -> dict[str, Any]:
        total = self.options["count"]
        per_key = self.options["sessions_per_key"]
        keys = [min(per_key, total - start) for start in range(0, total, per_key)]
        slots = asyncio.Semaphore(KEYS_AT_ONCE)
        started = time.perf_counter()

        async def one(index: int, count: int) -> None:
            async with slots:
                await self._open_key(index, count)

        await asyncio.gather(*(one(i, c) for i, c in enumerate(keys)))
        for session in self.sessions:
            session.reader = asyncio.create_task(self._read(session))
        return {
            "user_ids": [self.user_ids[i] for i in sorted(self.user_ids)],
            "connections": len(self.sessions),
            "seconds": time.perf_counter() - started,
        }

    async def _read(self, session: _Session) -> None:
        from telesrv.bench._client import ClientError
        from telesrv.tl import types

        update_short = types.UpdateShort.CONSTRUCTOR_ID
        client = session.client
        with contextlib.suppress(ClientError, ConnectionError, asyncio.IncompleteReadError):
            while True:
                messages = client.session.decrypt(await client.conn.recv())
                if any(m.constructor == update_short for m in messages):
                    self.arrivals.append(time.perf_counter())
                    if len(self.arrivals) >= self.expected:
                        self.arrived.set()

    async def wait_arrivals(self, expected: int) -> list[float]:
        """Once ``expected`` pushes arrived (or the timeout passed): their times."""
        self.expected = expected
        if len(self.arrivals) < expected:
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), PUSH_TIMEOUT)
        found, self.arrivals = self.arrivals, []
        return found

    async def close(self) -> None:
        for session in self.sessions:
            if session.reader is not None:
                session.reader.cancel()
            session.client.conn.writer.close()


async def _load_main(pipe: Connection, options: dict[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    load = Load(options)
    try:
        pipe.send(("connected", await load.connect()))
        while True:
            command, value = await loop.run_in_executor(None, pipe.recv)
            if command == "arrivals":
                pipe.send(("arrivals", await load.wait_arrivals(value)))
            else:
                break
    finally:
        await load.close()


def load_process(pipe: Connection, options: dict[str, Any]) -> None:
    try:
        raise_fd_limit(options["count"] + FD_SLACK)
        asyncio.run(_load_main(pipe, options))
    except BaseException:
        pipe.send(("error", traceback.format_exc()))
    finally:
        pipe.close()


# -- server process -----------------------------------------------------------------


def _answer(pipe: Connection, expected: str) -> Any:
    kind, value = pipe.recv()
    if kind == "error":
        raise RuntimeError(f"load process failed:\n{value}")
    if kind != expected:
        raise RuntimeError(f"load process answered {kind!r}, not {expected!r}")
    return value


def percentile_ms(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))
    return round(ordered[index] * 1e3, 2)


def _seen_ids(gateway: Any) -> int:
    """Client msg_ids remembered by all sessions (their replay tables)."""
    return sum(len(e.session._seen) for e in gateway.sessions._entries.values())


def _push_body() -> bytes:
    from telesrv.tl import types

    update = types.UpdateUserStatus(user_id=1, status=types.UserStatusOnline(expires=2**31 - 1))
    return types.UpdateShort(update=update, date=int(time.time())).to_bytes()


async def _measure(options: dict[str, Any], report: Callable[[dict[str, Any]], None]) -> None:
    from telesrv.app import open_resources
    from telesrv.config import Settings
    from telesrv.gateway.budgets import TokenBucket
    from telesrv.wiring import build_server

    count = options["count"]
    settings = Settings(
        listen_host="127.0.0.1",
        listen_port=0,
        data_dir=Path(options["data_dir"]),
        database_url=options["database_url"],
        redis_url=options["redis_url"],
        dev_login_code=LOGIN_CODE,
        auto_register=True,
        # The process-wide cap is the thing measured past: this server allows them all.
        max_connections=count + FD_SLACK,
        # Idle is what is measured; the clients do not ping.
        idle_timeout=24 * 3600.0,
        handshakes_per_ip_per_second=1e9,
        handshake_burst_per_ip=10**9,
    )
    loop = asyncio.get_running_loop()
    async with open_resources(settings) as resources:
        server = build_server(settings, resources)
        server.gateway.handshake_budget = TokenBucket(1e9, 10**9)
        host, port = await server.start("127.0.0.1", 0)
        gateway = server.gateway
        numbers = resources.server_key.private_key.public_key().public_numbers()
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        barrier = options.get("barrier")
        load_options = {
            **{k: v for k, v in options.items() if k != "barrier"},
            "host": host,
            "port": port,
            "n": numbers.n,
            "e": numbers.e,
        }
        process = context.Process(target=load_process, args=(theirs, load_options), daemon=True)
        try:
            await asyncio.sleep(SETTLE_SECONDS)
            rss_before = settled_rss()
            process.start()
            theirs.close()
            connected = await loop.run_in_executor(None, _answer, ours, "connected")
            await asyncio.sleep(SETTLE_SECONDS)
            rss_after = settled_rss()
            held = gateway.sessions.held_bytes
            seen_ids = _seen_ids(gateway)
            # As the housekeeping does to a session idle for COMPACT_AFTER_SECONDS,
            # where the gateway has it (a gateway without it has nothing to do).
            compact = getattr(gateway.sessions, "compact_idle", None)
            if compact is not None:
                compact(time.time() + 300.0)
            seen_after_compact = _seen_ids(gateway)
            rss_compacted = settled_rss()
            connections = gateway.connection_count()
            user_ids: list[int] = connected["user_ids"]
            body = _push_body()

            one_user_figures: dict[str, Any] = {}
            if options.get("push_one_user", True):
                # One push to one user: all the sessions of its key.
                ours.send(("arrivals", options["sessions_per_key"]))
                started = time.perf_counter()
                one = gateway.push_to_user(user_ids[0], body)
                arrivals = await loop.run_in_executor(None, _answer, ours, "arrivals")
                one_user = [t - started for t in arrivals]
                one_user_figures = {
                    "push_one_user_sessions": one,
                    "push_one_user_arrived": len(one_user),
                    "push_one_user_max_ms": percentile_ms(one_user, 1.0),
                }
            if barrier is not None:
                # The processes of a spread count push to all their users together.
                await loop.run_in_executor(None, barrier.wait, BARRIER_TIMEOUT)

            # One push to every user at once: every connection gets one.
            ours.send(("arrivals", connections))
            started = time.perf_counter()
            reached = sum(gateway.push_to_user(uid, body) for uid in user_ids)
            queued = time.perf_counter() - started
            # The gateway encrypts and writes them in one callback, scheduled first.
            written_future = loop.create_future()
            loop.call_soon(written_future.set_result, None)
            await written_future
            written = time.perf_counter() - started
            arrivals = await loop.run_in_executor(None, _answer, ours, "arrivals")
            everyone = [t - started for t in arrivals]
            ours.send(("stop", None))
            # What the process saw; the bench (connections.py) derives its figures
            # from these, for one process or several.
            result = {
                "connections": connections,
                "sessions": connected["connections"],
                "users": len(user_ids),
                "connect_seconds": connected["seconds"],
                "rss_before": rss_before,
                "rss_after": rss_after,
                "rss_compacted": rss_compacted,
                "held_bytes": held,
                "seen_ids": seen_ids,
                "seen_ids_compacted": seen_after_compact,
                **one_user_figures,
                "push_all_sessions": reached,
                "push_all_queue_s": queued,
                "push_all_written_s": written,
                "push_all_arrivals_s": everyone,
            }
            # Sent before the teardown: a server that then fails to stop (a task
            # that swallowed its cancellation) is killed, its figures kept.
            report(result)
        finally:
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join()
            await server.stop()


def _server_main(pipe: Connection, options: dict[str, Any]) -> None:
    from telesrv.app import run_async

    reported = False

    def report(result: dict[str, Any]) -> None:
        nonlocal reported
        pipe.send(("result", result))
        reported = True

    try:
        raise_fd_limit(options["count"] + FD_SLACK)
        run_async(lambda: _measure(options, report))
    except BaseException:
        if not reported:
            pipe.send(("error", traceback.format_exc()))
        barrier = options.get("barrier")
        if barrier is not None:
            barrier.abort()  # the other processes stop waiting for this one
    finally:
        pipe.close()


def measure_in_processes(shards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run one connection count in fresh server processes (memory starts clean), a
    share of the connections each, with a load process each; what each saw.

    Several processes share the count when one cannot hold it (its descriptors): they
    connect at the same time, and push to all their users together."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(shards)) if len(shards) > 1 else None
    started = []
    for index, options in enumerate(shards):
        ours, theirs = context.Pipe()
        process = context.Process(
            target=_server_main,
            args=(theirs, {**options, "barrier": barrier, "push_one_user": index == 0}),
        )
        process.start()
        theirs.close()
        started.append((ours, process))
    outcomes: list[tuple[str, Any]] = []
    for ours, process in started:
        try:
            outcomes.append(ours.recv())
        except EOFError:
            outcomes.append(("error", f"server process ended with code {process.exitcode}"))
    for _, process in started:
        process.join(60)
        if process.is_alive():
            process.kill()
            process.join()
    for kind, value in outcomes:
        if kind == "error":
            raise RuntimeError(f"server process failed:\n{value}")
    return [dict(value) for _, value in outcomes]
