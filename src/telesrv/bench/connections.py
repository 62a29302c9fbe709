"""``telesrv bench connections``: memory per idle signed-in connection, push fan-out.

For each connection count N, a fresh server process (a real gateway over PostgreSQL
and Redis, embedded unless URLs are given) is connected to by a load process with N
signed-in idle connections, ``--sessions-per-key`` of them on each auth key (one key
exchange and one sign-in per key, one account per key). The server process reads its
resident memory before and after: the difference divided by N is what one idle
connection costs (its session included). Then it pushes one update to one account
(all its sessions) and one to every account at once, and the load process times
each arrival.

A count one process cannot hold (its descriptor limit, ``ulimit -n``, raised where
allowed) is shared by as few server processes as can, each with its own load process,
up to ``--processes``: they connect at the same time and push to all their users
together, and the figures are over all of them (memory summed, arrivals pooled; the
one-user push is the first process's). A count past that, or a failed run, stops
there, and the JSON line says why.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import tempfile
from pathlib import Path
from typing import Any

import click

from telesrv import logs
from telesrv.bench._conns_load import (
    FD_SLACK,
    measure_in_processes,
    percentile_ms,
    raise_fd_limit,
)
from telesrv.gateway.sessions import MAX_SESSIONS_PER_KEY

DEFAULT_COUNTS = (1000, 10_000, 50_000)
MAX_COUNT = 200_000
# Server processes one count may be spread over (each with a load process beside it).
DEFAULT_PROCESSES = 4
MAX_PROCESSES = 16


def _parse_counts(value: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter("comma-separated connection counts, e.g. 1000,10000") from None
    if not counts or any(c < 1 or c > MAX_COUNT for c in counts):
        raise click.BadParameter(f"connection counts must be 1..{MAX_COUNT}")
    return counts


def _fd_room() -> int:
    """Descriptors one process may open once it raised its limit as far as allowed."""
    return raise_fd_limit(max(DEFAULT_COUNTS) * 2 + FD_SLACK)


def split_count(count: int, per_process: int) -> list[int]:
    """``count`` connections over as few processes as hold them, as evenly as can be."""
    processes = -(-count // per_process)
    share, rest = divmod(count, processes)
    return [share + (1 if index < rest else 0) for index in range(processes)]


def level_figures(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One count's figures from what its processes saw (the first one pushed to one
    user): memory summed over them, the pushes to everyone pooled."""
    connections = sum(p["connections"] for p in parts)
    per = max(1, connections)
    everyone = [t for p in parts for t in p["push_all_arrivals_s"]]
    first = parts[0]

    def total(key: str) -> int:
        return int(sum(p[key] for p in parts))

    return {
        "processes": len(parts),
        "connections": connections,
        "sessions": total("sessions"),
        "users": total("users"),
        "connect_seconds": round(max(p["connect_seconds"] for p in parts), 1),
        "rss_before_mb": round(total("rss_before") / 2**20, 1),
        "rss_after_mb": round(total("rss_after") / 2**20, 1),
        "bytes_per_connection": round((total("rss_after") - total("rss_before")) / per),
        "bytes_per_connection_compacted": round(
            (total("rss_compacted") - total("rss_before")) / per
        ),
        "held_bytes": total("held_bytes"),
        "seen_ids_per_session": round(total("seen_ids") / per, 1),
        "seen_ids_per_session_compacted": round(total("seen_ids_compacted") / per, 1),
        "push_one_user_sessions": first["push_one_user_sessions"],
        "push_one_user_arrived": first["push_one_user_arrived"],
        "push_one_user_max_ms": first["push_one_user_max_ms"],
        "push_all_sessions": total("push_all_sessions"),
        "push_all_arrived": len(everyone),
        "push_all_queue_ms": round(max(p["push_all_queue_s"] for p in parts) * 1e3, 2),
        "push_all_written_ms": round(max(p["push_all_written_s"] for p in parts) * 1e3, 2),
        "push_all_p50_ms": percentile_ms(everyone, 0.5),
        "push_all_p99_ms": percentile_ms(everyone, 0.99),
        "push_all_max_ms": percentile_ms(everyone, 1.0),
    }


