"""Every telesrv_* SQL function has one current definition, its file in store/functions/,
and the migrations leave each function exactly as its file defines it."""

from __future__ import annotations

import asyncio
import difflib
import fnmatch
import logging
import tomllib
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import asyncpg
import pytest

from telesrv.store import db as dbmod
from telesrv.store import migrate, sql_functions
from telesrv.store.migrate import Migration
from telesrv.store.sql_functions import Definition, FunctionFileError

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = ROOT / "src" / "telesrv" / "store" / "functions"


@pytest.fixture
async def empty_conn(pg_server_url: str) -> AsyncIterator[asyncpg.Connection]:
    name = f"t_sqlfn_{uuid.uuid4().hex[:12]}"
    url = await dbmod.create_database(pg_server_url, name)
    try:
        conn = await asyncpg.connect(url)
        try:
            yield conn
        finally:
            await conn.close()
    finally:
        await dbmod.drop_database(pg_server_url, name)


@pytest.fixture
async def migrated_url(pg_server_url: str, template_database: str) -> AsyncIterator[str]:
    """A copy of the database every test starts from (migrations, then the files)."""
    name = f"t_sqlfn_{uuid.uuid4().hex[:12]}"
    url = await dbmod.create_database(pg_server_url, name, template=template_database)
    try:
        yield url
    finally:
        await dbmod.drop_database(pg_server_url, name)


