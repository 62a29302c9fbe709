"""Metrics of the storage layer: the PostgreSQL pool's use, Redis errors, failed pts
fills."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
from prometheus_client import Counter, Gauge
from redis.asyncio.client import Pipeline, Redis
from redis.exceptions import RedisError

DB_POOL = Gauge(
    "telesrv_db_pool_connections",
    "PostgreSQL pool connections: 'in_use', 'idle' and the configured 'max'.",
    ["state"],
    multiprocess_mode="livesum",
)
REDIS_ERRORS = Counter(
    "telesrv_redis_errors_total",
    "Redis commands and pipelines that raised (connection lost, timeout, script error).",
)
PTS_FILL_FAILURES = Counter(
    "telesrv_pts_fill_failures_total",
    "Allocated pts that could not be filled with a noop after a failed write: each "
    "leaves a hole until the stale-hole repair fills it. Alert on any increase.",
)


# Gauges read at scrape time, by identity: what a further worker process of
# `serve --workers N` copies into its shared value files (see publish_sampled).
_sampled: dict[int, tuple[Gauge, Callable[[], float]]] = {}


def sample_gauge(gauge: Gauge, read: Callable[[], float]) -> None:
    """``gauge`` shows ``read()`` when scraped (the last ``read`` given wins)."""
    gauge.set_function(read)
    _sampled[id(gauge)] = (gauge, read)


def publish_sampled() -> None:
    """Store the current value of every sampled gauge. A process whose metrics another
    process serves (Prometheus multiprocess mode) is never scraped itself, so it calls
    this from time to time; ``set`` writes the shared value file, the function set by
    ``sample_gauge`` only answers a scrape of this process."""
    for gauge, read in list(_sampled.values()):
        gauge.set(read())


def watch_pool(pool: asyncpg.Pool) -> None:
    """Read the pool's figures at scrape time (the last pool watched wins)."""
    sample_gauge(DB_POOL.labels("in_use"), lambda: pool.get_size() - pool.get_idle_size())
    sample_gauge(DB_POOL.labels("idle"), lambda: pool.get_idle_size())
    sample_gauge(DB_POOL.labels("max"), lambda: pool.get_max_size())


class _MeteredPipeline(Pipeline):
    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        try:
            return await super().execute(raise_on_error)
        except RedisError:
            REDIS_ERRORS.inc()
            raise


class MeteredRedis(Redis):
    """A Redis client counting the errors of every command and pipeline it runs."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except RedisError:
            REDIS_ERRORS.inc()
            raise

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        return _MeteredPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )
