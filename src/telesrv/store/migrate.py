"""Schema migrations: numbered SQL files applied in order, each in its own transaction.

Files are `store/migrations/NNNN_name.sql`. Applied versions are recorded in
`schema_migrations`; a PostgreSQL advisory lock makes concurrent starters wait for
each other instead of migrating twice. A file cannot contain statements that refuse
to run inside a transaction (CREATE INDEX CONCURRENTLY, ...).

`schema_settings` holds values fixed when the schema is first created, such as the
hash partition count used by `telesrv_create_hash_partitions()` (see 0001).

On a database with the citus extension, the tables are then distributed or made
reference tables (`citus.py`), and the history before that runs on the coordinator
alone.

After the migrations, under the same lock, the current definitions of the SQL functions
(`store/functions/`, see `sql_functions.py`) are applied; they match what the
migrations made, so this changes nothing unless a function was changed by other means.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import asyncpg

from telesrv.store import citus, sql_functions
from telesrv.store.sql_functions import FunctionFile

log = logging.getLogger(__name__)

# Arbitrary constant shared by every telesrv process ("telesrvm" in ASCII).
MIGRATION_LOCK_KEY = 0x74656C657372766D

_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_BOOTSTRAP_SQL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS schema_settings (
    name  text PRIMARY KEY,
    value text NOT NULL
);
"""


class MigrationError(RuntimeError):
    pass


# Search needs pg_trgm; 14 is the oldest release still supported upstream that has
# everything the migrations use (trusted pg_trgm, BEFORE row triggers on partitioned tables).
MIN_SERVER_VERSION = 140000
# The migration that creates the pg_trgm extension.
TRIGRAM_MIGRATION = 11


def server_problem(version_num: int, has_trigram: bool) -> str | None:
    """Why a server cannot hold telesrv's schema, in words an operator can act on."""
    if version_num < MIN_SERVER_VERSION:
        if version_num >= 100000:
            release = str(version_num // 10000)
        else:
            release = f"{version_num // 10000}.{version_num // 100 % 100}"
        return (
            f"PostgreSQL {release} is too old: telesrv needs PostgreSQL 14 or newer with the "
            "pg_trgm extension (leave --database-url unset to use the embedded server)"
        )
    if not has_trigram:
        return (
            "the PostgreSQL server has no pg_trgm extension, which message search needs: "
            "install the server's contrib package (e.g. postgresql-contrib) or use the "
            "embedded server (leave --database-url unset)"
        )
    return None


async def check_server(conn: asyncpg.Connection) -> None:
    """Fail early, and clearly, on a server the migrations would fail on halfway."""
    row = await conn.fetchrow(
        "SELECT current_setting('server_version_num')::integer AS version_num,"
        " EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') AS has_trigram"
    )
    assert row is not None
    problem = server_problem(row["version_num"], row["has_trigram"])
    if problem is not None:
        raise MigrationError(problem)


async def warn_about_ascii_trigrams(conn: asyncpg.Connection) -> None:
    # Under the "C" character classification only ASCII letters form trigrams: searches
    # for other scripts still find every match, by reading the owner's rows instead.
    if await conn.fetchval("SELECT show_trgm('世界人') = '{}'::text[]"):
        log.warning(
            "this database classifies only ASCII letters as letters (LC_CTYPE C): searches "
            "in other scripts cannot use the trigram index; create the database with a "
            "UTF-8 locale (e.g. LC_CTYPE C.UTF-8) for indexed search in every script"
        )


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


@dataclass(frozen=True)
class MigrationResult:
    applied: tuple[int, ...]
    # The partition count the schema was created with (may differ from the requested one).
    partition_count: int


def load_migrations(directory: Traversable | Path | None = None) -> list[Migration]:
    """Read `NNNN_name.sql` files, sorted by version; other files are ignored."""
    if directory is None:
        directory = resources.files("telesrv.store") / "migrations"
    found: dict[int, Migration] = {}
    for entry in directory.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match is None:
            continue
        version = int(match.group(1))
        if version in found:
            raise MigrationError(
                f"two migrations share version {version}: {found[version].name} and {entry.name}"
            )
        found[version] = Migration(version, match.group(2), entry.read_text(encoding="utf-8"))
    return [found[version] for version in sorted(found)]


async def migrate(
    conn: asyncpg.Connection,
    *,
    partition_count: int,
    migrations: Sequence[Migration] | None = None,
    functions: Sequence[FunctionFile] | None = None,
) -> MigrationResult:
    """Apply pending migrations on `conn` (outside any transaction), then `functions`.

    `functions` defaults to the packaged function files when `migrations` is the packaged
    list (None), and to none for any other list: the files are the functions as the
    packaged migrations leave them, which another list's schema may not hold."""
    if migrations is None:
        migrations = load_migrations()
        if functions is None:
            functions = sql_functions.load_function_files()
    _check_order(migrations)
    await check_server(conn)
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
    try:
        await conn.execute(_BOOTSTRAP_SQL)
        effective_partitions = await _fix_partition_count(conn, partition_count)
        applied_rows = await conn.fetch("SELECT version, name FROM schema_migrations")
        already = {row["version"]: row["name"] for row in applied_rows}
        _warn_about_unknown(already, migrations)
        known_versions = {migration.version for migration in migrations}
        newly_applied: list[int] = []
        on_citus = await citus.has_citus(conn)
        # On Citus, history runs on the coordinator alone until the tables are placed:
        # nothing is distributed yet, and Citus fails to copy some of the history's DDL
        # to the workers (0020's domain rule); placing a table copies what it needs.
        local_history = on_citus and not await citus.tables_placed(conn)
        for migration in migrations:
            if migration.version in already:
                continue
            started = time.perf_counter()
            async with conn.transaction():
                if local_history:
                    await conn.execute("SET LOCAL citus.enable_ddl_propagation = off")
                try:
                    await conn.execute(migration.sql)
                except asyncpg.PostgresError as exc:
                    raise MigrationError(
                        f"migration {migration.version:04d}_{migration.name} failed: {exc}"
                    ) from exc
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                    migration.version,
                    migration.name,
                )
            log.info(
                "applied migration %04d_%s in %.0f ms",
                migration.version,
                migration.name,
                (time.perf_counter() - started) * 1000,
            )
            newly_applied.append(migration.version)
        if on_citus:
            try:
                await citus.place_tables(conn)
            except (asyncpg.PostgresError, citus.PlacementError) as exc:
                raise MigrationError(f"placing the tables on Citus failed: {exc}") from exc
        if functions:
            await _apply_functions(conn, functions, newer=set(already) - known_versions)
        if any(migration.version >= TRIGRAM_MIGRATION for migration in migrations):
            await warn_about_ascii_trigrams(conn)
        return MigrationResult(tuple(newly_applied), effective_partitions)
    finally:
        # A broken connection already dropped its session lock.
        if not conn.is_closed():
            await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)


