"""PostgreSQL's transactions, WAL bytes and statements per message for `telesrv bench
send` and `telesrv bench e2e`, of whichever checkout is on PYTHONPATH:

    PYTHONPATH=<checkout>/src python scripts/pg_bench_stats.py send [bench send options]
    PYTHONPATH=<checkout>/src python scripts/pg_bench_stats.py e2e [bench e2e options]

It starts a PostgreSQL of its own (embedded, pg_stat_statements loaded) and runs the
bench on it with --database-url; the bench's output passes through, its last line (the
JSON) with pg_xacts_per_msg, pg_wal_bytes_per_msg, pg_statements_per_msg and
pg_statements_reason. A bench that takes these readings itself (bench/_pg_stats.py) is
only given the database. One that predates them, as the baseline a change is measured
against, gets the same readings at the same places, by wrapping its methods:

- send: after the users are made, and after phase 1's CPU figures (before phase 2
  draws its sample of users), over phase 1's messages;
- e2e: once the clients are ready, and before the offline phase, over the online
  phase's messages; and, when the bench does not count them, the telesrv processes'
  read and write system calls per message, right around the online phase, as the
  bench counts them since.

The readings are those of bench/_pg_stats.py of this script's own checkout, loaded by
path (with store/pg_stats.py, its statements, where the measured checkout has none), so
both sides of a comparison are measured by the same code. Each waits some 11 s,
idle (see there), outside the benches' CPU figures.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.util
import io
import json
import os
import random
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

_BENCH = Path(__file__).resolve().parents[1] / "src" / "telesrv" / "bench"


def _load(name: str) -> Any:
    """A module of this script's own checkout's bench, by its path."""
    return _load_as(f"_pg_bench_stats{name}", _BENCH / f"{name}.py")


def _load_as(module_name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _load_pg_stats() -> Any:
    """bench/_pg_stats.py of this script's checkout. The statements it runs,
    store/pg_stats.py, are this checkout's too where the measured one has none."""
    store = "telesrv.store.pg_stats"
    if importlib.util.find_spec(store) is None:
        _load_as(store, _BENCH.parent / "store" / "pg_stats.py")
    return _load("_pg_stats")


class _Span:
    """The readings of one measured phase. They run in an event loop of their own, in a
    thread: a wrapped method that is not a coroutine can then take one too (it blocks
    the bench's loop meanwhile, between phases, when nothing of the bench runs)."""

    def __init__(self, pg_stats: Any, database_url: str, *, server_idles: bool) -> None:
        self.pg_stats = pg_stats
        self.server_idles = server_idles
        self.database_url = database_url
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.stats: Any = None
        self.before: Any = None
        self.messages: int | None = None
        self.figures: dict[str, Any] | None = None
        self.extra: dict[str, Any] = {}  # further figures of a bench that lacks them

    def _submit(self, coroutine: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    async def _start(self) -> None:
        self.stats = await self.pg_stats.PgStats.open(self.database_url)
        self.before = await self.stats.reading()

    async def _end(self) -> None:
        after = await self.stats.reading()
        # A server (bench e2e) keeps working while idle: what it does in one more wait
        # is taken off, as the bench does. bench send's harness is stopped by then.
        idle = (after, await self.stats.reading()) if self.server_idles else None
        self.figures = self.stats.figures(self.before, after, self.messages, idle)
        await self.stats.close()

    async def start(self) -> None:
        if self.stats is None:
            await asyncio.wrap_future(self._submit(self._start()))

    def end_blocking(self) -> None:
        if self.before is not None and self.figures is None and self.messages is not None:
            self._submit(self._end()).result()

    async def end(self) -> None:
        if self.before is not None and self.figures is None and self.messages is not None:
            await asyncio.wrap_future(self._submit(self._end()))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def _replace(owner: Any, name: str, value: Any) -> None:
    """Put a wrapper in place of a bench's function (whichever checkout's it is)."""
    setattr(owner, name, value)


class _RandomAtPhase2:
    """The bench's ``random`` module, but for ``Random(2)``, phase 2's sample, made
    right after phase 1's CPU figures and before any timing: the end reading first."""

    def __init__(self, span: _Span) -> None:
        self._span = span

    def __getattr__(self, name: str) -> Any:
        return getattr(random, name)

    def Random(self, *args: Any) -> random.Random:  # noqa: N802 (the module's name)
        if args == (2,):
            self._span.end_blocking()
        return random.Random(*args)


def _wrap_send(span: _Span) -> None:
    from telesrv.bench import send

    create_users, send_loop = send.Harness.create_users, send.Harness.send_loop

    async def create_users_then_read(self: Any, *args: Any, **kwargs: Any) -> None:
        await create_users(self, *args, **kwargs)
        await span.start()

    async def send_loop_counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        latencies, errors = await send_loop(self, *args, **kwargs)
        if span.messages is None:  # phase 1's: the first
            span.messages = len(latencies)
        return latencies, errors

    _replace(send.Harness, "create_users", create_users_then_read)
    _replace(send.Harness, "send_loop", send_loop_counted)
    _replace(send, "random", _RandomAtPhase2(span))


def _serve_pids() -> list[int]:
    """The `telesrv serve` processes this process started (the bench's server)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"telesrv" in argv and b"serve" in argv:
            found.append(int(entry.name))
    return found


def _wrap_e2e(span: _Span) -> None:
    from telesrv.bench._e2e_load import Clients

    proc = _load("_proc_cpu")

    wait, command = Clients.wait, Clients.command

    async def wait_then_read(self: Any, expected: str) -> Any:
        result = await wait(self, expected)
        if expected == "ready":
            await span.start()
        return result

    async def command_read(self: Any, name: str) -> Any:
        if name == "offline":
            await span.end()
        if name != "online":
            return await command(self, name)
        servers = proc.process_trees(_serve_pids())
        calls_before = proc.syscalls(servers)
        result = await command(self, name)
        calls_after = proc.syscalls(servers)
        span.messages = sent = sum(o["sent"] for o in result)
        # As the bench does since it counts them, right around the online phase.
        span.extra = {
            "syscalls_read_per_msg": round((calls_after[0] - calls_before[0]) / sent, 2),
            "syscalls_write_per_msg": round((calls_after[1] - calls_before[1]) / sent, 2),
        }
        return result

    _replace(Clients, "wait", wait_then_read)
    _replace(Clients, "command", command_read)


async def _database(pg_stats: Any, work: Path) -> tuple[Any, str]:
    from telesrv.store import db as dbmod

    postgres, server_url = await pg_stats.embedded_postgres_with_statements(work / "pg")
    return postgres, await dbmod.create_database(server_url, "telesrv", exist_ok=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("send", "e2e"):
        print(__doc__, file=sys.stderr)
        return 2
    kind, rest = argv[0], argv[1:]
    pg_stats = _load_pg_stats()
    native = importlib.util.find_spec("telesrv.bench._pg_stats") is not None
    from telesrv.cli import main as cli

    with tempfile.TemporaryDirectory(prefix="telesrv-pg-bench-stats-") as tmp:
        postgres, database_url = asyncio.run(_database(pg_stats, Path(tmp)))
        span = _Span(pg_stats, database_url, server_idles=kind == "e2e")
        try:
            if not native:
                (_wrap_send if kind == "send" else _wrap_e2e)(span)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = cli.main(
                    ["bench", kind, *rest, "--database-url", database_url],
                    standalone_mode=False,
                )
        finally:
            span.close()
            postgres.stop()
    lines = out.getvalue().rstrip("\n").splitlines()
    result = json.loads(lines[-1])
    if not native:
        result.update(span.figures or pg_stats.unmeasured("the phase was not seen"))
        for key, value in span.extra.items():
            result.setdefault(key, value)
    result["pg_stats_by"] = "bench" if native else "scripts/pg_bench_stats.py"
    print("\n".join(lines[:-1]))
    print(json.dumps(result))
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
