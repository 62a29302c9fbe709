"""The dialog list: one row per chat an owner has, newest first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from telesrv.store.db import Executor
from telesrv.store.rows import from_row


@dataclass(frozen=True, slots=True)
class DialogRow:
    peer_user_id: int
    top_message: int
    top_message_date: int
    read_inbox_max_id: int
    read_outbox_max_id: int
    unread_count: int
    unread_mark: bool
    pinned_order: int | None
    folder_id: int


_DIALOG_COLUMNS = """
    peer_user_id, top_message, top_message_date, read_inbox_max_id, read_outbox_max_id,
    unread_count, unread_mark, pinned_order, folder_id
"""


async def get_dialogs(
    db: Executor,
    user_id: int,
    *,
    folder_id: int,
    offset_date: int | None,
    offset_id: int | None,
    offset_peer: int | None,
    limit: int,
) -> list[DialogRow]:
    """Seek pagination on (top_message_date, top_message, peer_user_id), newest first.
    A cleared chat (deleteHistory with just_clear) is listed too, with top_message 0."""
    rows = await db.fetch(
        f"""
        SELECT {_DIALOG_COLUMNS}
          FROM dialogs
         WHERE user_id = $1 AND folder_id = $2
           AND ($3::integer IS NULL
                OR (top_message_date, top_message, peer_user_id)
                   < ($3, COALESCE($4::integer, 2147483647),
                      COALESCE($5::bigint, 9223372036854775807)))
         ORDER BY top_message_date DESC, top_message DESC, peer_user_id DESC
         LIMIT $6
        """,
        user_id,
        folder_id,
        offset_date,
        offset_id,
        offset_peer,
        limit,
    )
    return [from_row(DialogRow, r) for r in rows]


async def dialogs_summary(db: Executor, user_id: int, folder_id: int) -> tuple[int, int]:
    """(count, a hash of every dialog's peer/top message) for messages.getDialogs."""
    row = await db.fetchrow(
        """
        SELECT count(*) AS n,
               COALESCE(sum(hashtextextended(peer_user_id::text || ':' || top_message, 0)), 0)
                 AS h
          FROM dialogs
         WHERE user_id = $1 AND folder_id = $2
        """,
        user_id,
        folder_id,
    )
    assert row is not None
    return int(row["n"]), int(row["h"])


async def get_peer_dialogs(db: Executor, user_id: int, peers: Sequence[int]) -> list[DialogRow]:
    rows = await db.fetch(
        f"""
        SELECT {_DIALOG_COLUMNS}
          FROM dialogs
         WHERE user_id = $1 AND peer_user_id = ANY($2::bigint[])
        """,
        user_id,
        list(peers),
    )
    return [from_row(DialogRow, r) for r in rows]


async def total_unread(db: Executor, user_id: int) -> int:
    return int(
        await db.fetchval(
            "SELECT COALESCE(sum(unread_count), 0) FROM dialogs WHERE user_id = $1", user_id
        )
    )
