"""Rows become dataclasses by column name, whatever order a query selects them in."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field

import pytest

from telesrv.store import db as dbmod
from telesrv.store.outbox import OutboxRow
from telesrv.store.rows import from_row


@dataclass(frozen=True)
class Pair:
    first: int
    second: str


async def test_columns_fill_the_fields_of_their_name(db: dbmod.Db) -> None:
    # Selected in the opposite order of the fields, with one column the class lacks.
    row = await db.pool.fetchrow("SELECT 'b' AS second, 7 AS extra, 1 AS first")
    assert from_row(Pair, row) == Pair(first=1, second="b")


async def test_a_missing_column_is_an_error_not_a_shifted_value(db: dbmod.Db) -> None:
    row = await db.pool.fetchrow("SELECT 1 AS first, 'b' AS other")
    with pytest.raises(KeyError):
        from_row(Pair, row)


async def test_a_default_field_still_needs_its_column(db: dbmod.Db) -> None:
    # OutboxRow.state_id has a default; a query that forgets it must not pass silently.
    row = await db.pool.fetchrow(
        "SELECT 1 AS target_user_id, 2 AS id, 3 AS pts, NULL::bigint AS exclude_auth_key_id,"
        " NULL::bigint AS exclude_session_id, 1 AS attempts"
    )
    with pytest.raises(KeyError):
        from_row(OutboxRow, row)
    full = dict(row) | {"state_id": None}
    assert from_row(OutboxRow, full) == OutboxRow(
        target_user_id=1,
        id=2,
        pts=3,
        exclude_auth_key_id=None,
        exclude_session_id=None,
        attempts=1,
        state_id=None,
    )


@dataclass(frozen=True)
class Mixed:
    first: int
    second: str = "x"
    _: KW_ONLY
    third: bool
    hidden: int = field(default=0, init=False)


async def test_keyword_only_and_non_init_fields_are_filled_by_name(db: dbmod.Db) -> None:
    row = await db.pool.fetchrow("SELECT true AS third, 'b' AS second, 9 AS hidden, 1 AS first")
    assert from_row(Mixed, row) == Mixed(1, "b", third=True)
    assert from_row(Mixed, row).hidden == 0  # not an init field: never read from the row
