"""Private messages, boxes, dialogs and the update log: one function per query."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.rows import from_row


class ReplyMessageIdInvalid(Exception):
    """The replied-to message is not one of the sender's messages in this chat."""


@dataclass(frozen=True, slots=True)
class SendParams:
    sender: int
    recipient: int
    random_id: int
    date: int
    message: str
    entities: bytes | None
    fwd_from: bytes | None
    silent: bool
    noforwards: bool
    media_unread: bool
    reply_to: int | None
    quote_text: str | None
    quote_entities: bytes | None
    quote_offset: int | None
    sender_pts: int
    sender_box: int
    recipient_pts: int | None  # None: write nothing for the recipient
    recipient_box: int | None
    exclude_auth_key_id: int | None
    exclude_session_id: int | None


@dataclass(frozen=True, slots=True)
class SendResult:
    duplicate: bool
    message_id: int
    sender_box: int
    sender_pts: int | None  # of the original send, for a duplicate
    recipient_box: int | None
    recipient_pts: int | None
    date: int
    # The folder of the recipient's dialog after the send (1: archived); None when the
    # recipient got nothing (a duplicate, a block, saved messages).
    recipient_folder_id: int | None = None


async def send_private_message_txn(conn: asyncpg.Connection, p: SendParams) -> SendResult:
    try:
        row = await conn.fetchrow(
            """
            SELECT duplicate, message_id, sender_box, sender_pts, recipient_box, recipient_pts,
                   msg_date, recipient_folder_id
              FROM telesrv_send_private_message(
                   p_sender => $1, p_recipient => $2, p_random_id => $3, p_date => $4,
                   p_message => $5, p_entities => $6, p_fwd_from => $7, p_silent => $8,
                   p_noforwards => $9, p_media_unread => $10, p_reply_to => $11,
                   p_quote_text => $12, p_quote_entities => $13, p_quote_offset => $14,
                   p_sender_pts => $15, p_sender_box => $16, p_recipient_pts => $17,
                   p_recipient_box => $18, p_exclude_auth_key_id => $19,
                   p_exclude_session_id => $20)
            """,
            p.sender,
            p.recipient,
            p.random_id,
            p.date,
            p.message,
            p.entities,
            p.fwd_from,
            p.silent,
            p.noforwards,
            p.media_unread,
            p.reply_to,
            p.quote_text,
            p.quote_entities,
            p.quote_offset,
            p.sender_pts,
            p.sender_box,
            p.recipient_pts,
            p.recipient_box,
            p.exclude_auth_key_id,
            p.exclude_session_id,
        )
    except asyncpg.RaiseError as e:
        if str(e) == "REPLY_MESSAGE_ID_INVALID":
            raise ReplyMessageIdInvalid() from None
        raise
    assert row is not None
    return SendResult(
        duplicate=row["duplicate"],
        message_id=row["message_id"],
        sender_box=row["sender_box"],
        sender_pts=row["sender_pts"],
        recipient_box=row["recipient_box"],
        recipient_pts=row["recipient_pts"],
        date=row["msg_date"],
        recipient_folder_id=row["recipient_folder_id"],
    )


@dataclass(frozen=True, slots=True)
class EarlierSend:
    """A send already stored under (sender, random_id), in the sender's view."""

    sender_box: int | None  # None: the sender has deleted it since
    sender_pts: int | None


async def find_send(db: Executor, sender: int, random_id: int) -> EarlierSend | None:
    """The earlier send of this random id, if any: one probe of the unique index; the
    box and its pts are looked up only for a retry."""
    row = await db.fetchrow(
        """
        SELECT b.box_id, e.pts
          FROM private_messages m
          LEFT JOIN message_boxes b ON b.owner_user_id = $1 AND b.sender_user_id = $1
                                   AND b.message_id = m.id AND NOT b.deleted
          LEFT JOIN user_update_events e ON e.user_id = $1 AND e.event_type = 'new_message'
                                        AND e.box_ids = ARRAY[b.box_id]
         WHERE m.sender_user_id = $1 AND m.random_id = $2
        """,
        sender,
        random_id,
    )
    return None if row is None else EarlierSend(sender_box=row["box_id"], sender_pts=row["pts"])


