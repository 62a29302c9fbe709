"""Forwards, content reads, outbox read dates and text search: one function per query.

Every query is keyed by the owner, so it touches that owner's partition only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.messages import (
    _BODY_OF_BOX,
    _BOX_COLUMNS,
    BOX_SIZE,
    BoxMessage,
    Page,
    SendResult,
    _box,
    page_of,
    within_budget,
)

# -- forwards ---------------------------------------------------------------------------


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
               r.recipient_pts, r.msg_date, r.recipient_folder_id
          FROM unnest($1::bigint[], $2::text[], $3::bytea[], $4::bytea[],
                      $5::integer[], $6::integer[], $7::integer[], $8::integer[])
               WITH ORDINALITY AS c(random_id, message, entities, fwd_from,
                                    sender_pts, sender_box, recipient_pts, recipient_box, ord)
         CROSS JOIN LATERAL telesrv_send_private_message(
               p_sender => $9, p_recipient => $10, p_random_id => c.random_id, p_date => $11,
               p_message => c.message, p_entities => c.entities, p_fwd_from => c.fwd_from,
               p_silent => $12, p_noforwards => $13, p_media_unread => false,
               p_reply_to => NULL, p_quote_text => NULL, p_quote_entities => NULL,
               p_quote_offset => NULL, p_sender_pts => c.sender_pts,
               p_sender_box => c.sender_box, p_recipient_pts => c.recipient_pts,
               p_recipient_box => c.recipient_box, p_exclude_auth_key_id => $14,
               p_exclude_session_id => $15) r
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
        )
        for r in rows
    ]


# -- content read -----------------------------------------------------------------------


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


# -- outbox read date -------------------------------------------------------------------


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


# -- search -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """What a search or listing keeps, besides the cursor.

    ``peer_user_id`` None: every chat of the owner. ``out`` None: both directions.
    Dates are exclusive bounds (0: none); ``min_id`` is exclusive.
    """

    owner_user_id: int
    peer_user_id: int | None
    out: bool | None
    min_id: int
    min_date: int
    max_date: int


# The filters shared by the search and the listing, on alias s; $1 owner, $2 peer,
# $3 out, $4 min_id, $5 min_date, $6 max_date, $7 box_id lower bound (exclusive),
# $8 box_id upper bound (exclusive).
_CURSOR = """
    {peer}
    AND ($3::boolean IS NULL OR s.out = $3)
    AND s.box_id > GREATEST($4::integer, $7::integer)
    AND ($8::integer IS NULL OR s.box_id < $8)
    AND ($5::integer <= 0 OR s.date > $5)
    AND ($6::integer <= 0 OR s.date < $6)
