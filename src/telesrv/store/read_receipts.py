"""Read receipts: history reads, content reads and outbox read dates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.store.db import Executor


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """What a readHistory would change, seen before allocating pts."""

    new_inbox_max: int  # 0: nothing to mark read


async def plan_read_history(db: Executor, reader: int, peer: int, max_id: int) -> ReadPlan:
    value = await db.fetchval(
        """
        SELECT COALESCE(max(b.box_id), 0)
          FROM message_boxes b
          JOIN dialogs d ON d.user_id = b.owner_user_id AND d.peer_user_id = b.peer_user_id
         WHERE b.owner_user_id = $1 AND b.peer_user_id = $2 AND NOT b.out AND NOT b.deleted
           AND b.box_id > d.read_inbox_max_id AND ($3 <= 0 OR b.box_id <= $3)
        """,
        reader,
        peer,
        max_id,
    )
    return ReadPlan(int(value))


@dataclass(frozen=True, slots=True)
class ReadResult:
    reader_pts: int | None  # None: nothing advanced
    inbox_max_id: int
    still_unread: int
    sender_pts: int | None
    outbox_max_id: int | None  # in the sender's ids


async def read_history_txn(
    conn: asyncpg.Connection,
    reader: int,
    peer: int,
    max_id: int,
    date: int,
    reader_pts: int,
    sender_pts: int | None,
    exclude_auth_key_id: int,
    exclude_session_id: int,
    distributed: bool = False,
) -> ReadResult:
    """Advance the reader's inbox watermark and, with it, the sender's outbox watermark.

    Both pts were allocated before; the caller fills with noops what stays unused.
    ``distributed``: the shapes for Citus.
    """
    # Both dialog rows are locked first, in ascending user id order, as the send does:
    # a read of B while A sends to B (or two users reading each other's chat) must not
    # take the two rows in opposite orders and deadlock.
    if distributed:
        # Citus locks rows of one shard per statement: one user's row at a time, in
        # the same ascending order.
        locked = []
        for user, other in sorted({(reader, peer), (peer, reader)}):
            locked += await conn.fetch(
                """
                SELECT user_id, read_inbox_max_id FROM dialogs
                 WHERE user_id = $1 AND peer_user_id = $2
                   FOR UPDATE
                """,
                user,
                other,
            )
    else:
        locked = await conn.fetch(
            """
            SELECT user_id, read_inbox_max_id FROM dialogs
             WHERE (user_id = $1 AND peer_user_id = $2) OR (user_id = $2 AND peer_user_id = $1)
             ORDER BY user_id
               FOR UPDATE
            """,
            reader,
            peer,
        )
    dialog = next((r for r in locked if r["user_id"] == reader), None)
    if dialog is None:
        return ReadResult(None, 0, 0, None, None)
    new_max = await conn.fetchval(
        """
        SELECT COALESCE(max(box_id), 0) FROM message_boxes
         WHERE owner_user_id = $1 AND peer_user_id = $2 AND NOT out AND NOT deleted
           AND box_id > $3 AND ($4 <= 0 OR box_id <= $4)
        """,
        reader,
        peer,
        dialog["read_inbox_max_id"],
        max_id,
    )
    if not new_max:
        return ReadResult(None, dialog["read_inbox_max_id"], 0, None, None)
    still_unread = await conn.fetchval(
        """
        WITH counted AS (
            SELECT count(*) AS n FROM message_boxes
             WHERE owner_user_id = $1 AND peer_user_id = $2 AND NOT out AND NOT deleted
               AND box_id > $3
        )
        UPDATE dialogs SET read_inbox_max_id = $3, unread_count = counted.n
          FROM counted
         WHERE user_id = $1 AND peer_user_id = $2
        RETURNING unread_count
        """,
        reader,
        peer,
        new_max,
    )
    await conn.execute(
        """
        SELECT telesrv_append_event(
               p_user_id => $1, p_pts => $2, p_pts_count => 1,
               p_event_type => 'read_history_inbox', p_date => $3, p_peer_user_id => $4,
               p_max_id => $5, p_payload => jsonb_build_object('still_unread', $6::int),
               p_exclude_auth_key_id => $7, p_exclude_session_id => $8)
        """,
        reader,
        reader_pts,
        date,
        peer,
        new_max,
        still_unread,
        exclude_auth_key_id,
        exclude_session_id,
    )
    if sender_pts is None or peer == reader:
        return ReadResult(reader_pts, new_max, still_unread, None, None)
    # The sender's newest own message at or below their id of the newest message just
    # read: when they deleted that one, the watermark still moves to the one before.
    outbox_max = await conn.fetchval(
        """
        WITH read_msg AS (
            SELECT sender_user_id, message_id FROM message_boxes
             WHERE owner_user_id = $1 AND box_id = $2
        ), read_box AS (
            SELECT b.box_id FROM message_boxes b, read_msg r
             WHERE b.owner_user_id = $3 AND b.sender_user_id = r.sender_user_id
               AND b.message_id = r.message_id
        ), sender_box AS (
            SELECT b.box_id FROM message_boxes b
             WHERE b.owner_user_id = $3 AND b.peer_user_id = $1 AND b.out AND NOT b.deleted
               AND b.box_id <= (SELECT box_id FROM read_box)
             ORDER BY b.box_id DESC
             LIMIT 1
        )
        UPDATE dialogs d SET read_outbox_max_id = s.box_id
          FROM sender_box s
         WHERE d.user_id = $3 AND d.peer_user_id = $1 AND d.read_outbox_max_id < s.box_id
        RETURNING d.read_outbox_max_id
        """,
        reader,
        new_max,
        peer,
    )
    if outbox_max is None:
        return ReadResult(reader_pts, new_max, still_unread, None, None)
    await conn.execute(
        """
        SELECT telesrv_append_event(
               p_user_id => $1, p_pts => $2, p_pts_count => 1,
               p_event_type => 'read_history_outbox', p_date => $3, p_peer_user_id => $4,
               p_max_id => $5)
        """,
        peer,
        sender_pts,
        date,
        reader,
        outbox_max,
    )
    return ReadResult(reader_pts, new_max, still_unread, sender_pts, outbox_max)


async def count_unread_contents(db: Executor, owner_user_id: int, box_ids: Sequence[int]) -> int:
    """How many of ``box_ids`` still have unread media or reactions (before allocating)."""
    return int(
        await db.fetchval(
            """
            SELECT count(*) FROM message_boxes
             WHERE owner_user_id = $1 AND box_id = ANY($2::integer[]) AND NOT deleted
               AND (media_unread OR reaction_unread)
            """,
            owner_user_id,
            list(box_ids),
        )
    )


async def read_contents_txn(
    conn: asyncpg.Connection,
    owner_user_id: int,
    box_ids: Sequence[int],
    pts: int,
    date: int,
    exclude_auth_key_id: int | None,
    exclude_session_id: int | None,
) -> list[int]:
    """Clear the flags of the owner's boxes among ``box_ids`` and log one
    read_message_contents event at ``pts`` (pts_count 1). When nothing is left to
    clear (a concurrent call won), ``pts`` becomes a noop. Returns the cleared ids."""
    cleared = await conn.fetch(
        """
        UPDATE message_boxes SET media_unread = false, reaction_unread = false
         WHERE owner_user_id = $1 AND box_id = ANY($2::integer[]) AND NOT deleted
           AND (media_unread OR reaction_unread)
        RETURNING box_id
        """,
        owner_user_id,
        list(box_ids),
    )
    ids = sorted(r["box_id"] for r in cleared)
    if not ids:
        await conn.execute(
            "SELECT telesrv_fill_pts(p_user => $1, p_pts => $2, p_date => $3)",
            owner_user_id,
            [pts],
            date,
        )
        return []
    await conn.execute(
        """
        SELECT telesrv_append_event(
               p_user_id => $1, p_pts => $2, p_pts_count => 1,
               p_event_type => 'read_message_contents', p_date => $3, p_box_ids => $4,
               p_exclude_auth_key_id => $5, p_exclude_session_id => $6)
        """,
        owner_user_id,
        pts,
        date,
        ids,
        exclude_auth_key_id,
        exclude_session_id,
    )
    return ids


@dataclass(frozen=True, slots=True)
class OutboxRead:
    is_outgoing: bool  # msg_id is one of the owner's visible outgoing messages in the chat
    date: int | None  # when the peer first read up to it; None: not read yet


async def outbox_read_date(
    db: Executor, owner_user_id: int, peer_user_id: int, box_id: int
) -> OutboxRead:
    """The first durable read_history_outbox event covering ``box_id``.
    The outbox read watermark only grows, so the first event with max_id >= box_id is
    the smallest such max_id: one step of the partial index."""
    row = await db.fetchrow(
        """
        SELECT EXISTS (SELECT 1 FROM message_boxes
                        WHERE owner_user_id = $1 AND box_id = $3 AND peer_user_id = $2
                          AND out AND NOT deleted) AS is_outgoing,
               (SELECT date FROM user_update_events
                 WHERE user_id = $1 AND event_type = 'read_history_outbox'
                   AND peer_user_id = $2 AND max_id >= $3
                 ORDER BY max_id, date
                 LIMIT 1) AS read_date
        """,
        owner_user_id,
        peer_user_id,
        box_id,
    )
    assert row is not None
    return OutboxRead(row["is_outgoing"], row["read_date"])
