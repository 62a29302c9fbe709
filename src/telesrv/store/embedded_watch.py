"""Watching the embedded PostgreSQL and Redis while the process serves.

Redis holds only what can be rebuilt (counters from PostgreSQL on their first miss,
exactly as after any start; rate limits and send claims start over; the bus
subscription is made again), so a Redis that died is started again, by its owner
or, when the owning process is gone, by a process that was attached to it.

PostgreSQL holds everything. One that died is not started again from here: other
processes may still hold its backends and shared memory, and a crash is recovered
from the write-ahead log when the server starts; the process stops with one clear
line instead, and whatever supervises it (systemd, a container runtime) starts it
again. Meanwhile ``problems`` names what is down, for /healthz.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from telesrv.store.embedded import EmbeddedPostgres, EmbeddedRedis, EmbeddedServerError

log = logging.getLogger(__name__)

# Seconds between two looks; a look is a signal 0 and, for Redis, one PING.
WATCH_INTERVAL = 1.0
# Missed PINGs in a row before a Redis that still runs counts as down (one slow answer
# under load is no outage).
REDIS_MISSES = 2


class EmbeddedWatch:
    """Looks at the embedded servers this process started or attached to, every
    WATCH_INTERVAL; logs one line when one goes down and one when it is back."""

    def __init__(
        self,
        postgres: EmbeddedPostgres | None,
        redis: EmbeddedRedis | None,
        *,
        interval: float = WATCH_INTERVAL,
    ) -> None:
        self._postgres = postgres
        self._redis = redis
        self.interval = interval
        # What cannot serve now: name -> why (empty when all is well).
        self.problems: dict[str, str] = {}
        # Called once with the reason when the process cannot go on (PostgreSQL died).
        self.on_fatal: Callable[[str], None] | None = None
        self._redis_misses = 0

    def health(self) -> dict[str, str]:
        return dict(self.problems)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            look = asyncio.ensure_future(asyncio.to_thread(self.look))
            try:
                await asyncio.shield(look)
            except asyncio.CancelledError:
                # A look in progress (perhaps starting Redis again) ends before the
                # caller goes on to stop the servers.
                await look
                raise

    def look(self) -> None:
        """One look at each server (blocking: signals, a PING, maybe a start)."""
        self._look_at_postgres()
        self._look_at_redis()

    def _look_at_postgres(self) -> None:
        postgres = self._postgres
        if postgres is None or "postgres" in self.problems or postgres.alive():
            return
        reason = (
            f"the embedded PostgreSQL in {postgres.directory} has stopped; telesrv stops "
            "too (start it again: PostgreSQL recovers from its write-ahead log at start)"
        )
        self.problems["postgres"] = "embedded PostgreSQL has stopped"
        log.error("%s", reason)
        if self.on_fatal is not None:
            self.on_fatal(reason)

    def _look_at_redis(self) -> None:
        redis = self._redis
        if redis is None:
            return
        if redis.alive():
            self._redis_misses = 0
            if self.problems.pop("redis", None) is not None:
                log.info("embedded Redis is back at %s", redis.url)
            return
        self._redis_misses += 1
        exited = redis.exit_code()
        if exited is None and self._redis_misses < REDIS_MISSES:
            return  # perhaps only slow: look again before calling it down
        if "redis" not in self.problems:
            why = "it does not answer" if exited is None else f"it exited with code {exited}"
            log.warning("embedded Redis is down (%s)", why)
            self.problems["redis"] = f"embedded Redis is down ({why})"
        try:
            redis.revive()
        except EmbeddedServerError as e:
            log.debug("embedded Redis not started again: %s", e)  # said once above
            return
        log.info("embedded Redis is back at %s", redis.url)
        self.problems.pop("redis", None)
        self._redis_misses = 0