async def find_sends(
    db: Executor, sender: int, random_ids: Sequence[int]
) -> dict[int, EarlierSend]:
    """The earlier sends among these random ids (random_id -> send), in one statement:
    a batch (a forward) is checked for retries before any pts is taken."""
    rows = await db.fetch(
        """
        SELECT m.random_id, b.box_id, e.pts
          FROM private_messages m
          LEFT JOIN message_boxes b ON b.owner_user_id = $1 AND b.sender_user_id = $1
                                   AND b.message_id = m.id AND NOT b.deleted
          LEFT JOIN user_update_events e ON e.user_id = $1 AND e.event_type = 'new_message'
                                        AND e.box_ids = ARRAY[b.box_id]
         WHERE m.sender_user_id = $1 AND m.random_id = ANY($2::bigint[])
        """,
        sender,
        list(random_ids),
    )
    return {r["random_id"]: EarlierSend(r["box_id"], r["pts"]) for r in rows}


async def fill_pts(db: Executor, user_id: int, pts: Sequence[int], date: int) -> None:
    """Write 'noop' events for allocated pts that no transaction used."""
    await db.execute(
        "SELECT telesrv_fill_pts(p_user => $1, p_pts => $2, p_date => $3)", user_id, list(pts), date
    )


async def is_blocked(db: Executor, owner_user_id: int, blocked_user_id: int) -> bool:
    return bool(
        await db.fetchval(
            """
            SELECT EXISTS (SELECT 1 FROM contact_blocks
                            WHERE owner_user_id = $1 AND blocked_user_id = $2)
            """,
            owner_user_id,
            blocked_user_id,
        )
    )


async def has_blocks(db: Executor, owner_user_id: int) -> bool:
    """Whether the owner blocks anyone at all."""
    return bool(
        await db.fetchval(
            "SELECT EXISTS (SELECT 1 FROM contact_blocks WHERE owner_user_id = $1)",
            owner_user_id,
        )
    )


# -- reading messages ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BoxMessage:
    """A message as one owner sees it."""

    owner_user_id: int
    box_id: int
    peer_user_id: int
    sender_user_id: int
    out: bool
    date: int
    message: str
    entities: bytes | None
    fwd_from: bytes | None
    reply_to_msg_id: int | None
    quote_text: str | None
    quote_entities: bytes | None
    quote_offset: int | None
    silent: bool
    noforwards: bool
    media_unread: bool
    edit_date: int | None


_BOX_COLUMNS = """
    b.owner_user_id, b.box_id, b.peer_user_id, b.sender_user_id, b.out, b.date, m.message,
    m.entities, m.fwd_from, b.reply_to_msg_id, m.quote_text, m.quote_entities, m.quote_offset,
    b.silent, b.noforwards, b.media_unread, m.edit_date
"""


# Bodies are fetched per box after the LIMIT (a lateral lookup by primary key): a
# plain join lets the planner hash the chat's boxes over every private_messages
# partition instead.
_BODY_OF_BOX = """
    SELECT * FROM private_messages pm
     WHERE pm.sender_user_id = b.sender_user_id AND pm.id = b.message_id
    OFFSET 0
"""


def _box(r: asyncpg.Record) -> BoxMessage:
    return from_row(BoxMessage, r)


async def get_boxes(db: Executor, owner_user_id: int, box_ids: Sequence[int]) -> list[BoxMessage]:
    """The owner's visible messages among ``box_ids`` (missing/deleted ones are left out)."""
    rows = await db.fetch(
        f"""
        SELECT {_BOX_COLUMNS}
          FROM (SELECT * FROM message_boxes
                 WHERE owner_user_id = $1 AND box_id = ANY($2::integer[]) AND NOT deleted) b
         CROSS JOIN LATERAL ({_BODY_OF_BOX}) m
         ORDER BY b.box_id DESC
        """,
        owner_user_id,
        list(box_ids),
    )
    return [_box(r) for r in rows]


