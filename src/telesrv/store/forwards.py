"""Forwards: the messages copied and the copies written in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.messages import _BODY_OF_BOX, _BOX_COLUMNS, BoxMessage, SendResult, _box


async def get_chat_boxes(
    db: Executor, owner_user_id: int, peer_user_id: int, box_ids: Sequence[int]
) -> list[BoxMessage]:
    """The owner's visible messages among ``box_ids`` in the chat with ``peer_user_id``."""
    rows = await db.fetch(
        f"""
        SELECT {_BOX_COLUMNS}
          FROM (SELECT * FROM message_boxes
                 WHERE owner_user_id = $1 AND box_id = ANY($2::integer[])
                   AND peer_user_id = $3 AND NOT deleted) b
         CROSS JOIN LATERAL ({_BODY_OF_BOX}) m
        """,
        owner_user_id,
        list(box_ids),
        peer_user_id,
    )
    return [_box(r) for r in rows]


@dataclass(frozen=True, slots=True)
class ForwardCopy:
    """One new message of a forward, with the ids and pts allocated for it."""

    random_id: int
    message: str
    entities: bytes | None
    fwd_from: bytes | None
    sender_pts: int
    sender_box: int
    recipient_pts: int | None  # None: nothing is written for the recipient
    recipient_box: int | None
    # The source's media, copied (the same photo or document), and the copy's album.
    media: dict[str, Any] | None = None
    media_id: int | None = None
    media_kind: str | None = None
    media_unread: bool = False
    grouped_id: int | None = None
    # The owner's box the copy is made from: a copy with no media of its own takes the
    # source's place in the link filter (a text with a link stays one when forwarded).
    source_box: int | None = None


@dataclass(frozen=True, slots=True)
class ForwardBatch:
    sender: int
    recipient: int
    date: int
    silent: bool
    noforwards: bool
    copies: list[ForwardCopy]
    exclude_auth_key_id: int | None
    exclude_session_id: int | None


async def forward_txn(conn: asyncpg.Connection, batch: ForwardBatch) -> list[SendResult]:
    """Send every copy through the send function (a forward is a send of a copy), in
    source order, in one statement: all or nothing."""
    copies = batch.copies
    rows = await conn.fetch(
        """
        SELECT r.duplicate, r.message_id, r.sender_box, r.sender_pts, r.recipient_box,
               r.recipient_pts, r.msg_date, r.recipient_folder_id, r.sender_bar_closed
          FROM unnest($1::bigint[], $2::text[], $3::bytea[], $4::bytea[],
                      $5::integer[], $6::integer[], $7::integer[], $8::integer[],
                      $16::jsonb[], $17::bigint[], $18::text[], $19::boolean[], $20::bigint[],
                      $21::integer[])
               WITH ORDINALITY AS c(random_id, message, entities, fwd_from,
                                    sender_pts, sender_box, recipient_pts, recipient_box,
                                    media, media_id, media_kind, media_unread, grouped_id,
                                    source_box, ord)
         CROSS JOIN LATERAL telesrv_send_private_message(
               p_sender => $9, p_recipient => $10, p_random_id => c.random_id, p_date => $11,
               p_message => c.message, p_entities => c.entities, p_fwd_from => c.fwd_from,
               p_silent => $12, p_noforwards => $13, p_media_unread => c.media_unread,
               p_reply_to => NULL, p_quote_text => NULL, p_quote_entities => NULL,
               p_quote_offset => NULL, p_sender_pts => c.sender_pts,
               p_sender_box => c.sender_box, p_recipient_pts => c.recipient_pts,
               p_recipient_box => c.recipient_box, p_exclude_auth_key_id => $14,
               p_exclude_session_id => $15, p_media => c.media, p_media_id => c.media_id,
               p_media_kind => coalesce(c.media_kind, (
                   SELECT s.media_kind FROM message_search s
                    WHERE s.owner_user_id = $9 AND s.box_id = c.source_box
                      AND s.media_kind = 'url')),
               p_grouped_id => c.grouped_id) r
         ORDER BY c.ord
        """,
        [c.random_id for c in copies],
        [c.message for c in copies],
        [c.entities for c in copies],
        [c.fwd_from for c in copies],
        [c.sender_pts for c in copies],
        [c.sender_box for c in copies],
        [c.recipient_pts for c in copies],
        [c.recipient_box for c in copies],
        batch.sender,
        batch.recipient,
        batch.date,
        batch.silent,
        batch.noforwards,
        batch.exclude_auth_key_id,
        batch.exclude_session_id,
        [c.media for c in copies],
        [c.media_id for c in copies],
        [c.media_kind for c in copies],
        [c.media_unread for c in copies],
        [c.grouped_id for c in copies],
        [c.source_box for c in copies],
    )
    return [
        SendResult(
            duplicate=r["duplicate"],
            message_id=r["message_id"],
            sender_box=r["sender_box"],
            sender_pts=r["sender_pts"],
            recipient_box=r["recipient_box"],
            recipient_pts=r["recipient_pts"],
            date=r["msg_date"],
            recipient_folder_id=r["recipient_folder_id"],
            sender_bar_closed=r["sender_bar_closed"],
        )
        for r in rows
    ]
