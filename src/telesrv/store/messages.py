"""Private messages and their boxes: the send, the box reads and size-bounded pages."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from telesrv.store.db import Executor, refusal_named, sql_refusal
from telesrv.store.frozen_slots import quick_init
from telesrv.store.refusal import DomainError
from telesrv.store.rows import from_row


@quick_init
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
    media: dict[str, Any] | None = None  # the snapshot a message carries
    media_id: int | None = None  # the photo's or document's id
    media_kind: str | None = None  # for the shared-media search filters
    grouped_id: int | None = None  # the album
    # Seconds the send's outbox rows stay held by this process, which pushes them
    # itself (see telesrv_hold_outbox); None: due at once, for the outbox workers.
    outbox_hold: float | None = None


@quick_init
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
    # The sender's action bar in this chat was closed before the send (None: a duplicate).
    sender_bar_closed: bool | None = None


async def send_private_message_txn(conn: asyncpg.Connection, p: SendParams) -> SendResult:
    try:
        row = await conn.fetchrow(
            """
            SELECT duplicate, message_id, sender_box, sender_pts, recipient_box, recipient_pts,
                   msg_date, recipient_folder_id, sender_bar_closed
              FROM telesrv_send_private_message(
                   p_sender => $1, p_recipient => $2, p_random_id => $3,
                   p_date => telesrv_hold_outbox(p_seconds => $25, p_pass => $4),
                   p_message => $5, p_entities => $6, p_fwd_from => $7, p_silent => $8,
                   p_noforwards => $9, p_media_unread => $10, p_reply_to => $11,
                   p_quote_text => $12, p_quote_entities => $13, p_quote_offset => $14,
                   p_sender_pts => $15, p_sender_box => $16, p_recipient_pts => $17,
                   p_recipient_box => $18, p_exclude_auth_key_id => $19,
                   p_exclude_session_id => $20, p_media => $21, p_media_id => $22,
                   p_media_kind => $23, p_grouped_id => $24)
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
            p.media,
            p.media_id,
            p.media_kind,
            p.grouped_id,
            p.outbox_hold,
        )
    except asyncpg.RaiseError as e:
        raise sql_refusal(e) from None
    assert row is not None
    return _send_result(row)


def _send_result(row: asyncpg.Record) -> SendResult:
    return SendResult(
        duplicate=row["duplicate"],
        message_id=row["message_id"],
        sender_box=row["sender_box"],
        sender_pts=row["sender_pts"],
        recipient_box=row["recipient_box"],
        recipient_pts=row["recipient_pts"],
        date=row["msg_date"],
        recipient_folder_id=row["recipient_folder_id"],
        sender_bar_closed=row["sender_bar_closed"],
    )


