"""Warming pooled connections before the process takes requests (store/warmup.py, Db.warm)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from conftest import TEST_PARTITION_COUNT

from telesrv.store import db as dbmod
from telesrv.store import messages as messages_store
from telesrv.store import warmup

# The send function compiled in this backend: its PL/pgSQL memory context is there.
_SEND_COMPILED = """
SELECT count(*) FROM pg_backend_memory_contexts
 WHERE name = 'PL/pgSQL function' AND ident LIKE 'telesrv_send_private_message(%'
"""
# The users' projection (users.project_user_pairs), its function compiled and its
# statement planned on this connection.
_PROJECTION_COMPILED = """
SELECT count(*) FROM pg_backend_memory_contexts
 WHERE name = 'PL/pgSQL function' AND ident LIKE 'telesrv_project_user_pairs(%'
"""
# The first-send read (counters.unguarded_facts) prepared on this connection.
_FACTS_PREPARED = """
SELECT count(*) FROM pg_prepared_statements
 WHERE strpos(statement, 'AS has_' || 'blocks') > 0  -- not this statement itself
"""
# Everything a send writes, for the made-up (negative) users.
_WRITTEN = """
SELECT (SELECT count(*) FROM private_messages WHERE sender_user_id < 0)
     + (SELECT count(*) FROM message_boxes WHERE owner_user_id < 0)
     + (SELECT count(*) FROM message_search WHERE owner_user_id < 0)
     + (SELECT count(*) FROM dialogs WHERE user_id < 0)
     + (SELECT count(*) FROM user_update_events WHERE user_id < 0)
     + (SELECT count(*) FROM dispatch_outbox WHERE target_user_id < 0)
"""

# Locks this backend holds on the schema's tables, partitions and indexes.
_HELD = """
SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
 WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation'
   AND c.relnamespace <> 'pg_catalog'::regnamespace
"""


@contextlib.asynccontextmanager
async def _pool(database_url: str, size: int) -> AsyncIterator[dbmod.Db]:
    db = await dbmod.open_db(database_url, min_size=1, max_size=size)
    try:
        yield db
    finally:
        await db.close()


async def _each_connection(db: dbmod.Db, size: int, query: str) -> list[Any]:
    """``query`` on each of the pool's ``size`` open connections (all held at once, so
    each is a different one)."""
    async with contextlib.AsyncExitStack() as stack:
        conns = [await stack.enter_async_context(db.pool.acquire()) for _ in range(size)]
        assert len({conn._con for conn in conns}) == size
        # a warm-up leaves no transaction open behind it
        assert not any(conn.is_in_transaction() for conn in conns)
        return [await conn.fetchval(query) for conn in conns]


async def test_warm_users_cover_every_partition(db: dbmod.Db) -> None:
    async with db.pool.acquire() as conn:
        users = await warmup.warm_users(conn)
        remainders = [
            await conn.fetchval(
                "SELECT r FROM generate_series(0, $2 - 1) AS r"
                " WHERE satisfies_hash_partition('message_boxes'::regclass, $2, r, $1::bigint)",
                user,
                TEST_PARTITION_COUNT,
            )
            for user in users
        ]
    assert remainders == list(range(TEST_PARTITION_COUNT))
    assert all(user < 0 for user in users)


async def test_each_pooled_connection_is_warmed_and_nothing_is_written(
    database_url: str,
) -> None:
    before = dbmod.WARMED_CONNECTIONS._value.get()
    async with _pool(database_url, 3) as db:
        assert await _each_connection(db, 3, _SEND_COMPILED) == [0, 0, 0]
        assert await _each_connection(db, 3, _PROJECTION_COMPILED) == [0, 0, 0]
        assert await db.warm(warmup.warm_connection, timeout=60) == 3
        assert await _each_connection(db, 3, _SEND_COMPILED) == [1, 1, 1]
        assert await _each_connection(db, 3, _PROJECTION_COMPILED) == [1, 1, 1]
        assert await _each_connection(db, 3, _FACTS_PREPARED) == [1, 1, 1]
        assert await db.pool.fetchval(_WRITTEN) == 0
    assert dbmod.WARMED_CONNECTIONS._value.get() == before + 3


async def test_a_database_too_slow_for_the_warm_up_is_given_up_on(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def slow(conn: asyncpg.Connection) -> None:
        await conn.execute("SELECT pg_sleep(600)")

    async with _pool(database_url, 2) as db:
        with caplog.at_level(logging.WARNING, logger="telesrv.store.db"):
            assert await db.warm(slow, timeout=0.2) == 0
        assert "gave up" in caplog.text
        # The cancelled statements left the connections usable, and pooled.
        assert await _each_connection(db, 2, "SELECT 1") == [1, 1]
        assert db.pool.get_size() >= 2


async def test_a_failing_warm_up_does_not_fail_startup(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(conn: asyncpg.Connection) -> None:
        await conn.execute("SELECT no_such_column FROM schema_settings")

    async with _pool(database_url, 2) as db:
        with caplog.at_level(logging.WARNING, logger="telesrv.store.db"):
            assert await db.warm(broken, timeout=60) == 0
        assert "a warm-up failed" in caplog.text
        assert await _each_connection(db, 2, "SELECT 1") == [1, 1]


async def test_a_warm_up_waits_for_no_connection_in_use(database_url: str) -> None:
    # A connection held elsewhere is neither waited for nor counted.
    async with _pool(database_url, 2) as db:
        async with db.pool.acquire():
            assert await asyncio.wait_for(db.warm(warmup.warm_connection, timeout=60), 60) == 1


async def test_a_warm_up_holds_the_locks_of_one_send_at_a_time(
    db: dbmod.Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    # All partitions' sends in one transaction would hold a lock on every partition and
    # index of the send's tables at once: past the backend's fast-path slots, entries
    # of the lock table all sessions share (thousands per connection with hundreds of
    # partitions, times the pool, times the workers warming together).
    held: list[int] = []
    send = messages_store.send_private_message_txn

    async def counting(conn: Any, params: messages_store.SendParams) -> Any:
        held.append(await conn.fetchval(_HELD))
        return await send(conn, params)

    monkeypatch.setattr(messages_store, "send_private_message_txn", counting)
    async with db.pool.acquire() as conn:
        await warmup.warm_connection(conn)
        assert not conn.is_in_transaction()
    assert held == [0] * TEST_PARTITION_COUNT
