"""Drafts, one per chat. One function per query; ``_txn`` ones run in the caller's
transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.rows import from_row


@dataclass(frozen=True, slots=True)
class DraftRow:
    peer_user_id: int
    message: str
    entities: bytes | None
    reply_to_msg_id: int | None
    no_webpage: bool
    invert_media: bool
    date: int


_DRAFT_COLUMNS = "peer_user_id, message, entities, reply_to_msg_id, no_webpage, invert_media, date"


async def save_draft_txn(conn: asyncpg.Connection, user_id: int, draft: DraftRow) -> None:
    await conn.execute(
        """
        INSERT INTO dialog_drafts (user_id, peer_user_id, message, entities, reply_to_msg_id,
                                   no_webpage, invert_media, date)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
        ON CONFLICT (user_id, peer_user_id) DO UPDATE
           SET message = EXCLUDED.message, entities = EXCLUDED.entities,
               reply_to_msg_id = EXCLUDED.reply_to_msg_id, no_webpage = EXCLUDED.no_webpage,
               invert_media = EXCLUDED.invert_media, date = EXCLUDED.date
        """,
        user_id,
        draft.peer_user_id,
        draft.message,
        draft.entities,
        draft.reply_to_msg_id,
        draft.no_webpage,
        draft.invert_media,
        draft.date,
    )


async def delete_drafts_txn(
    conn: asyncpg.Connection, user_id: int, peers: Sequence[int] | None
) -> list[int]:
    """Delete the drafts of ``peers`` (None: all); the peers that had one."""
    rows = await conn.fetch(
        """
        DELETE FROM dialog_drafts
         WHERE user_id = $1 AND ($2::bigint[] IS NULL OR peer_user_id = ANY($2::bigint[]))
        RETURNING peer_user_id
        """,
        user_id,
        None if peers is None else list(peers),
    )
    return sorted(r["peer_user_id"] for r in rows)


async def drafts(db: Executor, user_id: int, peers: Sequence[int] | None = None) -> list[DraftRow]:
    """The user's drafts (of ``peers`` only, when given), newest first."""
    rows = await db.fetch(
        f"""
        SELECT {_DRAFT_COLUMNS} FROM dialog_drafts
         WHERE user_id = $1 AND ($2::bigint[] IS NULL OR peer_user_id = ANY($2::bigint[]))
         ORDER BY date DESC, peer_user_id DESC
        """,
        user_id,
        None if peers is None else list(peers),
    )
    return [from_row(DraftRow, r) for r in rows]
