"""Custom dialog filters and the tags switch: one function per query; ``_txn`` ones run
in the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.rows import from_row


@dataclass(frozen=True, slots=True)
class FilterRow:
    filter_id: int
    position: int
    filter: bytes  # TL DialogFilter


async def filters(db: Executor, user_id: int) -> list[FilterRow]:
    """The user's filters in their order."""
    rows = await db.fetch(
        """
        SELECT filter_id, position, filter FROM dialog_filters
         WHERE user_id = $1 ORDER BY position, filter_id
        """,
        user_id,
    )
    return [from_row(FilterRow, r) for r in rows]


async def tags_enabled(db: Executor, user_id: int) -> bool:
    value = await db.fetchval(
        "SELECT tags_enabled FROM dialog_filter_settings WHERE user_id = $1", user_id
    )
    return bool(value)


async def lock_filters_txn(conn: asyncpg.Connection, user_id: int) -> list[FilterRow]:
    """The user's filters, locked: the settings row is taken first (created when
    missing), so concurrent changes of one user's filters run one at a time."""
    await conn.execute(
        """
        INSERT INTO dialog_filter_settings (user_id) VALUES ($1)
        ON CONFLICT (user_id) DO UPDATE SET tags_enabled = dialog_filter_settings.tags_enabled
        """,
        user_id,
    )
    return await filters(conn, user_id)


async def save_filter_txn(
    conn: asyncpg.Connection, user_id: int, filter_id: int, position: int, data: bytes
) -> None:
    await conn.execute(
        """
        INSERT INTO dialog_filters (user_id, filter_id, position, filter)
        VALUES ($1, $2, $3, $4)
        ON CONFLICT (user_id, filter_id) DO UPDATE SET filter = EXCLUDED.filter
        """,
        user_id,
        filter_id,
        position,
        data,
    )


async def delete_filter_txn(conn: asyncpg.Connection, user_id: int, filter_id: int) -> bool:
    value = await conn.fetchval(
        "DELETE FROM dialog_filters WHERE user_id = $1 AND filter_id = $2 RETURNING true",
        user_id,
        filter_id,
    )
    return bool(value)


async def set_order_txn(conn: asyncpg.Connection, user_id: int, order: Sequence[int]) -> None:
    await conn.execute(
        """
        UPDATE dialog_filters f SET position = o.pos
          FROM unnest($2::integer[]) WITH ORDINALITY AS o(id, pos)
         WHERE f.user_id = $1 AND f.filter_id = o.id
        """,
        user_id,
        list(order),
    )


async def set_tags_txn(conn: asyncpg.Connection, user_id: int, enabled: bool) -> bool:
    """Set the switch; whether it changed."""
    before = await conn.fetchval(
        "SELECT tags_enabled FROM dialog_filter_settings WHERE user_id = $1 FOR UPDATE", user_id
    )
    if before is not None and bool(before) == enabled:
        return False
    await conn.execute(
        """
        INSERT INTO dialog_filter_settings (user_id, tags_enabled) VALUES ($1, $2)
        ON CONFLICT (user_id) DO UPDATE SET tags_enabled = EXCLUDED.tags_enabled
        """,
        user_id,
        enabled,
    )
    return True