async def migrate_pool(
    pool: asyncpg.Pool,
    *,
    partition_count: int,
    migrations: Sequence[Migration] | None = None,
) -> MigrationResult:
    async with pool.acquire() as conn:
        return await migrate(conn, partition_count=partition_count, migrations=migrations)


async def get_partition_count(conn: asyncpg.Connection | asyncpg.Pool) -> int:
    value = await conn.fetchval("SELECT value FROM schema_settings WHERE name = 'partition_count'")
    if value is None:
        raise MigrationError("schema_settings has no partition_count: database not migrated")
    return int(value)


async def _fix_partition_count(conn: asyncpg.Connection, requested: int) -> int:
    await conn.execute(
        "INSERT INTO schema_settings (name, value) VALUES ('partition_count', $1)"
        " ON CONFLICT (name) DO NOTHING",
        str(requested),
    )
    effective = await get_partition_count(conn)
    if effective != requested:
        log.warning(
            "this database was created with %d hash partitions per table; "
            "ignoring the requested %d",
            effective,
            requested,
        )
    return effective


async def _apply_functions(
    conn: asyncpg.Connection, functions: Sequence[FunctionFile], *, newer: set[int]
) -> None:
    if newer:
        # A newer build migrated this database, and may have changed functions since
        # these files were written: putting the older definitions back would run that
        # schema with functions written for an older one.
        log.warning("not applying the SQL function files: the database is newer than them")
        return
    try:
        await sql_functions.apply_function_files(conn, functions)
    except sql_functions.FunctionFileError as exc:
        raise MigrationError(str(exc)) from exc


def _check_order(migrations: Iterable[Migration]) -> None:
    versions = [migration.version for migration in migrations]
    if versions != sorted(set(versions)):
        raise MigrationError(f"migrations must have unique increasing versions: {versions}")


def _warn_about_unknown(already: dict[int, str], migrations: Sequence[Migration]) -> None:
    known = {migration.version for migration in migrations}
    unknown = sorted(set(already) - known)
    if unknown:
        log.warning(
            "database has migrations this telesrv does not know (%s): is it newer than the code?",
            ", ".join(f"{version:04d}_{already[version]}" for version in unknown),
        )


async def pending_versions(pool: asyncpg.Pool) -> list[int]:
    """Versions this build ships that the database has not applied (readiness); raises
    when the database cannot be reached."""
    shipped = {m.version for m in load_migrations()}
    try:
        rows = await pool.fetch("SELECT version FROM schema_migrations")
    except asyncpg.UndefinedTableError:
        return sorted(shipped)
    return sorted(shipped - {row["version"] for row in rows})
