"""Metrics of the storage layer: the PostgreSQL pool's use, Redis errors, failed pts
fills."""

from __future__ import annotations

from typing import Any

import asyncpg
from prometheus_client import Counter, Gauge
from redis.asyncio.client import Pipeline, Redis
from redis.exceptions import RedisError

DB_POOL = Gauge(
    "telesrv_db_pool_connections",
    "PostgreSQL pool connections: 'in_use', 'idle' and the configured 'max'.",
    ["state"],
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


def watch_pool(pool: asyncpg.Pool) -> None:
    """Read the pool's figures at scrape time (the last pool watched wins)."""
    DB_POOL.labels("in_use").set_function(lambda: pool.get_size() - pool.get_idle_size())
    DB_POOL.labels("idle").set_function(lambda: pool.get_idle_size())
    DB_POOL.labels("max").set_function(lambda: pool.get_max_size())


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
