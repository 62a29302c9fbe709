"""``telesrv bench send``: a closed-loop send harness on the real stores.

PostgreSQL, Redis, the message service and a real outbox delivery, wired as
the server wires them; pushes go to a gateway with no connections (the sends are
measured, not the sockets), so the outbox does its full claim -> load -> render -> delete
round trips. Phases:

1. steady state: ``--concurrency`` workers send ``--messages`` messages between
   ``--users`` users as fast as they can, with the dispatcher running (no user has a
   session, so rows are dropped unrendered, as the server does);
2. getDifference: a sample of users catch up from pts 0 (service + rendering);
3. drain: ``--backlog`` messages are sent with the dispatcher stopped, then it is
   started and the time to empty the outbox is measured: once rendering every row
   as if its user were online (``outbox_drain_rows_per_s``), once for users with no
   session (``outbox_drain_offline_rows_per_s``).

The last line is one JSON object with the figures and correctness counters.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from telesrv.app import Resources, open_resources, run_async
from telesrv.bench._e2e_server import database_pids, databases
from telesrv.bench._pg_stats import SETTLE, PgStats, unmeasured
from telesrv.bench._proc_cpu import ServerCpu
from telesrv.config import Settings
from telesrv.delivery.metrics import DELIVERED
from telesrv.delivery.outbox import OutboxDelivery
from telesrv.services.chat_hooks import AfterSend
from telesrv.services.messages import MessageService, Origin, OutgoingText
from telesrv.services.sends import SendPipeline
from telesrv.store import bench_checks
from telesrv.store import outbox as outbox_store
from telesrv.store.send_groups import SendGroups
from telesrv.wiring import build_server

ORIGIN = Origin(auth_key_id=1, session_id=1)


# The gate of ``--enforce-slo``: single-node targets for private text messages, and
# correctness counters that must stay at zero on every run.
SLO_MIN: dict[str, float] = {"msgs_per_s": 200.0}
SLO_MAX: dict[str, float] = {"send_p99_ms": 150.0, "getdifference_p99_ms": 100.0}
CORRECTNESS_ZERO = ("errors", "duplicates", "lost", "pts_holes", "outbox_failed")


def slo_thresholds() -> dict[str, Any]:
    """The thresholds :func:`check_slo` applies, as the JSON states them."""
    return {
        "min": dict(SLO_MIN),
        "max": dict(SLO_MAX),
        "zero": list(CORRECTNESS_ZERO),
    }


def check_slo(result: dict[str, Any]) -> list[str]:
    """Each SLO or correctness counter ``result`` fails, in words; empty when all pass.
    A figure missing from ``result`` fails too: a gate must not pass on no data."""
    failures: list[str] = []
    for key, floor in SLO_MIN.items():
        value = result.get(key)
        if not isinstance(value, int | float) or value < floor:
            failures.append(f"{key} {value} < {floor}")
    for key, ceiling in SLO_MAX.items():
        value = result.get(key)
        if not isinstance(value, int | float) or value >= ceiling:
            failures.append(f"{key} {value} >= {ceiling}")
    for key in CORRECTNESS_ZERO:
        value = result.get(key)
        if value != 0:
            failures.append(f"{key} {value} != 0")
    return failures


def _rate(rows: int, seconds: float) -> float:
    return round(rows / seconds, 1) if seconds else 0.0


def _per(cpu_seconds: float, units: int, scale: float) -> float:
    return round(cpu_seconds * scale / units, 1) if units else 0.0


def _delivered() -> float:
    """Rows the dispatchers of this process handled so far. Read from the one counter
    (the registry's lookup would collect every metric of the process on each call)."""
    for metric in DELIVERED.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                return sample.value
    return 0.0


async def wait_drained(pool: Any, rows: int) -> None:
    """Until the outbox holds no pending row, ``rows`` being what it held at the start.

    Follows the dispatcher's own count of handled rows and asks the table only once
    that count is reached (and every half second, should rows be put back for a retry):
    counting the table every few milliseconds, as this harness did, scanned it about a
    hundred times a second during the drain, work the server never does that took CPU
    from the drain it measures."""
    target = _delivered() + rows
    checked = time.perf_counter()
    while True:
        await asyncio.sleep(0.005)
        now = time.perf_counter()
        if _delivered() >= target or now - checked >= 0.5:
            checked = now
            if not await outbox_store.pending_count(pool):
                return


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _no_socket(user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int:
    return 0


def _everyone(user_id: int) -> bool:
    return True


def _no_one(user_id: int) -> bool:
    return False


class Harness:
    """The server's own parts (built by the composition root), with an outbox delivery
    of its own that pushes to no socket."""

    def __init__(self, settings: Settings, resources: Resources, workers: int, batch: int) -> None:
        self.resources = resources
        server = build_server(settings, resources)
        parts = server.parts
        assert parts is not None
        self.parts = parts
        self.counters = parts.counters
        # Sends without the dialog hooks the server adds (closing the action bar on a
        # first reply, unarchiving): the figures stay comparable with earlier commits,
        # and the backlog holds exactly both sides of each message.
        sends = SendPipeline(
            resources.db, parts.counters, server.rate_limits, send_rate_limit=0,
            after=AfterSend(),
            on_commit=parts.committed.wake,
            groups=SendGroups(resources.db, max_sends=settings.send_group_size)
            if settings.send_group_size > 1 else None,
        )  # fmt: skip
        self.messages = MessageService(resources.db, parts.counters, sends)
        self.updates = parts.updates
        self.renderer = parts.renderer
        self.dispatcher: OutboxDelivery | None = None
        self.workers = workers
        self.batch = batch
        self.user_ids: list[int] = []

    async def create_users(self, count: int) -> None:
        """Real accounts, so pushes render users through the projection as the server does."""
        base = random.Random().randrange(10**9, 9 * 10**9)
        for i in range(count):
            account = await self.parts.account.users.create(f"{base + i}", f"Bench {i}")
            self.user_ids.append(account.user_id)

    def start_dispatcher(self, *, online: bool = True) -> None:
        """``online``: render every row as if its user had a session (the push itself is
        a no-op); otherwise rows are dropped unrendered, as the server does for users
        with no session."""
        self.dispatcher = OutboxDelivery(
            self.resources.db,
            self.renderer.push_bytes,
            _no_socket,  # measure the outbox itself
            workers=self.workers,
            batch=self.batch,
            online=_everyone if online else _no_one,
            render_batch=self.renderer.batch_bytes,
            wakeup=self.parts.committed,
        )
        self.dispatcher.start()

    async def stop_dispatcher(self) -> None:
        if self.dispatcher is not None:
            await self.dispatcher.stop()
            self.dispatcher = None

    async def send_loop(
        self, users: int, concurrency: int, count: int, seed: int, first_random: int
    ) -> tuple[list[float], int]:
        rng = random.Random(seed)
        pairs = []
        for i in range(count):
            a = rng.randrange(users)
            b = (a + 1 + rng.randrange(users - 1)) % users
            pairs.append((self.user_ids[a], self.user_ids[b], first_random + i))
        queue = iter(pairs)
        latencies: list[float] = []
        errors = 0

        async def worker() -> None:
            nonlocal errors
            for sender, recipient, random_id in queue:
                started = time.perf_counter()
                try:
                    await self.messages.send_text(
                        OutgoingText(sender, recipient, random_id, f"bench {random_id}"),
                        ORIGIN,
                        int(time.time()),
                    )
                except Exception:
                    errors += 1
                    continue
                latencies.append((time.perf_counter() - started) * 1000)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies, errors


async def _run(settings: Settings, opts: dict[str, Any]) -> dict[str, Any]:
    # Embedded servers of the bench's own when no URL is given: its PostgreSQL with
    # pg_stat_statements loaded.
    async with databases(settings.database_url, settings.redis_url, settings.data_dir) as (
        database_url,
        redis_url,
    ):
        settings = replace(settings, database_url=database_url, redis_url=redis_url)
        return await _run_on(settings, opts)


async def _run_on(settings: Settings, opts: dict[str, Any]) -> dict[str, Any]:
    async with open_resources(settings) as resources:
        harness = Harness(settings, resources, opts["workers"], opts["batch"])
        pool = resources.db.pool
        await harness.counters.load_scripts()
        await harness.create_users(opts["users"])
        # PostgreSQL's counts over phase 1: readings outside its CPU figures (each
        # waits idle, see bench/_pg_stats.py).
        pg = await PgStats.open(resources.database_url) if opts["pg_stats"] else None
        pg_settle = opts["pg_settle"]
        pg_before = await pg.reading(pg_settle) if pg else None
        # CPU seconds of this process (the server's code) and of PostgreSQL per phase:
        # steadier than wall-clock figures on a shared machine.
        postmaster, _ = await database_pids(resources.database_url, resources.redis_url)
        own = ServerCpu([os.getpid()])
        database = ServerCpu([postmaster] if postmaster is not None else [])

        # 1. steady state; the gateway has no connections, so
        # the dispatcher does what the server does for users with no session
        harness.start_dispatcher(online=False)
        cpu0, db_cpu0 = own.reading(), database.reading()
        started = time.perf_counter()
        latencies, errors = await harness.send_loop(
            opts["users"], opts["concurrency"], opts["messages"], seed=1, first_random=0
        )
        elapsed = time.perf_counter() - started
        sent = len(latencies)
        deadline = time.perf_counter() + 60
        while await outbox_store.pending_count(pool) and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        await harness.stop_dispatcher()
        send_cpu = (own.reading() - cpu0, database.reading() - db_cpu0)
        if pg and pg_before:
            pg_figures = pg.figures(pg_before, await pg.reading(pg_settle), sent)
            await pg.close()
        else:
            pg_figures = unmeasured("not measured (--no-pg-stats)")
        # The first sends of a fresh process open connections and plan statements for
        # the first time; this figure leaves out the first two rounds of workers.
        warm = latencies[2 * opts["concurrency"] :]

        # 2. getDifference from scratch for a sample of users
        diff_ms: list[float] = []
        for uid in random.Random(2).sample(range(opts["users"]), min(200, opts["users"])):
            pts = 0
            while True:
                t0 = time.perf_counter()
                diff = await harness.updates.difference(harness.user_ids[uid], pts)
                if diff.events:
                    await harness.renderer.render(harness.user_ids[uid], diff.events)
                diff_ms.append((time.perf_counter() - t0) * 1000)
                if diff.kind != "slice":
                    break
                pts = diff.pts

        # 3. drain a backlog: rendered (users online), then dropped (nobody online)
        drains: dict[str, tuple[int, float]] = {}
        drain_cpu: dict[str, tuple[float, float]] = {}
        backlog_errors = 0
        for label, online, seed in (("rendered", True, 3), ("offline", False, 4)):
            _, failed_sends = await harness.send_loop(
                opts["users"],
                opts["concurrency"],
                opts["backlog"],
                seed=seed,
                first_random=10**9 * seed,
            )
            backlog_errors += failed_sends
            rows = await outbox_store.pending_count(pool)
            cpu0, db_cpu0 = own.reading(), database.reading()
            harness.start_dispatcher(online=online)
            t0 = time.perf_counter()
            await wait_drained(pool, rows)
            drains[label] = (rows, time.perf_counter() - t0)
            await harness.stop_dispatcher()
            drain_cpu[label] = (own.reading() - cpu0, database.reading() - db_cpu0)

        # correctness: every send landed once, every user's log is dense
        expected = sent + 2 * opts["backlog"] - backlog_errors
        first_user = min(harness.user_ids)
        messages = await bench_checks.count_messages_sent_by(pool, first_user)
        duplicates = await bench_checks.count_duplicate_sends(pool, first_user)
        holes = await bench_checks.count_users_with_pts_holes(pool, first_user)
        failed = await outbox_store.failed_count(pool)
        return {
            "bench": "send",
            "users": opts["users"],
            "concurrency": opts["concurrency"],
            "messages": opts["messages"],
            "msgs_per_s": round(sent / elapsed, 1) if elapsed else 0.0,
            "send_p50_ms": round(percentile(latencies, 0.50), 2),
            "send_p99_ms": round(percentile(latencies, 0.99), 2),
            "send_max_ms": round(max(latencies, default=0.0), 2),
            "getdifference_p99_ms": round(percentile(diff_ms, 0.99), 2),
            "getdifference_p50_ms": round(statistics.median(diff_ms), 2) if diff_ms else 0.0,
            "outbox_backlog_rows": drains["rendered"][0],
            "outbox_drain_rows_per_s": _rate(*drains["rendered"]),
            "outbox_drain_offline_rows_per_s": _rate(*drains["offline"]),
            "outbox_workers": opts["workers"],
            "outbox_batch": opts["batch"],
            "send_group_size": settings.send_group_size,
            "errors": errors + backlog_errors,
            "duplicates": int(duplicates),
            "lost": int(expected - messages),
            "pts_holes": int(holes),
            "outbox_failed": int(failed),
            "send_p99_warm_ms": round(percentile(warm, 0.99), 2),
            "send_cpu_us_per_msg": _per(send_cpu[0], sent, 1e6),
            "send_db_cpu_us_per_msg": _per(send_cpu[1], sent, 1e6),
            "outbox_drain_cpu_us_per_row": _per(
                drain_cpu["rendered"][0], drains["rendered"][0], 1e6
            ),
            "outbox_drain_db_cpu_us_per_row": _per(
                drain_cpu["rendered"][1], drains["rendered"][0], 1e6
            ),
            "outbox_drain_offline_cpu_us_per_row": _per(
                drain_cpu["offline"][0], drains["offline"][0], 1e6
            ),
            # PostgreSQL's transactions, WAL bytes and statements per message of phase 1.
            **pg_figures,
            "db_cpu_counted": postmaster is not None,
        }


@click.command("send")
@click.option("--users", default=1000, show_default=True)
@click.option("--concurrency", default=32, show_default=True)
@click.option("--messages", default=5000, show_default=True)
@click.option(
    "--send-group-size",
    default=Settings.send_group_size,
    show_default=True,
    help="Sends written in one statement while another is in flight (1: each alone).",
)
@click.option("--backlog", default=20000, show_default=True, help="Rows for the drain phase.")
@click.option(
    "--workers",
    default=2,
    show_default=True,
    help="Outbox delivery workers (the server default).",
)
@click.option("--batch", default=200, show_default=True, help="Outbox claim batch size.")
@click.option("--database-url", envvar="TELESRV_DATABASE_URL", default=None)
@click.option("--redis-url", envvar="TELESRV_REDIS_URL", default=None)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where embedded servers live (default: a temporary directory).",
)
@click.option(
    "--pg-stats/--no-pg-stats",
    default=True,
    show_default=True,
    help="PostgreSQL's transactions, WAL bytes and statements per message of phase 1; "
    "each of the two readings first waits some 11 s, idle.",
)
@click.option(
    "--pg-stats-settle",
    type=click.FloatRange(min=0),
    default=SETTLE,
    show_default=True,
    help="Seconds each reading waits for PostgreSQL to have the counts of what came "
    "before it (less: transactions of the phase's last seconds may be missed).",
)
@click.option(
    "--enforce-slo/--no-enforce-slo",
    envvar="TELESRV_BENCH_ENFORCE_SLO",
    show_envvar=True,
    default=False,
    show_default=True,
    help="Exit with status 1 when an SLO or a correctness counter fails.",
)
def command(
    users: int,
    concurrency: int,
    messages: int,
    send_group_size: int,
    backlog: int,
    workers: int,
    batch: int,
    database_url: str | None,
    redis_url: str | None,
    data_dir: Path | None,
    pg_stats: bool,
    pg_stats_settle: float,
    enforce_slo: bool,
) -> None:
    """Closed-loop sends, getDifference and outbox drain on the real stores."""
    if users < 2:
        raise click.BadParameter("at least 2 users", param_hint="--users")
    opts = dict(
        users=users,
        concurrency=concurrency,
        messages=messages,
        backlog=backlog,
        workers=workers,
        batch=batch,
        pg_stats=pg_stats,
        pg_settle=pg_stats_settle,
    )
    with tempfile.TemporaryDirectory(prefix="telesrv-bench-") as tmp:
        settings = Settings(
            data_dir=data_dir or Path(tmp),
            database_url=database_url,
            redis_url=redis_url,
            pg_pool_min_size=min(16, concurrency),
            pg_pool_max_size=max(16, concurrency),
            send_group_size=send_group_size,
        )
        result = run_async(lambda: _run(settings, opts))
    failures = check_slo(result)
    result["slo"] = {
        "enforced": enforce_slo,
        "thresholds": slo_thresholds(),
        "passed": not failures,
        "failures": failures,
    }
    rows = [
        ("throughput", f"{result['msgs_per_s']} msg/s"),
        (
            "send p50 / p99 / max",
            f"{result['send_p50_ms']} / {result['send_p99_ms']} / {result['send_max_ms']} ms",
        ),
        (
            "getDifference p50 / p99",
            f"{result['getdifference_p50_ms']} / {result['getdifference_p99_ms']} ms",
        ),
        (
            "outbox drain: rendered / nobody online",
            f"{result['outbox_drain_rows_per_s']} / {result['outbox_drain_offline_rows_per_s']}"
            f" rows/s ({result['outbox_backlog_rows']} rows each)",
        ),
        (
            "PostgreSQL xacts / WAL bytes / statements per message",
            f"{result['pg_xacts_per_msg']} / {result['pg_wal_bytes_per_msg']} / "
            f"{result['pg_statements_per_msg']}",
        ),
        (
            "errors / duplicates / lost / pts holes / outbox failed",
            f"{result['errors']} / {result['duplicates']} / {result['lost']} / "
            f"{result['pts_holes']} / {result['outbox_failed']}",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key.ljust(width)}  {value}")
    for failure in failures:
        click.echo(f"SLO failed: {failure}", err=True)
    click.echo(json.dumps(result))
    if enforce_slo and failures:
        raise SystemExit(1)
