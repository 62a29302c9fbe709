from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from telesrv.store import db as dbmod
from telesrv.store import migrate
from telesrv.store.migrate import Migration, MigrationError


@pytest.fixture
async def empty_database_url(pg_server_url: str) -> AsyncIterator[str]:
    name = f"t_migrate_{uuid.uuid4().hex[:12]}"
    url = await dbmod.create_database(pg_server_url, name)
    try:
        yield url
    finally:
        await dbmod.drop_database(pg_server_url, name)


@pytest.fixture
async def conn(empty_database_url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(empty_database_url)
    try:
        yield connection
    finally:
        await connection.close()


def test_packaged_migrations_are_numbered_from_one_without_gaps() -> None:
    migrations = migrate.load_migrations()
    assert migrations[0].version == 1 and migrations[0].name == "auth_keys"
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))


def test_load_migrations_sorts_and_ignores_other_files(tmp_path: Path) -> None:
    (tmp_path / "0002_second.sql").write_text("SELECT 2;")
    (tmp_path / "0001_first.sql").write_text("SELECT 1;")
    (tmp_path / "README.md").write_text("not a migration")
    (tmp_path / "3_bad_name.sql").write_text("SELECT 3;")
    loaded = migrate.load_migrations(tmp_path)
    assert [(m.version, m.name, m.sql) for m in loaded] == [
        (1, "first", "SELECT 1;"),
        (2, "second", "SELECT 2;"),
    ]


def test_load_migrations_rejects_duplicate_versions(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "0001_b.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="share version 1"):
        migrate.load_migrations(tmp_path)


async def test_packaged_migrations_apply_once(conn: asyncpg.Connection) -> None:
    first = await migrate.migrate(conn, partition_count=4)
    expected = tuple(m.version for m in migrate.load_migrations())
    assert first.applied == expected
    assert first.partition_count == 4
    rows = await conn.fetch("SELECT version, name FROM schema_migrations ORDER BY version")
    assert [(r["version"], r["name"]) for r in rows] == [
        (m.version, m.name) for m in migrate.load_migrations()
    ]
    assert await conn.fetchval("SELECT to_regclass('auth_keys') IS NOT NULL")
    assert await conn.fetchval("SELECT to_regclass('auth_key_clients') IS NOT NULL")

    second = await migrate.migrate(conn, partition_count=4)
    assert second.applied == ()


async def test_failed_migration_rolls_back_only_itself(conn: asyncpg.Connection) -> None:
    migrations = [
        Migration(1, "good", "CREATE TABLE good_one (id int);"),
        Migration(2, "bad", "CREATE TABLE half_done (id int); SELECT * FROM no_such_table;"),
        Migration(3, "never", "CREATE TABLE never_reached (id int);"),
    ]
    with pytest.raises(MigrationError, match="0002_bad"):
        await migrate.migrate(conn, partition_count=2, migrations=migrations)
    assert await conn.fetchval("SELECT array_agg(version) FROM schema_migrations") == [1]
    assert await conn.fetchval("SELECT to_regclass('good_one') IS NOT NULL")
    assert await conn.fetchval("SELECT to_regclass('half_done') IS NULL")
    assert await conn.fetchval("SELECT to_regclass('never_reached') IS NULL")

    fixed = [migrations[0], Migration(2, "bad", "CREATE TABLE half_done (id int);"), migrations[2]]
    result = await migrate.migrate(conn, partition_count=2, migrations=fixed)
    assert result.applied == (2, 3)


async def test_concurrent_migrators_apply_each_migration_once(empty_database_url: str) -> None:
    # Without the advisory lock both would try the CREATE TABLE and one would fail.
    migrations = [
        Migration(1, "slow", "SELECT pg_sleep(0.3); CREATE TABLE created_once (id int);"),
        Migration(2, "after", "INSERT INTO created_once VALUES (1);"),
    ]
    conns = [await asyncpg.connect(empty_database_url) for _ in range(2)]
    try:
        results = await asyncio.gather(
            *(migrate.migrate(c, partition_count=2, migrations=migrations) for c in conns)
        )
        assert sorted(r.applied for r in results) == [(), (1, 2)]
        assert await conns[0].fetchval("SELECT count(*) FROM created_once") == 1
    finally:
        for c in conns:
            await c.close()


async def test_partition_count_is_fixed_at_creation(conn: asyncpg.Connection) -> None:
    await migrate.migrate(conn, partition_count=3)
    again = await migrate.migrate(conn, partition_count=7)
    assert again.partition_count == 3
    assert await migrate.get_partition_count(conn) == 3

    await conn.execute("CREATE TABLE things (owner bigint, v int) PARTITION BY HASH (owner)")
    await conn.execute("SELECT telesrv_create_hash_partitions('things')")
    partitions = await conn.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'things'::regclass ORDER BY c.relname"
    )
    assert [p["relname"] for p in partitions] == ["things_p0", "things_p1", "things_p2"]
    # Every row lands somewhere: the partitions cover the whole hash space.
    await conn.execute("INSERT INTO things SELECT g, 0 FROM generate_series(1, 100) g")
    assert await conn.fetchval("SELECT count(*) FROM things") == 100


async def test_advisory_lock_released_after_migrating(conn: asyncpg.Connection) -> None:
    await migrate.migrate(conn, partition_count=2)
    held = await conn.fetchval(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    )
    assert held == 0


@pytest.mark.parametrize(
    ("version_num", "has_trigram", "expected"),
    [
        (140000, True, None),  # the oldest release accepted
        (180006, True, None),
        (130020, True, "PostgreSQL 13 is too old"),  # just past it
        (90624, True, "PostgreSQL 9.6 is too old"),
        (160002, False, "no pg_trgm extension"),
    ],
)
def test_server_problem_names_what_is_missing(
    version_num: int, has_trigram: bool, expected: str | None
) -> None:
    problem = migrate.server_problem(version_num, has_trigram)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem


async def test_the_test_server_passes_the_start_check(conn: asyncpg.Connection) -> None:
    await migrate.check_server(conn)
