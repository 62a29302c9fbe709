"""store.pg_stats on the test database (no pg_stat_statements there): the reading's
forms without the statements, the version and the backend's process id."""

from __future__ import annotations

import os

import asyncpg

from telesrv.store import pg_stats


async def test_counts_without_statements_and_the_backend_pid(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        flush = await pg_stats.server_version(conn) >= 150000
        first = await pg_stats.counts(conn, statements=False, flush=flush)
        second = await pg_stats.counts(conn, statements=False, flush=flush)
        assert first.statements is None and second.statements is None
        assert second.wal_bytes >= first.wal_bytes > 0
        assert second.xacts >= first.xacts >= 0
        pid = await pg_stats.backend_pid(conn)
        assert pid > 0 and pid != os.getpid()
    finally:
        await conn.close()