async def get_boxes_of_owners(db: Executor, keys: Sequence[tuple[int, int]]) -> list[BoxMessage]:
    """Visible messages by (owner, box_id) across owners: one query for an outbox batch."""
    rows = await db.fetch(
        f"""
        SELECT {_BOX_COLUMNS}
          FROM unnest($1::bigint[], $2::integer[]) AS k(owner_user_id, box_id)
         CROSS JOIN LATERAL (
               SELECT * FROM message_boxes mb
                WHERE mb.owner_user_id = k.owner_user_id AND mb.box_id = k.box_id
                  AND NOT mb.deleted
               OFFSET 0) b
         CROSS JOIN LATERAL ({_BODY_OF_BOX}) m
        """,
        [k[0] for k in keys],
        [k[1] for k in keys],
    )
    return [_box(r) for r in rows]


# -- answers bounded in bytes ----------------------------------------------------------

# What a message adds to an answer, estimated from its stored payloads plus an
# allowance for the constructor, ids, peers, date and flags. It is computed in SQL so
# that a page is cut before large bodies ever leave the database.
MESSAGE_OVERHEAD_BYTES = 96
BOX_SIZE = f"""
    (octet_length(m.message) + COALESCE(octet_length(m.entities), 0)
     + COALESCE(octet_length(m.fwd_from), 0) + COALESCE(octet_length(m.quote_text), 0)
     + COALESCE(octet_length(m.quote_entities), 0) + {MESSAGE_OVERHEAD_BYTES})
"""


def box_size(m: BoxMessage) -> int:
    """The estimate of BOX_SIZE for a message already in memory."""
    return (
        len(m.message.encode())
        + len(m.entities or b"")
        + len(m.fwd_from or b"")
        + len((m.quote_text or "").encode())
        + len(m.quote_entities or b"")
        + MESSAGE_OVERHEAD_BYTES
    )


@dataclass(frozen=True, slots=True)
class Page:
    boxes: list[BoxMessage]
    size: int  # estimated bytes of boxes (box_size summed)
    available: int  # rows the query found before the byte budget cut them

    @property
    def cut(self) -> bool:
        """Rows were left out to stay within the byte budget."""
        return self.available > len(self.boxes)


def within_budget(inner: str, order: str, budget: str) -> str:
    """The rows of ``inner`` (selecting _BOX_COLUMNS and ``size``) in ``order``, as many
    as fit in ``budget`` bytes, and always the first."""
    return f"""
        SELECT * FROM (
            SELECT t.*, sum(t.size) OVER (ORDER BY {order} ROWS UNBOUNDED PRECEDING) AS running,
                   count(*) OVER () AS available
              FROM ({inner}) t) u
         WHERE u.running <= {budget} OR u.running = u.size
         ORDER BY {order}
    """


def page_of(rows: Sequence[asyncpg.Record]) -> Page:
    boxes = [from_row(BoxMessage, r) for r in rows]
    size = sum(int(r["size"]) for r in rows)
    return Page(boxes, size, int(rows[0]["available"]) if rows else 0)


async def get_boxes_within(
    db: Executor, owner_user_id: int, box_ids: Sequence[int], budget: int
) -> Page:
    """The owner's visible messages among ``box_ids``, in the given order, as many as fit
    in ``budget`` bytes (missing/deleted ones are left out)."""
    inner = f"""
        SELECT {_BOX_COLUMNS}, {BOX_SIZE} AS size, k.ord
          FROM unnest($2::integer[]) WITH ORDINALITY AS k(box_id, ord)
         CROSS JOIN LATERAL (
               SELECT * FROM message_boxes mb
                WHERE mb.owner_user_id = $1 AND mb.box_id = k.box_id AND NOT mb.deleted
               OFFSET 0) b
         CROSS JOIN LATERAL ({_BODY_OF_BOX}) m
    """
    rows = await db.fetch(within_budget(inner, "ord", "$3"), owner_user_id, list(box_ids), budget)
    return page_of(rows)