@pytest.fixture
async def migrated_conn(migrated_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(migrated_url)
    try:
        yield conn
    finally:
        await conn.close()


async def _migrate_without_files(
    conn: asyncpg.Connection, extra: Sequence[Migration] = ()
) -> dict[str, Definition]:
    """The functions as the migrations (and `extra` after them) leave them."""
    await migrate.migrate(
        conn,
        partition_count=2,
        migrations=[*migrate.load_migrations(), *extra],
        functions=(),
    )
    return await sql_functions.definitions(conn)


def _next_version() -> int:
    return migrate.load_migrations()[-1].version + 1


def unmatched_names(migrated: dict[str, Definition]) -> dict[str, list[str]]:
    """Function names without exactly one signature in the database and one file."""
    files = {f.name for f in sql_functions.load_function_files()}
    signatures: dict[str, list[str]] = {name: [] for name in files}
    for signature in migrated:
        signatures.setdefault(signature.split("(")[0], []).append(signature)
    return {
        name: sorted(found)
        for name, found in signatures.items()
        if len(found) != 1 or name not in files
    }


async def differences(
    conn: asyncpg.Connection, migrated: dict[str, Definition]
) -> dict[str, tuple[Definition | None, Definition | None]]:
    """Applies the files on `conn`, where the functions are `migrated`, and returns each
    function whose definition or comment they changed (before, after); rolls back."""
    transaction = conn.transaction()
    await transaction.start()
    try:
        for file in sql_functions.load_function_files():
            await conn.execute(file.sql)
        applied = await sql_functions.definitions(conn)
    finally:
        await transaction.rollback()
    return {
        signature: (migrated.get(signature), applied.get(signature))
        for signature in migrated.keys() | applied.keys()
        if migrated.get(signature) != applied.get(signature)
    }


def explain(found: dict[str, tuple[Definition | None, Definition | None]]) -> str:
    """What the files would change, as a diff per function (migrations -> file)."""
    parts = []
    for signature, (before, after) in sorted(found.items()):
        migrated, applied = (
            []
            if d is None
            else (d.definition + f"\n-- comment: {d.comment!r}\n").splitlines(keepends=True)
            for d in (before, after)
        )
        diff = difflib.unified_diff(migrated, applied, f"{signature} (migrations)", "(its file)")
        parts.append("".join(diff))
    return (
        "a function's file and the migrations disagree: a migration that changes a function "
        "updates its file in store/functions/ too\n" + "\n".join(parts)
    )


async def test_every_function_has_one_file_and_each_file_a_function(
    empty_conn: asyncpg.Connection,
) -> None:
    migrated = await _migrate_without_files(empty_conn)
    assert migrated, "the migrations define telesrv_* functions"
    assert unmatched_names(migrated) == {}


async def test_the_files_define_each_function_as_the_migrations_leave_it(
    empty_conn: asyncpg.Connection,
) -> None:
    migrated = await _migrate_without_files(empty_conn)
    found = await differences(empty_conn, migrated)
    assert found == {}, explain(found)
    # And applying them is a no-op the way the server applies them.
    assert (
        await sql_functions.apply_function_files(empty_conn, sql_functions.load_function_files())
        == ()
    )
    assert await sql_functions.definitions(empty_conn) == migrated


async def test_every_other_test_runs_on_those_definitions(
    empty_conn: asyncpg.Connection, migrated_conn: asyncpg.Connection
) -> None:
    migrated = await _migrate_without_files(empty_conn)
    assert await sql_functions.definitions(migrated_conn) == migrated


_CHANGED_HOLD = """
CREATE OR REPLACE FUNCTION telesrv_hold_outbox(p_seconds double precision, p_pass integer)
RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM set_config('telesrv.outbox_hold', coalesce(p_seconds::text, '0'), true);
    RETURN p_pass;
END
$$;
"""


async def test_a_migration_changing_a_function_without_its_file_is_caught(
    empty_conn: asyncpg.Connection,
) -> None:
    migrated = await _migrate_without_files(
        empty_conn, [Migration(_next_version(), "changed_hold", _CHANGED_HOLD)]
    )
    found = await differences(empty_conn, migrated)
    assert list(found) == ["telesrv_hold_outbox(double precision,integer)"]
    before, after = found["telesrv_hold_outbox(double precision,integer)"]
    assert before is not None and "'0'" in before.definition
    assert after is not None and "'0'" not in after.definition


async def test_a_comment_changed_by_a_migration_alone_is_caught(
    empty_conn: asyncpg.Connection,
) -> None:
    comment = "COMMENT ON FUNCTION telesrv_hold_outbox(double precision, integer) IS 'x';"
    migrated = await _migrate_without_files(
        empty_conn, [Migration(_next_version(), "hold_comment", comment)]
    )
    assert list(await differences(empty_conn, migrated)) == [
        "telesrv_hold_outbox(double precision,integer)"
    ]


async def test_a_function_added_or_recreated_by_a_migration_alone_is_caught(
    empty_conn: asyncpg.Connection,
) -> None:
    sql = """
    CREATE FUNCTION telesrv_new_helper() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
    DROP FUNCTION telesrv_hold_outbox(double precision, integer);
    CREATE FUNCTION telesrv_hold_outbox(p_seconds double precision, p_pass bigint)
    RETURNS bigint LANGUAGE sql AS $$ SELECT p_pass $$;
    """
    migrated = await _migrate_without_files(empty_conn, [Migration(_next_version(), "new", sql)])
    assert unmatched_names(migrated) == {"telesrv_new_helper": ["telesrv_new_helper()"]}
    # The file's signature comes back beside the migration's: two of one name.
    assert sorted(await differences(empty_conn, migrated)) == [
        "telesrv_hold_outbox(double precision,integer)"
    ]


async def test_migrating_restores_a_function_changed_by_hand(
    migrated_conn: asyncpg.Connection,
) -> None:
    expected = await sql_functions.definitions(migrated_conn)
    await migrated_conn.execute(_CHANGED_HOLD)
    await migrated_conn.execute(
        "COMMENT ON FUNCTION telesrv_fill_pts(bigint, integer[], integer) IS NULL"
    )
    assert await sql_functions.definitions(migrated_conn) != expected
    result = await migrate.migrate(migrated_conn, partition_count=2)
    assert result.applied == ()
    assert await sql_functions.definitions(migrated_conn) == expected


async def _catalog_row_versions(conn: asyncpg.Connection) -> dict[str, str]:
    rows = await conn.fetch(
        "SELECT oid::regprocedure::text AS signature, xmin::text AS version FROM pg_proc"
        " WHERE pronamespace = current_schema()::regnamespace AND proname LIKE 'telesrv\\_%'"
    )
    return {row["signature"]: row["version"] for row in rows}


async def test_matching_files_leave_the_catalog_untouched(
    migrated_conn: asyncpg.Connection,
) -> None:
    versions = await _catalog_row_versions(migrated_conn)
    comments = await migrated_conn.fetchval("SELECT max(xmin::text::bigint) FROM pg_description")
    await migrate.migrate(migrated_conn, partition_count=2)
    assert await _catalog_row_versions(migrated_conn) == versions
    assert (
        await migrated_conn.fetchval("SELECT max(xmin::text::bigint) FROM pg_description")
        == comments
    )


async def test_a_database_newer_than_the_files_keeps_its_functions(
    migrated_conn: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    await migrated_conn.execute(_CHANGED_HOLD)
    await migrated_conn.execute(
        "INSERT INTO schema_migrations (version, name) VALUES (9999, 'from_a_newer_build')"
    )
    changed = await sql_functions.definitions(migrated_conn)
    with caplog.at_level(logging.WARNING, logger="telesrv.store.migrate"):
        await migrate.migrate(migrated_conn, partition_count=2)
    assert await sql_functions.definitions(migrated_conn) == changed
    assert "not applying the SQL function files" in caplog.text


async def test_concurrent_starters_apply_the_files_one_at_a_time(migrated_url: str) -> None:
    conns = [await asyncpg.connect(migrated_url) for _ in range(4)]
    try:
        expected = await sql_functions.definitions(conns[0])
        await conns[0].execute(_CHANGED_HOLD)
        await asyncio.gather(*(migrate.migrate(c, partition_count=2) for c in conns))
        assert await sql_functions.definitions(conns[0]) == expected
    finally:
        for c in conns:
            await c.close()


async def test_a_broken_file_fails_the_migration_and_changes_nothing(
    migrated_conn: asyncpg.Connection,
) -> None:
    before = await sql_functions.definitions(migrated_conn)
    files = [
        *sql_functions.load_function_files(),
        sql_functions.FunctionFile(
            "telesrv_hold_outbox",
            "CREATE OR REPLACE FUNCTION telesrv_hold_outbox(p_seconds double precision,"
            " p_pass integer) RETURNS bigint LANGUAGE sql AS $$ SELECT 1::bigint $$;",
        ),
    ]
    with pytest.raises(migrate.MigrationError, match="telesrv_hold_outbox.sql failed"):
        await migrate.migrate(
            migrated_conn,
            partition_count=2,
            migrations=migrate.load_migrations(),
            functions=files,
        )
    assert await sql_functions.definitions(migrated_conn) == before


def test_a_file_defines_its_own_function_and_nothing_else(tmp_path: Path) -> None:
    good = "-- why\nCREATE OR REPLACE FUNCTION telesrv_a() RETURNS int LANGUAGE sql AS $$\n"
    good += "DELETE FROM t;\nSELECT 1\n$$;\nCOMMENT ON FUNCTION telesrv_a() IS 'a';\n"
    (tmp_path / "telesrv_a.sql").write_text(good)
    (tmp_path / "README.md").write_text("not a function")
    assert [f.name for f in sql_functions.load_function_files(tmp_path)] == ["telesrv_a"]

    (tmp_path / "telesrv_b.sql").write_text(good)
    with pytest.raises(FunctionFileError, match="telesrv_b.sql must hold one"):
        sql_functions.load_function_files(tmp_path)
    (tmp_path / "telesrv_b.sql").write_text(good.replace("telesrv_a", "telesrv_b") + good)
    with pytest.raises(FunctionFileError, match="telesrv_b.sql must hold one"):
        sql_functions.load_function_files(tmp_path)
    (tmp_path / "telesrv_b.sql").write_text(
        good.replace("telesrv_a", "telesrv_b") + "DROP TABLE t;\n"
    )
    with pytest.raises(FunctionFileError, match="not DROP"):
        sql_functions.load_function_files(tmp_path)


def test_the_files_ship_with_the_package() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        patterns = tomllib.load(f)["tool"]["setuptools"]["package-data"]["telesrv"]
    package = ROOT / "src" / "telesrv"
    files = sorted(FUNCTIONS_DIR.glob("*.sql"))
    assert [f.stem for f in files] == [f.name for f in sql_functions.load_function_files()]
    unshipped = [
        str(f.relative_to(package))
        for f in files
        if not any(fnmatch.fnmatch(str(f.relative_to(package)), p) for p in patterns)
    ]
    assert unshipped == []
