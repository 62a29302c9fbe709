"""``telesrv bench connections``: memory per idle signed-in connection, push fan-out.

For each connection count N, a fresh server process (a real gateway over PostgreSQL
and Redis, embedded unless URLs are given) is connected to by a load process with N
signed-in idle connections, ``--sessions-per-key`` of them on each auth key (one key
exchange and one sign-in per key, one account per key). The server process reads its
resident memory before and after: the difference divided by N is what one idle
connection costs (its session included). Then it pushes one update to one account
(all its sessions) and one to every account at once, and the load process times
each arrival.

A count the process cannot reach stops there, and the JSON line says why: the
descriptor limit (``ulimit -n``; raised where allowed), or a failure of the run.
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
from telesrv.bench._conns_load import FD_SLACK, measure_in_process, raise_fd_limit
from telesrv.gateway.sessions import MAX_SESSIONS_PER_KEY

DEFAULT_COUNTS = (1000, 10_000, 50_000)
MAX_COUNT = 200_000


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


async def _run(
    counts: tuple[int, ...],
    sessions_per_key: int,
    used_ids: int,
    database_url: str | None,
    redis_url: str | None,
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
    with tempfile.TemporaryDirectory(prefix="telesrv-bench-") as tmp:
        work = Path(tmp)
        async with databases(database_url, redis_url, work) as (db_url, r_url):
            for index, count in enumerate(counts):
                key = str(count)
                if count + FD_SLACK > room:
                    results["levels"][key] = {
                        "stopped": f"descriptor limit {room} (ulimit -n) below {count} "
                        "connections and their margin"
                    }
                    continue
                options = {
                    "count": count,
                    "sessions_per_key": sessions_per_key,
                    "used_ids": used_ids,
                    "database_url": db_url,
                    "redis_url": r_url,
                    "data_dir": str(work / f"data{index}"),
                    "phone_prefix": f"99{random.randrange(10**3):03d}{index:02d}",
                }
                try:
                    results["levels"][key] = await asyncio.to_thread(measure_in_process, options)
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
@click.option("--database-url", envvar="TELESRV_DATABASE_URL", default=None, metavar="URL",
              help="PostgreSQL to use instead of an embedded one.")  # fmt: skip
@click.option("--redis-url", envvar="TELESRV_REDIS_URL", default=None, metavar="URL",
              help="Redis to use instead of an embedded one.")  # fmt: skip
def command(
    counts: str,
    sessions_per_key: int,
    used_ids: int,
    database_url: str | None,
    redis_url: str | None,
) -> None:
    """Memory per idle signed-in connection and push fan-out latency, by connection count."""
    levels = _parse_counts(counts)
    # Thousands of connections would log a line each: quiet for the run.
    with logs.quieted("telesrv"):
        results = asyncio.run(_run(levels, sessions_per_key, used_ids, database_url, redis_url))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    click.echo(f"descriptor limit {soft}")
    click.echo(
        f"{'connections':>11}{'B/conn':>9}{'1 user ms':>10}{'all p50':>9}{'all p99':>9}"
        f"{'all max':>9}"
    )
    for level in levels:
        row = results["levels"][str(level)]
        if "stopped" in row:
            click.echo(f"{level:>11}  stopped: {row['stopped']}")
            continue
        click.echo(
            f"{level:>11}{row['bytes_per_connection']:>9}{row['push_one_user_max_ms']:>10.1f}"
            f"{row['push_all_p50_ms']:>9.1f}{row['push_all_p99_ms']:>9.1f}"
            f"{row['push_all_max_ms']:>9.1f}"
        )
    click.echo(json.dumps(results))
