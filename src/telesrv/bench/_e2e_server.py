"""The server under test for ``telesrv bench e2e``: its databases and a ``telesrv serve``
subprocess, started and stopped around the run."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import click

from telesrv.bench._proc_cpu import parent_pid
from telesrv.store import pg_stats
from telesrv.store.redis_client import node_url

LOGIN_CODE = "24680"
READY_PREFIX = "telesrv listening on "
START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
PASSED = {"TELESRV_ACCEL", "TELESRV_ACCEL_DIR"}


@contextlib.asynccontextmanager
async def databases(
    database_url: str | None, redis_url: str | None, work: Path
) -> AsyncIterator[tuple[str, str]]:
    """The URLs to serve from: the given ones, or embedded servers under ``work`` (its
    PostgreSQL with pg_stat_statements loaded, for the statements per message)."""
    from telesrv.app import EMBEDDED_DATABASE
    from telesrv.bench._pg_stats import embedded_postgres_with_statements
    from telesrv.store import db as dbmod
    from telesrv.store.embedded import EmbeddedRedis

    async with contextlib.AsyncExitStack() as stack:
        if database_url is None:
            postgres, server_url = await embedded_postgres_with_statements(work / "pg")
            stack.push_async_callback(asyncio.to_thread, postgres.stop)
            database_url = await dbmod.create_database(server_url, EMBEDDED_DATABASE, exist_ok=True)
        if redis_url is None:
            embedded_redis = EmbeddedRedis(work / "redis")
            redis_url = await asyncio.to_thread(embedded_redis.start)
            stack.push_async_callback(asyncio.to_thread, embedded_redis.stop)
        yield database_url, redis_url


async def database_pids(database_url: str, redis_url: str) -> tuple[int | None, int | None]:
    """The PostgreSQL postmaster and the redis-server of the URLs, when on this machine."""
    import asyncpg
    import redis.asyncio as aioredis

    conn = await asyncpg.connect(database_url)
    try:
        backend = await pg_stats.backend_pid(conn)
        postmaster = parent_pid(backend)
    finally:
        await conn.close()
    # A cluster's seed node stands for it (its process is one of the cluster's).
    client = aioredis.Redis.from_url(node_url(redis_url))
    try:
        info = await client.info("server")
        redis_pid = int(info["process_id"])
    finally:
        await client.aclose()
    if parent_pid(redis_pid) is None:
        return postmaster, None
    return postmaster, redis_pid


@contextlib.asynccontextmanager
async def serve(
    database_url: str, redis_url: str, work: Path, extra: tuple[str, ...]
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str, int]]:
    # The server takes its settings from the arguments alone; only the choice of the
    # TL/MTProto path (telesrv/accel.py) passes, so runs can compare the two.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TELESRV_") or k in PASSED}
    log_path = work / "serve.log"
    with open(log_path, "wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "telesrv", "--log-level", "warning", "serve",
            "--listen", "127.0.0.1:0",
            "--ws-listen", "off",
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
