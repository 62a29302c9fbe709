"""PostgreSQL's own counts around a bench's measured phase, per message: transactions,
WAL bytes and statements.

Read by the bench process, not the server, from the database the server writes:

- transactions: xact_commit + xact_rollback of that database in pg_stat_database;
- WAL bytes: pg_current_wal_lsn() before and after (pg_wal_lsn_diff), the whole
  server's WAL (a bench's own server holds nothing else);
- statements: the calls in pg_stat_statements of that database, the statements the
  clients sent (the extension tracks top-level ones), when the extension is loaded
  (shared_preload_libraries); otherwise None, and the reason.

Backends put their transaction counts into the shared statistics when they go idle, at
most once a second; one that goes idle within the second of its last report keeps them
up to ten seconds more (PostgreSQL's idle interval). So a reading first waits SETTLE
seconds, idle: the counts of what came before it are all in, and no later phase has
begun. Readings are placed outside the phases' CPU measurements for that reason. A
server keeps working a little while idle (its timers): where one runs, what it does in
one more such wait after the span is taken off the span, which holds one. The
reader's own statement is a transaction of its own (a fresh statistics snapshot each
time); it asks for its counts to be flushed at once and is left out of the figures.
pg_stat_statements counts each statement as it ends and the WAL position is current:
neither needs the wait.

The statements themselves are in store/pg_stats.py. This module needs nothing else of
telesrv but the embedded PostgreSQL class, so that scripts/pg_bench_stats.py can load
both by their paths and take the same readings for a checkout whose bench has none (the
baseline a change is measured against).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg

from telesrv.store import pg_stats

SETTLE = 11.0  # seconds: PostgreSQL's idle flush interval (10 s), and a margin
FIELDS = ("pg_xacts_per_msg", "pg_wal_bytes_per_msg", "pg_statements_per_msg")

# What one reading holds: transactions, WAL bytes and statements (None: not read).
PgReading = pg_stats.PgCounts


class PgStats:
    """A connection to the measured database that takes readings."""

    def __init__(self, conn: asyncpg.Connection, statements_reason: str | None, flush: bool):
        self._conn = conn
        self.statements_reason = statements_reason
        self._statements = statements_reason is None
        # PostgreSQL 15 and later: the reader's own transaction reported at once.
        self._flush = flush

    @classmethod
    async def open(cls, database_url: str) -> PgStats:
        conn = await asyncpg.connect(database_url)
        reason: str | None = None
        try:
            await pg_stats.enable_statements(conn)
        except asyncpg.PostgresError as e:
            reason = f"pg_stat_statements unavailable: {e}"
        flush = await pg_stats.server_version(conn) >= 150000
        if flush:  # these statements' own counts reported now, before any reading
            await pg_stats.flush_now(conn)
        return cls(conn, reason, flush=flush)

    async def reading(self, settle: float = SETTLE) -> PgReading:
        await asyncio.sleep(settle)
        return await pg_stats.counts(self._conn, statements=self._statements, flush=self._flush)

    def figures(
        self,
        before: PgReading,
        after: PgReading,
        messages: int,
        idle: tuple[PgReading, PgReading] | None = None,
    ) -> dict[str, Any]:
        """The per-message fields of a bench's JSON for the span between two readings.
        ``idle``: two readings around one more wait, after the span, when what is
        measured goes on working while idle (a server's timers): what it did in that
        wait is taken off the span, which holds one such wait (the later reading's)."""
        if not messages:
            return unmeasured("no message was sent")
        xacts, wal, statements = _delta(before, after)
        if idle is not None:
            idle_xacts, idle_wal, idle_statements = _delta(*idle)
            xacts, wal = xacts - idle_xacts, wal - idle_wal
            if statements is not None and idle_statements is not None:
                statements -= idle_statements
        return {
            "pg_xacts_per_msg": round(xacts / messages, 3),
            "pg_wal_bytes_per_msg": round(wal / messages, 1),
            "pg_statements_per_msg": None
            if statements is None
            else round(statements / messages, 3),
            "pg_statements_reason": self.statements_reason,
        }

    async def close(self) -> None:
        await self._conn.close()


def _delta(before: PgReading, after: PgReading) -> tuple[int, int, int | None]:
    """Transactions, WAL bytes and statements from one reading to a later one."""
    statements = (
        None
        if after.statements is None or before.statements is None
        else after.statements - before.statements
    )
    # The earlier reading's own transaction is inside the span.
    return after.xacts - before.xacts - 1, after.wal_bytes - before.wal_bytes, statements


def unmeasured(reason: str) -> dict[str, Any]:
    """The fields when there are no readings."""
    return {**dict.fromkeys(FIELDS), "pg_statements_reason": reason}


async def embedded_postgres_with_statements(directory: Path) -> tuple[Any, str]:
    """An embedded PostgreSQL under ``directory`` with pg_stat_statements loaded (it
    must be preloaded, so the server is started, configured and started again); returns
    the server (stop() it) and its URL."""
    from telesrv.store.embedded import EmbeddedPostgres

    postgres = EmbeddedPostgres(directory)
    url = await asyncio.to_thread(postgres.start)
    try:
        conn = await asyncpg.connect(url)
        try:
            await pg_stats.preload_statements(conn)
        finally:
            await conn.close()
        await asyncio.to_thread(postgres.stop)
        url = await asyncio.to_thread(postgres.start)
    except BaseException:
        await asyncio.to_thread(postgres.stop)
        raise
    return postgres, url
