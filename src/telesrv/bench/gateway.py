"""``telesrv bench gateway``: key exchanges and encrypted pings per second.

Starts a real gateway on 127.0.0.1 (embedded PostgreSQL/Redis in a temporary data
directory unless URLs are given) and drives it with telesrv's own small MTProto
client (:mod:`telesrv.bench._client`), by default in a second process so the
client's crypto does not compete with the server for the same interpreter.

- handshakes/s: complete auth key creations (req_pq_multi, req_DH_params,
  set_client_DH_params, key stored in PostgreSQL), each on a new connection, with
  N connections at a time. The gateway's handshake rate limit is lifted for this.
- pings/s: ping -> pong round trips on established keys, N connections each
  sending its next ping when the previous pong arrived (closed loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import click

from telesrv import logs

DEFAULT_CONCURRENCY = (1, 10, 100)
# Clients per loopback source address: a quarter of the server's default per-address
# connection limit, so that connections the client closed and the server has not yet
# seen closed never take an address over it.
CLIENTS_PER_ADDRESS = 64


# -- load client (runs in the client process) -------------------------------------------


async def _handshake_phase(
    host: str, port: int, n: int, e: int, concurrency: int, seconds: float, max_count: int
) -> dict[str, float]:
    from telesrv.bench._client import PublicKey, RawConnection, create_auth_key, loopback_source

    key = PublicKey(n, e)
    done = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()

    async def worker(index: int) -> None:
        nonlocal done
        source = loopback_source(index, CLIENTS_PER_ADDRESS)
        while time.perf_counter() < deadline and done < max_count:
            conn = await RawConnection.open(host, port, source)
            try:
                await create_auth_key(conn, key)
            finally:
                await conn.close()
            done += 1

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {"count": done, "seconds": elapsed}


async def _ping_phase(
    host: str, port: int, n: int, e: int, concurrency: int, seconds: float, max_count: int
) -> dict[str, Any]:
    from telesrv.bench._client import PublicKey, connect_new_key, loopback_source

    key = PublicKey(n, e)
    clients = []
    try:
        for i in range(concurrency):
            source = loopback_source(i, CLIENTS_PER_ADDRESS)
            client, _ = await connect_new_key(host, port, key, source=source)
            clients.append(client)
            await client.ping(0)  # learns the server salt; not timed
        latencies: list[float] = []
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()

        async def worker(client: Any) -> None:
            ping_id = 1
            while time.perf_counter() < deadline and len(latencies) < max_count:
                t0 = time.perf_counter()
                await client.ping(ping_id)
                latencies.append(time.perf_counter() - t0)
                ping_id += 1

        await asyncio.gather(*(worker(c) for c in clients))
        elapsed = time.perf_counter() - started
    finally:
        for client in clients:
            await client.conn.close()
    return {"count": len(latencies), "seconds": elapsed, "latencies": latencies}


def run_client_phase(kind: str, *args: Any) -> dict[str, Any]:
    """Entry point of the client process: one measurement on a fresh event loop."""
    phase = _handshake_phase if kind == "handshakes" else _ping_phase
    return asyncio.run(phase(*args))


# -- server side --------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _running_gateway(
    database_url: str | None, redis_url: str | None, data_dir: Path
) -> AsyncIterator[tuple[Any, str, int]]:
    from telesrv.app import open_resources
    from telesrv.config import Settings
    from telesrv.gateway.budgets import TokenBucket
    from telesrv.wiring import build_server

    settings = Settings(
        listen_host="127.0.0.1",
        listen_port=0,
        data_dir=data_dir,
        database_url=database_url,
        redis_url=redis_url,
        partition_count=4,
        # Clients connect from several loopback addresses (CLIENTS_PER_ADDRESS each),
        # within the default per-address connection limit; key exchanges are measured
        # at capacity, not at the per-address flood limit.
        handshakes_per_ip_per_second=1e9,
        handshake_burst_per_ip=10**9,
    )
    async with open_resources(settings) as resources:
        server = build_server(settings, resources)
        # Measure capacity, not the flood limit (200/s by default).
        server.gateway.handshake_budget = TokenBucket(1e9, 10**9)
        host, port = await server.start("127.0.0.1", 0)
        try:
            yield resources, host, port
        finally:
            await server.stop()


def _percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


async def run(
    *,
    concurrency: tuple[int, ...],
    seconds: float,
    max_count: int,
    database_url: str | None,
    redis_url: str | None,
    separate_process: bool,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="telesrv-bench-") as tmp:
        async with _running_gateway(database_url, redis_url, Path(tmp)) as (resources, host, port):
            numbers = resources.server_key.private_key.public_key().public_numbers()
            loop = asyncio.get_running_loop()
            pool: concurrent.futures.Executor | None = None
            if separate_process:
                pool = concurrent.futures.ProcessPoolExecutor(
                    1, mp_context=multiprocessing.get_context("spawn")
                )

            async def phase(kind: str, level: int) -> dict[str, Any]:
                args = (host, port, numbers.n, numbers.e, level, seconds, max_count)
                if pool is None:
                    return await (_handshake_phase if kind == "handshakes" else _ping_phase)(*args)
                return await loop.run_in_executor(pool, run_client_phase, kind, *args)

            results: dict[str, Any] = {
                "bench": "gateway",
                "handshakes_per_s": {},
                "ping_rtt_per_s": {},
                "ping_p50_ms": {},
                "ping_p99_ms": {},
                "seconds_per_run": seconds,
                "client": "process" if separate_process else "in-process",
                "cpus": os.cpu_count(),
            }
            try:
                for level in concurrency:
                    hs = await phase("handshakes", level)
                    results["handshakes_per_s"][str(level)] = round(hs["count"] / hs["seconds"], 1)
                    pings = await phase("pings", level)
                    lat = sorted(pings["latencies"])
                    results["ping_rtt_per_s"][str(level)] = round(
                        pings["count"] / pings["seconds"], 1
                    )
                    results["ping_p50_ms"][str(level)] = round(_percentile(lat, 0.50) * 1e3, 3)
                    results["ping_p99_ms"][str(level)] = round(_percentile(lat, 0.99) * 1e3, 3)
            finally:
                if pool is not None:
                    pool.shutdown(wait=True, cancel_futures=True)
            return results


def _parse_levels(value: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter("comma-separated connection counts, e.g. 1,10,100") from None
    if not levels or any(level < 1 or level > 1000 for level in levels):
        raise click.BadParameter("connection counts must be 1..1000")
    return levels


@click.command("gateway")
@click.option(
    "--concurrency",
    default=",".join(map(str, DEFAULT_CONCURRENCY)),
    show_default=True,
    help="Comma-separated numbers of concurrent connections to measure with.",
)
@click.option(
    "--seconds",
    type=click.FloatRange(min=0.05),
    default=3.0,
    show_default=True,
    help="Length of each measurement.",
)
@click.option(
    "--max-count",
    type=click.IntRange(min=1),
    default=1_000_000,
    show_default=True,
    help="Stop a measurement early after this many handshakes or pings.",
)
@click.option("--database-url", envvar="TELESRV_DATABASE_URL", default=None, metavar="URL",
              help="PostgreSQL to use instead of an embedded one.")  # fmt: skip
@click.option("--redis-url", envvar="TELESRV_REDIS_URL", default=None, metavar="URL",
              help="Redis to use instead of an embedded one.")  # fmt: skip
@click.option(
    "--client-process/--in-process",
    default=True,
    show_default=True,
    help="Run the load client in a second process (default) or in the server's.",
)
def command(
    concurrency: str,
    seconds: float,
    max_count: int,
    database_url: str | None,
    redis_url: str | None,
    client_process: bool,
) -> None:
    """Gateway throughput: auth key creations/s and encrypted ping round trips/s."""
    levels = _parse_levels(concurrency)
    # A line per connection would drown the figures: quiet for the run.
    with logs.quieted("telesrv.gateway"):
        results = asyncio.run(
            run(
                concurrency=levels,
                seconds=seconds,
                max_count=max_count,
                database_url=database_url,
                redis_url=redis_url,
                separate_process=client_process,
            )
        )
    click.echo(f"{'connections':>11}{'handshakes/s':>14}{'pings/s':>10}{'p50 ms':>9}{'p99 ms':>9}")
    for level in levels:
        k = str(level)
        click.echo(
            f"{level:>11}{results['handshakes_per_s'][k]:>14.1f}"
            f"{results['ping_rtt_per_s'][k]:>10.1f}"
            f"{results['ping_p50_ms'][k]:>9.2f}{results['ping_p99_ms'][k]:>9.2f}"
        )
    click.echo(json.dumps(results))
