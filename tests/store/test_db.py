from __future__ import annotations

import asyncio
import itertools

import asyncpg
import pytest
from prometheus_client import REGISTRY

from telesrv.store import db as dbmod

_table_numbers = itertools.count()


async def _new_table(db: dbmod.Db) -> str:
    name = f"txn_test_{next(_table_numbers)}"
    await db.pool.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, v int NOT NULL)")
    return name


async def _raise_sqlstate(conn: asyncpg.Connection, sqlstate: str) -> None:
    await conn.execute(f"DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = '{sqlstate}'; END $$")


async def test_run_txn_commits_and_returns_the_result(db: dbmod.Db) -> None:
    table = await _new_table(db)

    async def insert(conn: asyncpg.Connection, key: int, value: int) -> int:
        await conn.execute(f"INSERT INTO {table} VALUES ($1, $2)", key, value)
        return value * 2

    assert await db.run_txn("test_insert", insert, 1, 21) == 42
    assert await db.pool.fetchval(f"SELECT v FROM {table} WHERE id = 1") == 21


async def test_run_txn_rolls_back_on_error(db: dbmod.Db) -> None:
    table = await _new_table(db)

    async def insert_then_fail(conn: asyncpg.Connection) -> None:
        await conn.execute(f"INSERT INTO {table} VALUES (1, 1)")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await db.run_txn("test_fail", insert_then_fail)
    assert await db.pool.fetchval(f"SELECT count(*) FROM {table}") == 0


@pytest.mark.parametrize("sqlstate", ["40001", "40P01"])
async def test_retryable_failure_is_retried_and_first_attempt_rolled_back(
    db: dbmod.Db, sqlstate: str
) -> None:
    table = await _new_table(db)
    attempts = 0

    async def insert_fail_once(conn: asyncpg.Connection) -> str:
        nonlocal attempts
        attempts += 1
        # Same primary key every attempt: a leaked first attempt would make this fail.
        await conn.execute(f"INSERT INTO {table} VALUES (1, $1)", attempts)
        if attempts == 1:
            await _raise_sqlstate(conn, sqlstate)
        return "done"

    retries_before = (
        REGISTRY.get_sample_value(
            "telesrv_db_txn_retries_total", {"name": "test_retry", "sqlstate": sqlstate}
        )
        or 0.0
    )
    assert await db.run_txn("test_retry", insert_fail_once) == "done"
    assert attempts == 2
    assert await db.pool.fetchval(f"SELECT v FROM {table} WHERE id = 1") == 2
    retries_after = REGISTRY.get_sample_value(
        "telesrv_db_txn_retries_total", {"name": "test_retry", "sqlstate": sqlstate}
    )
    assert retries_after == retries_before + 1


async def test_retries_are_bounded(db: dbmod.Db) -> None:
    bounded = dbmod.Db(db.pool, max_attempts=3)
    attempts = 0

    async def always_conflicts(conn: asyncpg.Connection) -> None:
        nonlocal attempts
        attempts += 1
        await _raise_sqlstate(conn, "40001")

    with pytest.raises(asyncpg.exceptions.SerializationError):
        await bounded.run_txn("test_bounded", always_conflicts)
    assert attempts == 3


async def test_other_errors_are_not_retried(db: dbmod.Db) -> None:
    attempts = 0

    async def unique_violation(conn: asyncpg.Connection) -> None:
        nonlocal attempts
        attempts += 1
        await _raise_sqlstate(conn, "23505")

    with pytest.raises(asyncpg.exceptions.UniqueViolationError):
        await db.run_txn("test_no_retry", unique_violation)
    assert attempts == 1


async def test_real_serialization_conflict_resolves_by_retrying(db: dbmod.Db) -> None:
    table = await _new_table(db)
    await db.pool.execute(f"INSERT INTO {table} VALUES (1, 0)")
    both_read = asyncio.Barrier(2)
    attempts = 0

    async def read_then_increment(conn: asyncpg.Connection) -> None:
        nonlocal attempts
        attempts += 1
        value = await conn.fetchval(f"SELECT v FROM {table} WHERE id = 1")
        if attempts <= 2:
            # Make the two first attempts overlap: both read before either writes.
            await both_read.wait()
        await conn.execute(f"UPDATE {table} SET v = $1 WHERE id = 1", value + 1)

    await asyncio.gather(
        db.run_txn("test_conflict", read_then_increment, isolation="serializable"),
        db.run_txn("test_conflict", read_then_increment, isolation="serializable"),
    )
    assert attempts == 3
    assert await db.pool.fetchval(f"SELECT v FROM {table} WHERE id = 1") == 2


async def test_a_read_txn_reads_one_snapshot_and_writes_nothing(db: dbmod.Db) -> None:
    table = await _new_table(db)
    await db.pool.execute(f"INSERT INTO {table} VALUES (1, 1)")

    async def read_around_a_commit(conn: asyncpg.Connection) -> tuple[int, int]:
        before = await conn.fetchval(f"SELECT v FROM {table} WHERE id = 1")
        await db.pool.execute(f"UPDATE {table} SET v = 2 WHERE id = 1")  # commits meanwhile
        after = await conn.fetchval(f"SELECT v FROM {table} WHERE id = 1")
        return before, after

    assert await db.run_read_txn("test_read", read_around_a_commit) == (1, 1)
    assert await db.pool.fetchval(f"SELECT v FROM {table} WHERE id = 1") == 2

    async def write(conn: asyncpg.Connection) -> None:
        await conn.execute(f"UPDATE {table} SET v = 3 WHERE id = 1")

    with pytest.raises(asyncpg.exceptions.ReadOnlySQLTransactionError):
        await db.run_read_txn("test_read_write", write)
    assert await db.pool.fetchval(f"SELECT v FROM {table} WHERE id = 1") == 2


async def test_duration_is_recorded_per_name(db: dbmod.Db) -> None:
    async def noop(conn: asyncpg.Connection) -> None:
        await conn.execute("SELECT 1")

    labels = {"name": "test_histogram"}
    before = REGISTRY.get_sample_value("telesrv_db_txn_seconds_count", labels) or 0.0
    await db.run_txn("test_histogram", noop)
    await db.run_txn("test_histogram", noop)
    assert REGISTRY.get_sample_value("telesrv_db_txn_seconds_count", labels) == before + 2


def test_database_url_replaces_only_the_database() -> None:
    assert (
        dbmod.database_url("postgresql://postgres:@/postgres?host=/tmp/pg", "telesrv")
        == "postgresql://postgres:@/telesrv?host=/tmp/pg"
    )
    assert (
        dbmod.database_url("postgres://u:p@db.example:5433", "x")
        == "postgres://u:p@db.example:5433/x"
    )


async def test_create_database_refuses_unsafe_names(pg_server_url: str) -> None:
    with pytest.raises(ValueError, match="refusing database name"):
        await dbmod.create_database(pg_server_url, 'x"; DROP DATABASE postgres; --')
