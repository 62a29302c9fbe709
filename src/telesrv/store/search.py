"""Text search and filtered listing of one owner's messages."""

from __future__ import annotations

from dataclasses import dataclass

from telesrv.store.db import Executor
from telesrv.store.messages import (
    _BOX_COLUMNS,
    BOX_SIZE,
    Page,
    body_of_box,
    page_of,
    within_budget,
)


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
    # Only media of these kinds (message_search.media_kind); None: every message.
    media_kinds: tuple[str, ...] | None = None
    pinned: bool = False  # only the owner's pinned messages


# The filters shared by the search and the listing, on alias s; $1 owner, $2 peer,
# $3 out, $4 min_id, $5 min_date, $6 max_date, $7 box_id lower bound (exclusive),
# $8 box_id upper bound (exclusive; COALESCE keeps it an index bound in a generic plan,
# see store/history.py).
_CURSOR = """
    {peer}
    AND ($3::boolean IS NULL OR s.out = $3)
    AND s.box_id > GREATEST($4::integer, $7::integer)
    AND s.box_id < COALESCE($8::bigint, 2147483648)
    AND ($5::integer <= 0 OR s.date > $5)
    AND ($6::integer <= 0 OR s.date < $6)
"""


def _cursor(f: SearchFilter, *, boxes: bool = False) -> str:
    """The cursor's conditions on s: a message_boxes row when ``boxes``, else a
    message_search row (whose pinned flag is its box's)."""
    # Two texts rather than "$2 IS NULL OR ...": a generic plan of the latter could not
    # use the chat's history index.
    cursor = _CURSOR.format(
        peer="$2::bigint IS NULL" if f.peer_user_id is None else "s.peer_user_id = $2"
    )
    if not f.pinned:
        return cursor
    if boxes:
        # With NOT s.deleted of the caller's query: the partial pinned index's own terms.
        return cursor + " AND s.pinned"
    return cursor + (
        " AND EXISTS (SELECT 1 FROM message_boxes pb WHERE pb.owner_user_id = s.owner_user_id"
        " AND pb.box_id = s.box_id AND pb.pinned)"
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


def _kinds(f: SearchFilter, arg: int) -> tuple[str, list[list[str]]]:
    """The condition on message_search s keeping ``f.media_kinds`` (as parameter
    ``arg``), and its arguments; nothing without kinds."""
    if f.media_kinds is None:
        return "", []
    return f"AND s.media_kind = ANY(${arg}::text[])", [list(f.media_kinds)]


# Words of a query, at most; each must occur in a match (any order).
MAX_QUERY_WORDS = 16


# A trigram index only serves a word holding three letters or digits in a row; a query
# without such a word reads the owner's rows instead, newest first, at most this many
# box ids back from the newest (an unindexed scan stays bounded).
SHORT_QUERY_SCAN = 5000


def _boxes_of_hits(hits: str, distributed: bool) -> str:
    """The FROM items giving ``b`` (the boxes of the page's hits, ``hits`` selecting
    their box ids) and ``m`` (their bodies). On plain PostgreSQL one primary-key probe
    per hit; on Citus the owner's boxes of the hits in a subquery it runs first on the
    owner's shard, then the bodies."""
    if distributed:
        return f"""(SELECT * FROM message_boxes mb
                     WHERE mb.owner_user_id = $1 AND NOT mb.deleted
                       AND mb.box_id IN ({hits})
                    OFFSET 0) b
         CROSS JOIN LATERAL ({body_of_box(True)}) m"""
    return f"""({hits}) hit
         CROSS JOIN LATERAL (SELECT * FROM message_boxes mb
                              WHERE mb.owner_user_id = $1 AND mb.box_id = hit.box_id
                                AND NOT mb.deleted
                             OFFSET 0) b
         CROSS JOIN LATERAL ({body_of_box(False)}) m"""


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
    distributed: bool = False,
) -> Page:
    """Messages matching ``query`` (from :func:`text_query`) with above < box_id < below,
    of ``f.media_kinds`` if given,
    newest first (or oldest first), after ``skip`` of them; as many as fit in ``budget``
    bytes. The planner picks the trigram index of message_search for rare text and the
    owner's newest rows (primary key) for frequent text, in the owner's partition either
    way; boxes and bodies are read for the page only."""
    order = "ASC" if ascending else "DESC"
    text, patterns = _text_conditions(query, 12)
    kinds, kind_args = _kinds(f, 12 + len(patterns))
    inner = f"""
        SELECT {_BOX_COLUMNS}, {BOX_SIZE} AS size
          FROM {
        _boxes_of_hits(
            f'''SELECT s.box_id FROM message_search s
                 WHERE s.owner_user_id = $1 AND {text} {kinds}
                   AND {_cursor(f)}
                 ORDER BY s.box_id {order}
                 OFFSET $10 LIMIT $9''',
            distributed,
        )
    }
    """
    rows = await db.fetch(
        within_budget(inner, f"box_id {order}", "$11"),
        *_cursor_args(f, max(above, query.floor), below),
        limit,
        skip,
        budget,
        *patterns,
        *kind_args,
    )
    return page_of(rows)