async def history_page(
    db: Executor,
    owner_user_id: int,
    peer_user_id: int,
    *,
    above: int,
    below: int | None,
    limit: int,
    budget: int,
    skip: int = 0,
    ascending: bool = False,
) -> Page:
    """The chat's messages with above < box_id < below (None: no upper bound), newest
    first (or oldest first), after skipping ``skip``; at most ``limit`` of them and as
    many as fit in ``budget`` bytes."""
    order = "ASC" if ascending else "DESC"
    inner = f"""
        SELECT {_BOX_COLUMNS}, {BOX_SIZE} AS size
          FROM (SELECT * FROM message_boxes
                 WHERE owner_user_id = $1 AND peer_user_id = $2 AND NOT deleted
                   AND box_id > $3 AND ($4::integer IS NULL OR box_id < $4)
                 ORDER BY box_id {order}
                 OFFSET $5 LIMIT $6) b
         CROSS JOIN LATERAL ({_BODY_OF_BOX}) m
    """
    rows = await db.fetch(
        within_budget(inner, f"box_id {order}", "$7"),
        owner_user_id,
        peer_user_id,
        above,
        below,
        skip,
        limit,
        budget,
    )
    return page_of(rows)


async def history_ids(
    db: Executor,
    owner_user_id: int,
    peer_user_id: int,
    *,
    above: int,
    below: int | None,
    limit: int,
    ascending: bool,
) -> list[int]:
    """Only the ids of :func:`history_page` (no bodies, no budget)."""
    order = "ASC" if ascending else "DESC"
    rows = await db.fetch(
        f"""
        SELECT box_id FROM message_boxes
         WHERE owner_user_id = $1 AND peer_user_id = $2 AND NOT deleted
           AND box_id > $3 AND ($4::integer IS NULL OR box_id < $4)
         ORDER BY box_id {order}
         LIMIT $5
        """,
        owner_user_id,
        peer_user_id,
        above,
        below,
        limit,
    )
    return [r["box_id"] for r in rows]


async def newest_id_before(
    db: Executor, owner_user_id: int, peer_user_id: int, date: int
) -> int | None:
    """The chat's newest message sent before ``date``: where an offset_date points."""
    value = await db.fetchval(
        """
        SELECT box_id FROM message_boxes
         WHERE owner_user_id = $1 AND peer_user_id = $2 AND NOT deleted AND date < $3
         ORDER BY box_id DESC
         LIMIT 1
        """,
        owner_user_id,
        peer_user_id,
        date,
    )
    return int(value) if value is not None else None


async def count_history(db: Executor, owner_user_id: int, peer_user_id: int) -> int:
    return int(
        await db.fetchval(
            """
            SELECT count(*) FROM message_boxes
             WHERE owner_user_id = $1 AND peer_user_id = $2 AND NOT deleted
            """,
            owner_user_id,
            peer_user_id,
        )
    )


# -- dialogs ----------------------------------------------------------------------------


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


# -- read receipts -----------------------------------------------------------------


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
) -> ReadResult:
    """Advance the reader's inbox watermark and, with it, the sender's outbox watermark.

    Both pts were allocated before; the caller fills with noops what stays unused.
    """
    dialog = await conn.fetchrow(
        """
        SELECT read_inbox_max_id FROM dialogs
         WHERE user_id = $1 AND peer_user_id = $2
           FOR UPDATE
        """,
        reader,
        peer,
    )
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


# -- the update log ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UpdateEvent:
    user_id: int
    pts: int
    pts_count: int
    event_type: str
    date: int
    peer_user_id: int | None
    max_id: int | None
    box_ids: list[int] | None
    payload: Any


_EVENT_COLUMNS = "user_id, pts, pts_count, event_type, date, peer_user_id, max_id, box_ids, payload"


async def top_pts(db: Executor, user_id: int, window: int) -> list[tuple[int, int]]:
    """(pts, pts_count) of the newest ``window`` events, descending. An event covers the
    pts range pts - pts_count + 1 .. pts (a delete of n ids takes n pts)."""
    rows = await db.fetch(
        """
        SELECT pts, pts_count FROM user_update_events
         WHERE user_id = $1 ORDER BY pts DESC LIMIT $2
        """,
        user_id,
        window,
    )
    return [(r["pts"], r["pts_count"]) for r in rows]


async def events_after(db: Executor, user_id: int, pts: int, limit: int) -> list[UpdateEvent]:
    rows = await db.fetch(
        f"""
        SELECT {_EVENT_COLUMNS} FROM user_update_events
         WHERE user_id = $1 AND pts > $2
         ORDER BY pts
         LIMIT $3
        """,
        user_id,
        pts,
        limit,
    )
    return [from_row(UpdateEvent, r) for r in rows]