"""


def _cursor(f: SearchFilter) -> str:
    # Two texts rather than "$2 IS NULL OR ...": a generic plan of the latter could not
    # use the chat's history index.
    return _CURSOR.format(
        peer="$2::bigint IS NULL" if f.peer_user_id is None else "s.peer_user_id = $2"
    )


def _cursor_args(
    f: SearchFilter, above: int, below: int | None
) -> tuple[int, int | None, bool | None, int, int, int, int, int | None]:
    return (
        f.owner_user_id,
        f.peer_user_id,
        f.out,
        f.min_id,
        f.min_date,
        f.max_date,
        above,
        below,
    )


# Words of a query, at most; each must occur in a match (any order).
MAX_QUERY_WORDS = 16
# A trigram index only serves a word holding three letters or digits in a row; a query
# without such a word reads the owner's rows instead, newest first, at most this many
# box ids back from the newest (an unindexed scan stays bounded).
SHORT_QUERY_SCAN = 5000


def _like_pattern(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _indexable(word: str) -> bool:
    run = 0
    for char in word:
        run = run + 1 if char.isalnum() else 0
        if run >= 3:
            return True
    return False


@dataclass(frozen=True, slots=True)
class TextQuery:
    """ILIKE patterns a match must all satisfy: ``indexed`` ones can use the trigram
    index, ``scanned`` ones are checked on the rows it (or the bounded scan) yields.
    ``floor``: box ids at or below it are not searched (the bounded scan's limit)."""

    indexed: tuple[str, ...]
    scanned: tuple[str, ...]
    floor: int = 0


async def text_query(db: Executor, owner_user_id: int, text: str) -> TextQuery | None:
    """The query for ``text``: its whitespace-separated words (at most 16), each matched
    case-insensitively as a substring. None when the text has no words."""
    words = list(dict.fromkeys(text.split()))[:MAX_QUERY_WORDS]
    if not words:
        return None
    indexed = tuple(_like_pattern(w) for w in words if _indexable(w))
    scanned = tuple(_like_pattern(w) for w in words if not _indexable(w))
    floor = 0
    if not indexed:
        newest = await db.fetchval(
            "SELECT max(box_id) FROM message_search WHERE owner_user_id = $1", owner_user_id
        )
        floor = max(0, (newest or 0) - SHORT_QUERY_SCAN)
    return TextQuery(indexed, scanned, floor)


def _text_conditions(q: TextQuery, first: int) -> tuple[str, list[str]]:
    # "(s.body || '')" is the same text, but an expression the trigram index does not
    # cover: the planner cannot choose a full index scan for a pattern without trigrams.
    conditions = [f"s.body ILIKE ${first + i}" for i in range(len(q.indexed))]
    conditions += [
        f"(s.body || '') ILIKE ${first + len(q.indexed) + i}" for i in range(len(q.scanned))
    ]
    return " AND ".join(conditions), [*q.indexed, *q.scanned]


async def search(
    db: Executor,
    f: SearchFilter,
    query: TextQuery,
    *,
    above: int = 0,
    below: int | None = None,
    limit: int,
    budget: int,
    skip: int = 0,
    ascending: bool = False,
) -> Page:
    """Messages matching ``query`` (from :func:`text_query`) with above < box_id < below,
    newest first (or oldest first), after ``skip`` of them; as many as fit in ``budget``
    bytes. The planner picks the trigram index of message_search for rare text and the
    owner's newest rows (primary key) for frequent text, in the owner's partition either
    way; boxes and bodies are read for the page only."""
    order = "ASC" if ascending else "DESC"
    text, patterns = _text_conditions(query, 12)
    inner = f"""
        SELECT {_BOX_COLUMNS}, {BOX_SIZE} AS size
          FROM (SELECT s.box_id FROM message_search s
                 WHERE s.owner_user_id = $1 AND {text}
                   AND {_cursor(f)}
                 ORDER BY s.box_id {order}
                 OFFSET $10 LIMIT $9) hit
         CROSS JOIN LATERAL (SELECT * FROM message_boxes mb
                              WHERE mb.owner_user_id = $1 AND mb.box_id = hit.box_id
                                AND NOT mb.deleted
                             OFFSET 0) b
         CROSS JOIN LATERAL ({_BODY_OF_BOX}) m
    """
    rows = await db.fetch(
        within_budget(inner, f"box_id {order}", "$11"),
        *_cursor_args(f, max(above, query.floor), below),
        limit,
        skip,
        budget,
        *patterns,
    )
    return page_of(rows)


async def count_search(db: Executor, f: SearchFilter, query: TextQuery, cap: int) -> int:
    """How many messages match (ignoring the cursor), counted up to ``cap``."""
    text, patterns = _text_conditions(query, 10)
    return int(
        await db.fetchval(
            f"""
            SELECT count(*) FROM (
                SELECT 1 FROM message_search s
                 WHERE s.owner_user_id = $1 AND {text}
                   AND {_cursor(f)}
                 LIMIT $9) t
            """,
            *_cursor_args(f, query.floor, None),
            cap,
            *patterns,
        )
    )


async def list_messages(
    db: Executor,
    f: SearchFilter,
    *,
    above: int = 0,
    below: int | None = None,
    limit: int,
    budget: int,
    skip: int = 0,
    ascending: bool = False,
) -> Page:
    """Without a text: the filtered messages, on message_boxes' own indexes (the chat's
    history index with a peer, the primary key without), cut like :func:`search`."""
    order = "ASC" if ascending else "DESC"
    inner = f"""
        SELECT {_BOX_COLUMNS}, {BOX_SIZE} AS size
          FROM (SELECT * FROM message_boxes s
                 WHERE s.owner_user_id = $1 AND NOT s.deleted AND {_cursor(f)}
                 ORDER BY s.box_id {order}
                 OFFSET $10 LIMIT $9) b
         CROSS JOIN LATERAL ({_BODY_OF_BOX}) m
    """
    rows = await db.fetch(
        within_budget(inner, f"box_id {order}", "$11"),
        *_cursor_args(f, above, below),
        limit,
        skip,
        budget,
    )
    return page_of(rows)


async def count_messages(db: Executor, f: SearchFilter, cap: int) -> int:
    return int(
        await db.fetchval(
            f"""
            SELECT count(*) FROM (
                SELECT 1 FROM message_boxes s
                 WHERE s.owner_user_id = $1 AND NOT s.deleted AND {_cursor(f)}
                 LIMIT $9) t
            """,
            *_cursor_args(f, 0, None),
            cap,
        )
    )