async def send_private_messages_txn(
    conn: asyncpg.Connection, batch: Sequence[SendParams]
) -> list[SendResult]:
    """Several sends of one sender (an album) in one statement, in the given order:
    all commit or none does. Each is the send function's, as a single send calls it;
    the first send's ``outbox_hold`` holds the rows of them all."""
    columns = [[getattr(p, name) for p in batch] for name in _BATCH_COLUMNS]
    try:
        rows = await conn.fetch(
            """
            SELECT r.duplicate, r.message_id, r.sender_box, r.sender_pts, r.recipient_box,
                   r.recipient_pts, r.msg_date, r.recipient_folder_id, r.sender_bar_closed
              FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::integer[],
                          $5::text[], $6::bytea[], $7::bytea[], $8::boolean[],
                          $9::boolean[], $10::boolean[], $11::integer[], $12::text[],
                          $13::bytea[], $14::integer[], $15::integer[], $16::integer[],
                          $17::integer[], $18::integer[], $19::bigint[], $20::bigint[],
                          $21::jsonb[], $22::bigint[], $23::text[], $24::bigint[])
                   WITH ORDINALITY AS c(sender, recipient, random_id, date, message,
                                        entities, fwd_from, silent, noforwards,
                                        media_unread, reply_to, quote_text,
                                        quote_entities, quote_offset, sender_pts,
                                        sender_box, recipient_pts, recipient_box,
                                        exclude_auth_key_id, exclude_session_id, media,
                                        media_id, media_kind, grouped_id, ord)
             CROSS JOIN LATERAL telesrv_send_private_message(
                   p_sender => c.sender, p_recipient => c.recipient,
                   p_random_id => c.random_id,
                   p_date => telesrv_hold_outbox(p_seconds => $25, p_pass => c.date),
                   p_message => c.message,
                   p_entities => c.entities, p_fwd_from => c.fwd_from,
                   p_silent => c.silent, p_noforwards => c.noforwards,
                   p_media_unread => c.media_unread, p_reply_to => c.reply_to,
                   p_quote_text => c.quote_text, p_quote_entities => c.quote_entities,
                   p_quote_offset => c.quote_offset, p_sender_pts => c.sender_pts,
                   p_sender_box => c.sender_box, p_recipient_pts => c.recipient_pts,
                   p_recipient_box => c.recipient_box,
                   p_exclude_auth_key_id => c.exclude_auth_key_id,
                   p_exclude_session_id => c.exclude_session_id, p_media => c.media,
                   p_media_id => c.media_id, p_media_kind => c.media_kind,
                   p_grouped_id => c.grouped_id) r
             ORDER BY c.ord
            """,
            *columns,
            batch[0].outbox_hold,
        )
    except asyncpg.RaiseError as e:
        raise sql_refusal(e) from None
    return [_send_result(r) for r in rows]


async def send_group_txn(
    conn: asyncpg.Connection, group: Sequence[SendParams]
) -> list[SendResult | Exception]:
    """Lone sends of any senders committed together, in one statement, in the given
    order: each the send function's result, or what its refusal raises (that send alone
    wrote nothing; the others commit). Each send's outbox rows are held as it asks. The
    group is written a statement per table (telesrv_send_group), not a send at a time."""
    columns = [[getattr(p, name) for p in group] for name in _BATCH_COLUMNS + ("outbox_hold",)]
    rows = await conn.fetch(
        """
        SELECT ord, duplicate, message_id, sender_box, sender_pts, recipient_box,
               recipient_pts, msg_date, recipient_folder_id, sender_bar_closed, refusal
          FROM telesrv_send_group(
               p_sender => $1::bigint[], p_recipient => $2::bigint[],
               p_random_id => $3::bigint[], p_date => $4::integer[],
               p_message => $5::text[], p_entities => $6::bytea[],
               p_fwd_from => $7::bytea[], p_silent => $8::boolean[],
               p_noforwards => $9::boolean[], p_media_unread => $10::boolean[],
               p_reply_to => $11::integer[], p_quote_text => $12::text[],
               p_quote_entities => $13::bytea[], p_quote_offset => $14::integer[],
               p_sender_pts => $15::integer[], p_sender_box => $16::integer[],
               p_recipient_pts => $17::integer[], p_recipient_box => $18::integer[],
               p_exclude_auth_key_id => $19::bigint[],
               p_exclude_session_id => $20::bigint[], p_media => $21::jsonb[],
               p_media_id => $22::bigint[], p_media_kind => $23::text[],
               p_grouped_id => $24::bigint[], p_outbox_hold => $25::double precision[])
        """,
        *columns,
    )
    outcomes: list[SendResult | Exception | None] = [None] * len(group)
    for r in rows:
        outcomes[r["ord"] - 1] = (
            _send_result(r) if r["refusal"] is None else refusal_named(r["refusal"])
        )
    missing = [i for i, o in enumerate(outcomes) if o is None]
    if missing:
        raise RuntimeError(f"the group's statement answered no row for sends {missing}")
    return [o for o in outcomes if o is not None]


async def send_units_txn(
    conn: asyncpg.Connection, units: Sequence[Sequence[SendParams]]
) -> list[list[SendResult] | Exception]:
    """Units of sends committed together, in the caller's transaction: the lone sends in
    one statement (as ``send_group_txn``), each unit of several (an album, a forward's
    copies: all or none) in a statement of its own under a savepoint. Each unit's
    results, or its refusal (that unit alone wrote nothing; the others commit)."""
    return await units_txn(conn, units, send_group_txn, send_private_messages_txn)


