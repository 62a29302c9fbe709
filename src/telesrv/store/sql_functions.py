"""The current definition of every telesrv_* SQL function, one file per function.

The migrations that built a function stay as they were applied, so reading them tells
a function's history, not what it is now (the send was written again four times).
`store/functions/<name>.sql` holds the definition the migrations leave, as
`CREATE OR REPLACE FUNCTION` (and `COMMENT ON FUNCTION` where the function has one).

`migrate.migrate` applies the files after the migrations, under the migration lock.
Every file matches what the migrations made (tests/store/test_sql_functions.py checks
that on a freshly migrated database), so applying them changes nothing: the
definitions are compared before and after in one transaction, and when none differs
it is rolled back, which leaves the catalog rows, and every other connection's cached
plans and compiled functions, untouched.

Changing a function takes a new migration that changes it and the same change in its
file: the migration is what an existing database applies once, the file is where the
function is read and what the test holds the migrations to.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import asyncpg

log = logging.getLogger(__name__)

_FILE_NAME = re.compile(r"^(telesrv_[a-z0-9_]+)\.sql$")
_DEFINES = re.compile(r"^CREATE\s+OR\s+REPLACE\s+FUNCTION\s+(\w+)\s*\(", re.MULTILINE | re.I)
# Anything else a file could do to the schema; its one job is its function.
_OTHER_STATEMENT = re.compile(
    r"^\s*(DROP|ALTER|CREATE(?!\s+OR\s+REPLACE\s+FUNCTION\b)|INSERT|UPDATE|DELETE)\b",
    re.MULTILINE | re.I,
)

# Every telesrv_* function of the schema the migrations write into, by its signature:
# the whole definition (name, arguments with their names and defaults, result,
# language, attributes, SET options, body) and its comment.
_DEFINITIONS_SQL = r"""
SELECT p.oid::regprocedure::text AS signature,
       pg_get_functiondef(p.oid) AS definition,
       obj_description(p.oid, 'pg_proc') AS comment
  FROM pg_proc p
 WHERE p.pronamespace = current_schema()::regnamespace
   AND p.proname LIKE 'telesrv\_%'
"""


class FunctionFileError(RuntimeError):
    pass


@dataclass(frozen=True)
class FunctionFile:
    # The function's name, which is also the file's: <name>.sql.
    name: str
    sql: str


@dataclass(frozen=True)
class Definition:
    definition: str
    comment: str | None


def load_function_files(directory: Traversable | Path | None = None) -> list[FunctionFile]:
    """Read `telesrv_<name>.sql` files, sorted by name; other files are ignored. Each must
    define its own function and nothing else."""
    if directory is None:
        directory = resources.files("telesrv.store") / "functions"
    found = []
    for entry in directory.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match is None:
            continue
        name = match.group(1)
        sql = entry.read_text(encoding="utf-8")
        defined = _DEFINES.findall(sql)
        if defined != [name]:
            raise FunctionFileError(
                f"{entry.name} must hold one CREATE OR REPLACE FUNCTION {name}, "
                f"it defines {defined or 'none'}"
            )
        other = _OTHER_STATEMENT.search(_without_bodies(sql))
        if other is not None:
            raise FunctionFileError(
                f"{entry.name} may only define its function, not {other.group(1)} anything"
            )
        found.append(FunctionFile(name, sql))
    return sorted(found, key=lambda f: f.name)


def _without_bodies(sql: str) -> str:
    # Bodies between dollar quotes are the function's statements, not the file's.
    return re.sub(r"(\$\w*\$).*?\1", "", sql, flags=re.DOTALL)


async def definitions(conn: asyncpg.Connection) -> dict[str, Definition]:
    """Each telesrv_* function of the current schema, by signature."""
    rows = await conn.fetch(_DEFINITIONS_SQL)
    return {row["signature"]: Definition(row["definition"], row["comment"]) for row in rows}


async def apply_function_files(
    conn: asyncpg.Connection, files: Sequence[FunctionFile]
) -> tuple[str, ...]:
    """Apply `files` on `conn` (outside any transaction; the caller holds the migration
    lock) and return the signatures of the functions that were created or changed. When
    that is none, the transaction is rolled back and the catalog is left as it was."""
    transaction = conn.transaction()
    await transaction.start()
    try:
        before = await definitions(conn)
        for file in files:
            try:
                await conn.execute(file.sql)
            except asyncpg.PostgresError as exc:
                raise FunctionFileError(f"SQL function file {file.name}.sql failed: {exc}") from exc
        after = await definitions(conn)
    except BaseException:
        # A broken connection already lost its transaction.
        if not conn.is_closed():
            await transaction.rollback()
        raise
    changed = tuple(sorted(sig for sig, now in after.items() if before.get(sig) != now))
    if not changed:
        await transaction.rollback()
        return ()
    await transaction.commit()
    log.warning("SQL functions differed from their files and were replaced: %s", ", ".join(changed))
    return changed