async def events_at(db: Executor, keys: Sequence[tuple[int, int]]) -> list[UpdateEvent]:
    """Events by (user_id, pts), for the dispatcher's batches."""
    rows = await db.fetch(
        f"""
        SELECT {", ".join("e." + c.strip() for c in _EVENT_COLUMNS.split(","))}
          FROM unnest($1::bigint[], $2::integer[]) AS k(user_id, pts)
          JOIN user_update_events e ON e.user_id = k.user_id AND e.pts = k.pts
        """,
        [k[0] for k in keys],
        [k[1] for k in keys],
    )
    return [from_row(UpdateEvent, r) for r in rows]


async def count_events_after(db: Executor, user_id: int, pts: int, cap: int) -> int:
    return int(
        await db.fetchval(
            """
            SELECT count(*) FROM (
                SELECT 1 FROM user_update_events WHERE user_id = $1 AND pts > $2 LIMIT $3
            ) t
            """,
            user_id,
            pts,
            cap,
        )
    )


async def save_update_state(
    db: Executor, auth_key_id: int, user_id: int, pts: int, date: int
) -> None:
    """What this device has consumed (update_states)."""
    await db.execute(
        """
        INSERT INTO update_states (auth_key_id, user_id, pts, date, updated_at)
        VALUES ($1, $2, $3, $4, now())
        ON CONFLICT (auth_key_id, user_id) DO UPDATE
           SET pts = GREATEST(update_states.pts, EXCLUDED.pts), date = EXCLUDED.date,
               updated_at = EXCLUDED.updated_at
        """,
        auth_key_id,
        user_id,
        pts,
        date,
    )


async def append_event_txn(
    conn: asyncpg.Connection,
    user_id: int,
    pts: int,
    event_type: str,
    date: int,
    *,
    peer_user_id: int | None = None,
    payload: dict[str, Any] | None = None,
    exclude_auth_key_id: int | None = None,
    exclude_session_id: int | None = None,
) -> None:
    """One owner-view event with pts_count 1 and its outbox row, in the caller's transaction."""
    await conn.execute(
        """
        SELECT telesrv_append_event(
               p_user_id => $1, p_pts => $2, p_pts_count => 1, p_event_type => $3,
               p_date => $4, p_peer_user_id => $5, p_payload => $6,
               p_exclude_auth_key_id => $7, p_exclude_session_id => $8)
        """,
        user_id,
        pts,
        event_type,
        date,
        peer_user_id,
        payload,
        exclude_auth_key_id,
        exclude_session_id,
    )


async def event_dates_after(
    db: Executor, user_id: int, pts: int, limit: int
) -> list[tuple[int, int, int]]:
    """(pts, pts_count, date) of the first events above ``pts``: is a hole stale?"""
    rows = await db.fetch(
        """
        SELECT pts, pts_count, date FROM user_update_events
         WHERE user_id = $1 AND pts > $2 ORDER BY pts LIMIT $3
        """,
        user_id,
        pts,
        limit,
    )
    return [(r["pts"], r["pts_count"], r["date"]) for r in rows]


# -- consistency checks (benchmarks and operators) ------------------------------------------


async def count_messages_sent_by(db: Executor, first_user: int) -> int:
    """Messages whose sender id is >= first_user."""
    return int(
        await db.fetchval(
            "SELECT count(*) FROM private_messages WHERE sender_user_id >= $1", first_user
        )
    )


async def count_duplicate_sends(db: Executor, first_user: int) -> int:
    """Messages stored more than once for one (sender, random_id): must be 0."""
    return int(
        await db.fetchval(
            """
            SELECT count(*) - count(DISTINCT (sender_user_id, random_id))
              FROM private_messages WHERE sender_user_id >= $1
            """,
            first_user,
        )
    )


async def count_users_with_pts_holes(db: Executor, first_user: int) -> int:
    """Accounts whose log does not cover 1..max(pts) exactly: must be 0."""
    return int(
        await db.fetchval(
            """
            SELECT count(*) FROM (
                SELECT user_id FROM user_update_events WHERE user_id >= $1
                 GROUP BY user_id HAVING max(pts) <> sum(pts_count)
            ) t
            """,
            first_user,
        )
    )