LoneSendsTxn = Callable[
    [asyncpg.Connection, Sequence[SendParams]], Awaitable[list[SendResult | Exception]]
]
UnitTxn = Callable[[asyncpg.Connection, Sequence[SendParams]], Awaitable[list[SendResult]]]


async def units_txn(
    conn: asyncpg.Connection,
    units: Sequence[Sequence[SendParams]],
    lone_txn: LoneSendsTxn,
    unit_txn: UnitTxn,
) -> list[list[SendResult] | Exception]:
    """A group's units in the caller's transaction: its lone sends together by
    ``lone_txn`` (each send's result or refusal), then each unit of several by
    ``unit_txn`` under a savepoint, so that a refusal undoes that unit alone."""
    outcomes: dict[int, list[SendResult] | Exception] = {}
    lone = [i for i, unit in enumerate(units) if len(unit) == 1]
    if lone:
        written = await lone_txn(conn, [units[i][0] for i in lone])
        for i, outcome in zip(lone, written, strict=True):
            outcomes[i] = outcome if isinstance(outcome, Exception) else [outcome]
    for i, unit in enumerate(units):
        if len(unit) > 1:
            try:
                async with conn.transaction():
                    outcomes[i] = await unit_txn(conn, unit)
            except DomainError as e:
                outcomes[i] = e
    return [outcomes[i] for i in range(len(units))]


# SendParams' fields in the order of the batch statement's parameters.
_BATCH_COLUMNS = (
    "sender", "recipient", "random_id", "date", "message", "entities", "fwd_from", "silent",
    "noforwards", "media_unread", "reply_to", "quote_text", "quote_entities", "quote_offset",
    "sender_pts", "sender_box", "recipient_pts", "recipient_box", "exclude_auth_key_id",
    "exclude_session_id", "media", "media_id", "media_kind", "grouped_id",
)  # fmt: skip


async def chat_boxes_present(
    db: Executor, owner_user_id: int, peer_user_id: int, box_ids: Sequence[int]
) -> set[int]:
    """Those of ``box_ids`` that are the owner's visible messages in the chat with
    ``peer_user_id``."""
    rows = await db.fetch(
        """
        SELECT box_id FROM message_boxes
         WHERE owner_user_id = $1 AND box_id = ANY($2::integer[])
           AND peer_user_id = $3 AND NOT deleted
        """,
        owner_user_id,
        list(box_ids),
        peer_user_id,
    )
    return {r["box_id"] for r in rows}


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


# -- reading messages ---------------------------------------------------------------


@quick_init
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
    media: dict[str, Any] | None = None  # the snapshot stored with the message
    grouped_id: int | None = None
    # [[user_id, emoticon, big, date], ...] (store/reactions.py), None: no reactions
    reactions: list[Any] | None = None
    reaction_unread: bool = False  # the owner has not seen the peer's reaction
    pinned: bool = False  # pinned in the chat, on this owner's side


_BOX_COLUMNS = """
    b.owner_user_id, b.box_id, b.peer_user_id, b.sender_user_id, b.out, b.date, m.message,
    m.entities, m.fwd_from, b.reply_to_msg_id, m.quote_text, m.quote_entities, m.quote_offset,
    b.silent, b.noforwards, b.media_unread, m.edit_date, m.media, m.grouped_id,
    m.reactions, b.reaction_unread, b.pinned
"""


# Bodies are fetched per box after the LIMIT (a lateral lookup by primary key): a
# plain join lets the planner hash the chat's boxes over every private_messages
# partition instead.
_BODY_OF_BOX = """
    SELECT * FROM private_messages pm
     WHERE pm.sender_user_id = b.sender_user_id AND pm.id = b.message_id
    OFFSET 0
"""