async def count_search(db: Executor, f: SearchFilter, query: TextQuery, cap: int) -> int:
    """How many messages match (ignoring the cursor), counted up to ``cap``."""
    text, patterns = _text_conditions(query, 10)
    kinds, kind_args = _kinds(f, 10 + len(patterns))
    return int(
        await db.fetchval(
            f"""
            SELECT count(*) FROM (
                SELECT 1 FROM message_search s
                 WHERE s.owner_user_id = $1 AND {text} {kinds}
                   AND {_cursor(f)}
                 LIMIT $9) t
            """,
            *_cursor_args(f, query.floor, None),
            cap,
            *patterns,
            *kind_args,
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
    distributed: bool = False,
) -> Page:
    """Without a text: the filtered messages, on message_boxes' own indexes (the chat's
    history index with a peer, the primary key without), cut like :func:`search`. With
    media kinds, on the media index of message_search (its rows are the visible boxes)."""
    order = "ASC" if ascending else "DESC"
    if f.media_kinds is None:
        inner = f"""
            SELECT {_BOX_COLUMNS}, {BOX_SIZE} AS size
              FROM (SELECT * FROM message_boxes s
                     WHERE s.owner_user_id = $1 AND NOT s.deleted AND {_cursor(f, boxes=True)}
                     ORDER BY s.box_id {order}
                     OFFSET $10 LIMIT $9) b
             CROSS JOIN LATERAL ({body_of_box(distributed)}) m
        """
    else:
        inner = f"""
            SELECT {_BOX_COLUMNS}, {BOX_SIZE} AS size
              FROM {
            _boxes_of_hits(
                f'''SELECT s.box_id FROM message_search s
                     WHERE s.owner_user_id = $1 {_kinds(f, 12)[0]} AND {_cursor(f)}
                     ORDER BY s.box_id {order}
                     OFFSET $10 LIMIT $9''',
                distributed,
            )
        }
        """
    rows = await db.fetch(
        within_budget(inner, f"box_id {order}", "$11"),
        *_cursor_args(f, above, below),
        limit,
        skip,
        budget,
        *_kinds(f, 12)[1],
    )
    return page_of(rows)


async def count_messages(db: Executor, f: SearchFilter, cap: int) -> int:
    if f.media_kinds is not None:
        kinds, kind_args = _kinds(f, 10)
        return int(
            await db.fetchval(
                f"""
                SELECT count(*) FROM (
                    SELECT 1 FROM message_search s
                     WHERE s.owner_user_id = $1 {kinds} AND {_cursor(f)}
                     LIMIT $9) t
                """,
                *_cursor_args(f, 0, None),
                cap,
                *kind_args,
            )
        )
    return int(
        await db.fetchval(
            f"""
            SELECT count(*) FROM (
                SELECT 1 FROM message_boxes s
                 WHERE s.owner_user_id = $1 AND NOT s.deleted AND {_cursor(f, boxes=True)}
                 LIMIT $9) t
            """,
            *_cursor_args(f, 0, None),
            cap,
        )
    )
