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

This module needs nothing but asyncpg and the embedded PostgreSQL class, so that
scripts/pg_bench_stats.py can load it by its path and take the same readings for a
checkout whose bench has none (the baseline a change is measured against).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

SETTLE = 11.0  # seconds: PostgreSQL's idle flush interval (10 s), and a margin
# A column alias of the reading's own statement, by which pg_stat_statements' entry of
# it is told apart (the text it keeps has its constants replaced, not its aliases).
MARK = "telesrv_bench_pg_stats"
FIELDS = ("pg_xacts_per_msg", "pg_wal_bytes_per_msg", "pg_statements_per_msg")

_READING = f"""
SELECT (SELECT xact_commit + xact_rollback FROM pg_stat_database
         WHERE datname = current_database()) AS xacts,
       pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS wal,
       {{statements}} AS statements,
       {{flush}} AS {MARK}
"""
_STATEMENTS = f"""(SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
                   WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                     AND query NOT LIKE '%{MARK}%')"""


@dataclass(frozen=True)
class PgReading:
    xacts: int
    wal_bytes: int
    statements: int | None


class PgStats:
    """A connection to the measured database that takes readings."""

    def __init__(self, conn: asyncpg.Connection, statements_reason: str | None, flush: bool):
        self._conn = conn
        self.statements_reason = statements_reason
        statements = "NULL::bigint" if statements_reason else _STATEMENTS
        # PostgreSQL 15 and later: the reader's own transaction reported at once.
        self._query = _READING.format(
            statements=statements, flush="pg_stat_force_next_flush()" if flush else "NULL"
        )

    @classmethod
    async def open(cls, database_url: str) -> PgStats:
        conn = await asyncpg.connect(database_url)
        reason: str | None = None
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            await conn.fetchval("SELECT count(*) FROM pg_stat_statements")
        except asyncpg.PostgresError as e:
            reason = f"pg_stat_statements unavailable: {e}"
        version = int(await conn.fetchval("SHOW server_version_num"))
        flush = version >= 150000
        if flush:  # these statements' own counts reported now, before any reading
            await conn.execute("SELECT pg_stat_force_next_flush()")
        return cls(conn, reason, flush=flush)

    async def reading(self, settle: float = SETTLE) -> PgReading:
        await asyncio.sleep(settle)
        row = await self._conn.fetchrow(self._query)
        assert row is not None
        return PgReading(int(row["xacts"]), int(row["wal"]), row["statements"])

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
            await conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        finally:
            await conn.close()
        await asyncio.to_thread(postgres.stop)
        url = await asyncio.to_thread(postgres.start)
    except BaseException:
        await asyncio.to_thread(postgres.stop)
        raise
    return postgres, url
