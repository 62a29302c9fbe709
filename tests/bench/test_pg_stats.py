"""The bench's PostgreSQL readings (bench/_pg_stats.py) on a server of their own with
pg_stat_statements loaded: a known number of transactions, statements and rows written
between two readings gives those figures per message."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from telesrv.bench._pg_stats import PgStats, embedded_postgres_with_statements, unmeasured
from telesrv.store import db as dbmod

WRITES = 10
IDLE_WRITES = 3


async def test_readings_count_transactions_statements_and_wal(tmp_path: Path) -> None:
    postgres, server_url = await embedded_postgres_with_statements(tmp_path / "pg")
    try:
        url = await dbmod.create_database(server_url, "measured")
        writer = await asyncpg.connect(url)
        await writer.execute("CREATE TABLE t (v text)")
        await writer.execute("SELECT pg_stat_force_next_flush()")  # counted before
        stats = await PgStats.open(url)
        try:
            assert stats.statements_reason is None
            # No wait: each write below has its counts reported as it ends.
            before = await stats.reading(settle=0)
            await write(writer, WRITES)
            after = await stats.reading(settle=0)
            figures = stats.figures(before, after, WRITES)
            # A server's own work while idle: what it does in a later wait as long is
            # taken off the span, which held as much.
            await write(writer, IDLE_WRITES)
            idle_after = await stats.reading(settle=0)
            await write(writer, IDLE_WRITES)
            idle_later = await stats.reading(settle=0)
            corrected = stats.figures(after, idle_after, WRITES, (idle_after, idle_later))
        finally:
            await stats.close()
            await writer.close()
    finally:
        postgres.stop()
    assert figures["pg_xacts_per_msg"] == 1.0
    assert figures["pg_statements_per_msg"] == 1.0
    assert figures["pg_statements_reason"] is None
    assert figures["pg_wal_bytes_per_msg"] > 100  # each row's text at least
    assert corrected["pg_xacts_per_msg"] == 0.0
    assert corrected["pg_statements_per_msg"] == 0.0


async def write(conn: asyncpg.Connection, count: int) -> None:
    """``count`` rows, each in a statement and a transaction of its own, whose counts
    the backend reports as it ends."""
    for i in range(count):
        await conn.execute(
            "WITH w AS (INSERT INTO t VALUES (repeat('x', 100) || $1) RETURNING 1)"
            " SELECT pg_stat_force_next_flush() FROM w",
            str(i),
        )


def test_no_readings_give_nulls_and_the_reason() -> None:
    assert unmeasured("why") == {
        "pg_xacts_per_msg": None,
        "pg_wal_bytes_per_msg": None,
        "pg_statements_per_msg": None,
        "pg_statements_reason": "why",
    }