# On Citus (``distributed``): the same lookup without the fence. Citus reads a body of
# another user's shard for the boxes of a subquery it ran first (the boxes come from a
# LIMIT or an OFFSET 0, which it runs on its own), and cannot push the fenced form down.
_BODY_OF_BOX_DISTRIBUTED = """
    SELECT * FROM private_messages pm
     WHERE pm.sender_user_id = b.sender_user_id AND pm.id = b.message_id
"""


def body_of_box(distributed: bool) -> str:
    return _BODY_OF_BOX_DISTRIBUTED if distributed else _BODY_OF_BOX


def _box(r: asyncpg.Record) -> BoxMessage:
    return from_row(BoxMessage, r)


async def get_boxes(
    db: Executor, owner_user_id: int, box_ids: Sequence[int], *, distributed: bool = False
) -> list[BoxMessage]:
    """The owner's visible messages among ``box_ids`` (missing/deleted ones are left out)."""
    fence = "OFFSET 0" if distributed else ""
    rows = await db.fetch(
        f"""
        SELECT {_BOX_COLUMNS}
          FROM (SELECT * FROM message_boxes
                 WHERE owner_user_id = $1 AND box_id = ANY($2::integer[]) AND NOT deleted
                {fence}) b
         CROSS JOIN LATERAL ({body_of_box(distributed)}) m
         ORDER BY b.box_id DESC
        """,
        owner_user_id,
        list(box_ids),
    )
    return [_box(r) for r in rows]


async def get_boxes_of_owners(
    db: Executor, keys: Sequence[tuple[int, int]], *, distributed: bool = False
) -> list[BoxMessage]:
    """Visible messages by (owner, box_id) across owners: one query for an outbox batch.
    ``distributed`` (Citus): the boxes by a plain join with the keys, in a subquery Citus
    runs first on every shard at once, then each body on its sender's shard."""
    if distributed:
        rows = await db.fetch(
            f"""
            SELECT {_BOX_COLUMNS}
              FROM (SELECT mb.* FROM unnest($1::bigint[], $2::integer[])
                                     AS k(owner_user_id, box_id)
                      JOIN message_boxes mb ON mb.owner_user_id = k.owner_user_id
                                           AND mb.box_id = k.box_id
                     WHERE NOT mb.deleted
                    OFFSET 0) b
             CROSS JOIN LATERAL ({_BODY_OF_BOX_DISTRIBUTED}) m
            """,
            [k[0] for k in keys],
            [k[1] for k in keys],
        )
        return [_box(r) for r in rows]
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
     + COALESCE(octet_length(m.quote_entities), 0) + COALESCE(octet_length(m.media::text), 0)
     + {MESSAGE_OVERHEAD_BYTES})
"""


def box_size(m: BoxMessage) -> int:
    """The estimate of BOX_SIZE for a message already in memory."""
    return (
        len(m.message.encode())
        + len(m.entities or b"")
        + len(m.fwd_from or b"")
        + len((m.quote_text or "").encode())
        + len(m.quote_entities or b"")
        + (len(json.dumps(m.media)) if m.media else 0)
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
    db: Executor,
    owner_user_id: int,
    box_ids: Sequence[int],
    budget: int,
    *,
    distributed: bool = False,
) -> Page:
    """The owner's visible messages among ``box_ids``, in the given order, as many as fit
    in ``budget`` bytes (missing/deleted ones are left out)."""
    if distributed:
        # Citus: the owner's boxes in a subquery it runs first, each one's place in the
        # order asked read from the array (the ids are distinct).
        inner = f"""
            SELECT {_BOX_COLUMNS}, {BOX_SIZE} AS size,
                   array_position($2::integer[], b.box_id) AS ord
              FROM (SELECT * FROM message_boxes mb
                     WHERE mb.owner_user_id = $1 AND mb.box_id = ANY($2::integer[])
                       AND NOT mb.deleted
                    OFFSET 0) b
             CROSS JOIN LATERAL ({_BODY_OF_BOX_DISTRIBUTED}) m
        """
    else:
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


# -- dialogs ----------------------------------------------------------------------------


# -- read receipts -----------------------------------------------------------------


# -- the update log ---------------------------------------------------------------------


# -- consistency checks (benchmarks and operators) ------------------------------------------
