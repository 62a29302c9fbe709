"""Returning a connection to the pool costs no statement of its own, and keeps the
connection."""

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


async def test_a_connection_is_kept_past_many_queries(database_url: str) -> None:
    # asyncpg's default closed a connection at its release after 50,000 queries: the
    # one that replaced it started cold.
    pool = await dbmod.create_pool(database_url, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            pid = conn.get_server_pid()
            statement = await conn.prepare("SELECT 1")
            for _ in range(50_001):
                await statement.fetchval()
        async with pool.acquire() as conn:
            assert conn.get_server_pid() == pid
    finally:
        await pool.close()
