"""PostgreSQL's own statistics, as the benches read them: the current database's
transactions (pg_stat_database), the server's WAL position, the statements
pg_stat_statements counted in the current database, and the backend's process id.

The meaning of the figures, and when they are complete, is told in bench/_pg_stats.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from telesrv.store.rows import from_row

# A column alias of the reading's own statement, by which pg_stat_statements' entry of
# it is told apart (the text it keeps has its constants replaced, not its aliases).
MARK = "telesrv_bench_pg_stats"


@dataclass(frozen=True)
class PgCounts:
    """The counts at one moment; ``statements`` None where they are not read."""

    xacts: int
    wal_bytes: int
    statements: int | None


# The reading comes in four fixed forms: with or without pg_stat_statements (its view
# exists only where the extension is loaded) and with or without asking for the
# reader's own counts to be reported at once (pg_stat_force_next_flush, PostgreSQL 15
# and later). Each is one statement, a transaction of its own.
_COUNTS = f"""
SELECT (SELECT xact_commit + xact_rollback FROM pg_stat_database
         WHERE datname = current_database()) AS xacts,
       pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS wal_bytes,
       {{statements}} AS statements,
       {{flush}} AS {MARK}
"""
_STATEMENTS = f"""(SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
                   WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                     AND query NOT LIKE '%{MARK}%')"""
_READINGS: dict[tuple[bool, bool], str] = {
    (statements, flush): _COUNTS.format(
        statements=_STATEMENTS if statements else "NULL::bigint",
        flush="pg_stat_force_next_flush()" if flush else "NULL",
    )
    for statements in (True, False)
    for flush in (True, False)
}


async def counts(conn: asyncpg.Connection, *, statements: bool, flush: bool) -> PgCounts:
    """Transactions, WAL bytes and (``statements``) pg_stat_statements calls now;
    ``flush``: this statement's own counts are reported as it ends."""
    row = await conn.fetchrow(_READINGS[statements, flush])
    assert row is not None
    return from_row(PgCounts, row)


async def enable_statements(conn: asyncpg.Connection) -> None:
    """pg_stat_statements in the current database, and readable; raises
    asyncpg.PostgresError where it cannot be (the library is not preloaded)."""
    await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    await conn.fetchval("SELECT count(*) FROM pg_stat_statements")


async def server_version(conn: asyncpg.Connection) -> int:
    """PostgreSQL's version as a number (150000 for 15.0)."""
    return int(await conn.fetchval("SHOW server_version_num"))


async def flush_now(conn: asyncpg.Connection) -> None:
    """This backend's counts so far reported at once (PostgreSQL 15 and later)."""
    await conn.execute("SELECT pg_stat_force_next_flush()")


async def preload_statements(conn: asyncpg.Connection) -> None:
    """pg_stat_statements loaded at the server's next start."""
    await conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")


async def backend_pid(conn: asyncpg.Connection) -> int:
    """The process id of the backend serving ``conn``."""
    return int(await conn.fetchval("SELECT pg_backend_pid()"))
