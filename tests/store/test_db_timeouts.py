"""Statement and pool-acquire timeouts of the serving pool (a stalled database must
cost a request an error, not a hang)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from telesrv.store import db as dbmod

GUARD = 30.0  # only against a hang


async def test_statement_past_the_timeout_is_cancelled(database_url: str) -> None:
    pool = await dbmod.create_pool(
        database_url, min_size=1, max_size=1, statement_timeout=0.2, acquire_timeout=5
    )
    try:
        assert await pool.fetchval("SHOW statement_timeout") == "200ms"
        assert await pool.fetchval("SELECT 1") == 1  # within it
        with pytest.raises(dbmod.UNAVAILABLE_ERRORS):
            async with asyncio.timeout(GUARD):
                await pool.fetchval("SELECT pg_sleep(5)")
        assert await pool.fetchval("SELECT 2") == 2  # the pool is usable afterwards
    finally:
        await pool.close()


async def test_waiting_for_a_pooled_connection_is_bounded(database_url: str) -> None:
    pool = await dbmod.create_pool(
        database_url, min_size=1, max_size=1, statement_timeout=5, acquire_timeout=0.2
    )
    try:
        held = await pool.acquire()
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(GUARD):
                    await pool.fetchval("SELECT 1")  # the implicit acquire times out too
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(GUARD):
                    async with pool.acquire():
                        pass
        finally:
            await pool.release(held)
        assert await pool.fetchval("SELECT 1") == 1
    finally:
        await pool.close()


async def test_migration_pool_has_no_timeouts(database_url: str) -> None:
    pool = await dbmod.create_pool(database_url, min_size=1, max_size=1)
    try:
        assert type(pool) is asyncpg.Pool
        assert await pool.fetchval("SHOW statement_timeout") == "0"
    finally:
        await pool.close()
