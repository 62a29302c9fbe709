"""Dialog rows: one per chat an owner has, read by peer; the unread total."""

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