async def _run(
    counts: tuple[int, ...],
    sessions_per_key: int,
    used_ids: int,
    database_url: str | None,
    redis_url: str | None,
    processes: int,
) -> dict[str, Any]:
    from telesrv.bench._e2e_server import databases

    results: dict[str, Any] = {
        "bench": "connections",
        "sessions_per_key": sessions_per_key,
        "used_ids": used_ids,
        "cpus": os.cpu_count(),
        "levels": {},
    }
    room = _fd_room()
    results["fd_limit"] = room
    results["max_processes"] = processes
    per_process = room - FD_SLACK
    with tempfile.TemporaryDirectory(prefix="telesrv-bench-") as tmp:
        work = Path(tmp)
        async with databases(database_url, redis_url, work) as (db_url, r_url):
            for index, count in enumerate(counts):
                key = str(count)
                shares = split_count(count, per_process) if per_process > 0 else []
                if not shares or len(shares) > processes:
                    results["levels"][key] = {
                        "stopped": f"descriptor limit {room} (ulimit -n) per process: "
                        f"{count} connections and their margin need more than "
                        f"{processes} processes (--processes)"
                    }
                    continue
                run = random.randrange(10**3)
                shards = [
                    {
                        "count": share,
                        "sessions_per_key": sessions_per_key,
                        "used_ids": used_ids,
                        "database_url": db_url,
                        "redis_url": r_url,
                        "data_dir": str(work / f"data{index}-{shard}"),
                        # 15 digits with the key's 6, none shared between the
                        # processes of one count or the counts of one run.
                        "phone_prefix": f"99{run:03d}{index:02d}{shard:02d}",
                    }
                    for shard, share in enumerate(shares)
                ]
                try:
                    parts = await asyncio.to_thread(measure_in_processes, shards)
                    results["levels"][key] = level_figures(parts)
                except RuntimeError as e:
                    last = str(e).strip().splitlines()[-1:]
                    results["levels"][key] = {"stopped": last[0] if last else "failed"}
    return results


@click.command("connections")
@click.option(
    "--counts",
    default=",".join(map(str, DEFAULT_COUNTS)),
    show_default=True,
    help="Comma-separated numbers of idle signed-in connections to measure.",
)
@click.option(
    "--sessions-per-key",
    type=click.IntRange(1, MAX_SESSIONS_PER_KEY),
    default=32,
    show_default=True,
    help="Connections (sessions) sharing one auth key and account.",
)
@click.option(
    "--used-ids",
    type=click.IntRange(0, 100_000),
    default=0,
    show_default=True,
    help="Messages each connection sends before it idles (their ids are remembered).",
)
@click.option(
    "--processes",
    type=click.IntRange(1, MAX_PROCESSES),
    default=DEFAULT_PROCESSES,
    show_default=True,
    help="Server processes (each with a load process) a count past one process's "
    "descriptor limit may be spread over.",
)
@click.option("--database-url", envvar="TELESRV_DATABASE_URL", default=None, metavar="URL",
              help="PostgreSQL to use instead of an embedded one.")  # fmt: skip
@click.option("--redis-url", envvar="TELESRV_REDIS_URL", default=None, metavar="URL",
              help="Redis to use instead of an embedded one.")  # fmt: skip
def command(
    counts: str,
    sessions_per_key: int,
    used_ids: int,
    processes: int,
    database_url: str | None,
    redis_url: str | None,
) -> None:
    """Memory per idle signed-in connection and push fan-out latency, by connection count."""
    levels = _parse_counts(counts)
    # Thousands of connections would log a line each: quiet for the run.
    with logs.quieted("telesrv"):
        results = asyncio.run(
            _run(levels, sessions_per_key, used_ids, database_url, redis_url, processes)
        )
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    click.echo(f"descriptor limit {soft}")
    click.echo(
        f"{'connections':>11}{'procs':>6}{'B/conn':>9}{'1 user ms':>10}{'all p50':>9}"
        f"{'all p99':>9}{'all max':>9}"
    )
    for level in levels:
        row = results["levels"][str(level)]
        if "stopped" in row:
            click.echo(f"{level:>11}  stopped: {row['stopped']}")
            continue
        click.echo(
            f"{level:>11}{row['processes']:>6}{row['bytes_per_connection']:>9}"
            f"{row['push_one_user_max_ms']:>10.1f}"
            f"{row['push_all_p50_ms']:>9.1f}{row['push_all_p99_ms']:>9.1f}"
            f"{row['push_all_max_ms']:>9.1f}"
        )
    click.echo(json.dumps(results))
