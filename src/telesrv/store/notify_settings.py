"""Notification settings, per peer or per kind of chat. One function per query; ``_txn``
ones run in the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.rows import from_row


@dataclass(frozen=True, slots=True)
class NotifyRow:
    kind: str
    peer_user_id: int
    show_previews: bool | None
    silent: bool | None
    mute_until: int | None
    sound: bytes | None


_NOTIFY_COLUMNS = "kind, peer_user_id, show_previews, silent, mute_until, sound"


async def notify_settings(
    db: Executor, user_id: int, kind: str, peer_user_id: int
) -> NotifyRow | None:
    row = await db.fetchrow(
        f"""
        SELECT {_NOTIFY_COLUMNS} FROM notify_settings
         WHERE user_id = $1 AND kind = $2 AND peer_user_id = $3
        """,
        user_id,
        kind,
        peer_user_id,
    )
    return None if row is None else from_row(NotifyRow, row)


async def peers_notify_settings(
    db: Executor, user_id: int, peers: Sequence[int]
) -> dict[int, NotifyRow]:
    rows = await db.fetch(
        f"""
        SELECT {_NOTIFY_COLUMNS} FROM notify_settings
         WHERE user_id = $1 AND kind = 'peer' AND peer_user_id = ANY($2::bigint[])
        """,
        user_id,
        list(peers),
    )
    return {r["peer_user_id"]: from_row(NotifyRow, r) for r in rows}


async def save_notify_settings_txn(conn: asyncpg.Connection, user_id: int, row: NotifyRow) -> None:
    await conn.execute(
        """
        INSERT INTO notify_settings (user_id, kind, peer_user_id, show_previews, silent,
                                     mute_until, sound)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        ON CONFLICT (user_id, kind, peer_user_id) DO UPDATE
           SET show_previews = EXCLUDED.show_previews, silent = EXCLUDED.silent,
               mute_until = EXCLUDED.mute_until, sound = EXCLUDED.sound
        """,
        user_id,
        row.kind,
        row.peer_user_id,
        row.show_previews,
        row.silent,
        row.mute_until,
        row.sound,
    )


async def reset_notify_settings_txn(
    conn: asyncpg.Connection, user_id: int
) -> list[tuple[str, int]]:
    """Delete every setting of the user; the (kind, peer) of those there were."""
    rows = await conn.fetch(
        "DELETE FROM notify_settings WHERE user_id = $1 RETURNING kind, peer_user_id", user_id
    )
    return sorted((r["kind"], r["peer_user_id"]) for r in rows)
