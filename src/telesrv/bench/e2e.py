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
import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import click

from telesrv.bench._e2e_load import Clients
from telesrv.bench._e2e_server import database_pids, databases, serve
from telesrv.bench._pg_stats import SETTLE, PgStats, unmeasured
from telesrv.bench._proc_cpu import ServerCpu, cpu_seconds, process_trees, syscalls


def percentile_ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3, 3)


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
    pg_stats: bool = True,
    pg_settle: float = SETTLE,
) -> dict[str, Any]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    with tempfile.TemporaryDirectory(prefix="telesrv-bench-e2e-") as tmp:
        work = Path(tmp)
        async with (
            databases(database_url, redis_url, work) as (db_url, r_url),
            serve(db_url, r_url, work, serve_args) as (process, host, port),
        ):
            pem = (work / "data" / "server_key.pub.pem").read_bytes()
            public_key = serialization.load_pem_public_key(pem)
            assert isinstance(public_key, rsa.RSAPublicKey)
            numbers = public_key.public_numbers()
            postmaster, redis_pid = await database_pids(db_url, r_url)
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
            pg = await PgStats.open(db_url) if pg_stats else None
            try:
                await clients.wait("ready")
                # PostgreSQL's counts: readings outside the CPU figures (each waits idle).
                pg_before = await pg.reading(pg_settle) if pg else None
                load_pids = [p.pid for p in clients.processes]
                cpu_before, load_before = cpu.reading(), cpu_seconds(load_pids)
                split_before = cpu.split()
                telesrv_pids = process_trees([process.pid])
                calls_before = syscalls(telesrv_pids)
                online = await clients.command("online")
                calls_after = syscalls(telesrv_pids)
                online_cpu = cpu.reading() - cpu_before
                split = [b - a for a, b in zip(split_before, cpu.split(), strict=True)]
                load_cpu = cpu_seconds(load_pids) - load_before
                sent = sum(o["sent"] for o in online)
                pg_figures = unmeasured("not measured (--no-pg-stats)")
                if pg and pg_before:
                    pg_after = await pg.reading(pg_settle)
                    # The idle server's own work in a wait as long, taken off.
                    idle = (pg_after, await pg.reading(pg_settle))
                    pg_figures = pg.figures(pg_before, pg_after, sent, idle)
                await clients.command("offline")
                cpu_before = cpu.reading()
                catch_up = await clients.command("catchup")
                catch_up_cpu = cpu.reading() - cpu_before
            finally:
                clients.close()
                if pg is not None:
                    await pg.close()
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
        # System calls of the telesrv processes per message sent (each message is a
        # send answered and pushes to both users' devices), read and write types.
        "syscalls_read_per_msg": _per_message(calls_after[0] - calls_before[0], sent),
        "syscalls_write_per_msg": _per_message(calls_after[1] - calls_before[1], sent),
        # PostgreSQL's transactions, WAL bytes and statements per message sent, over the
        # online phase (see bench/_pg_stats.py).
        **pg_figures,
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


def _per_message(count: int, messages: int) -> float | None:
    return round(count / messages, 2) if messages else None


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
@click.option("--pg-stats/--no-pg-stats", default=True, show_default=True,
              help="PostgreSQL's transactions, WAL bytes and statements per message; "
              "each of the three readings first waits some 11 s, idle.")  # fmt: skip
@click.option("--pg-stats-settle", type=click.FloatRange(min=0), default=SETTLE,
              show_default=True,
              help="Seconds each reading waits for PostgreSQL to have the counts of what "
              "came before it (less: transactions of the phase's last seconds may be "
              "missed).")  # fmt: skip
def command(
    pairs: int,
    messages: int,
    offline_messages: int,
    client_processes: int,
    drain_timeout: float,
    serve_args: tuple[str, ...],
    database_url: str | None,
    redis_url: str | None,
    pg_stats: bool,
    pg_stats_settle: float,
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
            pg_stats=pg_stats,
            pg_settle=pg_stats_settle,
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
        (
            "syscalls per msg (read / write)",
            f"{r['syscalls_read_per_msg']} / {r['syscalls_write_per_msg']}",
        ),
        (
            "pg xacts/WAL/stmts per msg",
            f"{r['pg_xacts_per_msg']} / {r['pg_wal_bytes_per_msg']} / {r['pg_statements_per_msg']}",
        ),
        ("lost / duplicates", f"{r['lost']} / {r['duplicates']}"),
        ("catch-up msg/s", str(r["catchup_msgs_per_s"])),
        ("catch-up lost / duplicates", f"{r['catchup_lost']} / {r['catchup_duplicates']}"),
    ]
    for name, value in rows:
        click.echo(f"{name:<28}{value:>18}")
    click.echo(json.dumps(r))
