"""Returning a connection to the pool costs no statement of its own."""

from __future__ import annotations

from typing import Any

import asyncpg

from telesrv.store import db as dbmod


async def test_release_sends_no_reset_query(database_url: str) -> None:
    pool = await dbmod.create_pool(database_url, min_size=1, max_size=1)
    sent: list[str] = []

    def record(query: Any) -> None:
        sent.append(query.query)

    try:
        async with pool.acquire() as conn:
            raw: asyncpg.Connection = conn._con  # the pooled connection behind the proxy
            raw.add_query_logger(record)
            await conn.fetchval("SELECT 1")
        async with pool.acquire() as conn:
            assert conn._con is raw  # one connection in the pool: the same one again
            async with conn.transaction():
                await conn.fetchval("SELECT 2")
        # Only our own statements (and the transaction's) reached the server.
        assert sent == ["SELECT 1", "BEGIN;", "SELECT 2", "COMMIT;"]
    finally:
        await pool.close()
