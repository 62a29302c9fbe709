"""Emoji reactions on private messages: one function per query; ``_txn`` ones run in
the caller's transaction.

``message_reactions`` holds the rows; ``private_messages.reactions`` is their summary
as renders show it, rewritten by :func:`set_reactions_txn` in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.rows import from_row


@dataclass(frozen=True, slots=True)
class ReactedBox:
    """One owner's box of a message, with what a reaction change needs of it."""

    owner_user_id: int
    box_id: int
    peer_user_id: int
    sender_user_id: int
    message_id: int
    reaction_unread: bool


@dataclass(frozen=True, slots=True)
class ReactionRow:
    user_id: int
    reaction: str
    big: bool
    date: int


async def box_for_update_txn(
    conn: asyncpg.Connection, owner: int, peer: int, box_id: int
) -> ReactedBox | None:
    """The owner's visible box ``box_id`` in the chat with ``peer``, its message's body
    locked: reaction changes on one message run one at a time."""
    row = await conn.fetchrow(
        """
        SELECT b.owner_user_id, b.box_id, b.peer_user_id, b.sender_user_id, b.message_id,
               b.reaction_unread
          FROM message_boxes b
         WHERE b.owner_user_id = $1 AND b.box_id = $2 AND b.peer_user_id = $3 AND NOT b.deleted
        """,
        owner,
        box_id,
        peer,
    )
    if row is None:
        return None
    await conn.execute(
        """
        SELECT 1 FROM private_messages
         WHERE sender_user_id = $1 AND id = $2
           FOR UPDATE
        """,
        row["sender_user_id"],
        row["message_id"],
    )
    return from_row(ReactedBox, row)


async def other_box_txn(
    conn: asyncpg.Connection, owner: int, sender: int, message_id: int
) -> ReactedBox | None:
    """The other side's visible box of the message (None in saved messages, or when the
    other side deleted it or never got it)."""
    row = await conn.fetchrow(
        """
        SELECT b.owner_user_id, b.box_id, b.peer_user_id, b.sender_user_id, b.message_id,
               b.reaction_unread
          FROM message_boxes b
         WHERE b.owner_user_id = $1 AND b.sender_user_id = $2 AND b.message_id = $3
           AND NOT b.deleted
        """,
        owner,
        sender,
        message_id,
    )
    return None if row is None else from_row(ReactedBox, row)


async def user_reactions_txn(
    conn: asyncpg.Connection, sender: int, message_id: int, user: int
) -> dict[str, bool]:
    """The reactions ``user`` has on the message, oldest first: each with whether it is
    hidden from the other side."""
    rows = await conn.fetch(
        """
        SELECT reaction, hidden FROM message_reactions
         WHERE sender_user_id = $1 AND message_id = $2 AND user_id = $3
         ORDER BY date, reaction
        """,
        sender,
        message_id,
        user,
    )
    return {r["reaction"]: r["hidden"] for r in rows}


async def set_reactions_txn(
    conn: asyncpg.Connection,
    sender: int,
    message_id: int,
    user: int,
    reactions: Sequence[str],
    big: bool,
    date: int,
    hidden: bool = False,
) -> list[list[Any]]:
    """Replace ``user``'s reactions on the message (kept ones keep their date and
    whether they are hidden; new ones are ``hidden`` from the other side) and rewrite
    the message's summary; the summary ([] when none are left)."""
    # Both changes in one statement: its parts touch different rows.
    await conn.execute(
        """
        WITH gone AS (
            DELETE FROM message_reactions
             WHERE sender_user_id = $1 AND message_id = $2 AND user_id = $3
               AND NOT (reaction = ANY($4::text[]))
        ), added AS (
            INSERT INTO message_reactions
                   (sender_user_id, message_id, user_id, reaction, big, date, hidden)
            SELECT $1, $2, $3, r, $5, $6, $7 FROM unnest($4::text[]) AS r
            ON CONFLICT (sender_user_id, message_id, user_id, reaction)
               DO UPDATE SET big = EXCLUDED.big
        )
        SELECT 1
        """,
        sender,
        message_id,
        user,
        list(reactions),
        big,
        date,
        hidden,
    )
    value = await conn.fetchval(
        """
        UPDATE private_messages m
           SET reactions = (SELECT jsonb_agg(
                                       CASE WHEN r.hidden
                                            THEN jsonb_build_array(r.user_id, r.reaction, r.big,
                                                                   r.date, true)
                                            ELSE jsonb_build_array(r.user_id, r.reaction, r.big,
                                                                   r.date)
                                       END
                                       ORDER BY r.date, r.user_id, r.reaction)
                              FROM message_reactions r
                             WHERE r.sender_user_id = $1 AND r.message_id = $2)
         WHERE m.sender_user_id = $1 AND m.id = $2
        RETURNING m.reactions
        """,
        sender,
        message_id,
    )
    return list(value or [])


async def set_reaction_unread_txn(
    conn: asyncpg.Connection, owner: int, box_id: int, unread: bool
) -> None:
    await conn.execute(
        """
        UPDATE message_boxes SET reaction_unread = $3
         WHERE owner_user_id = $1 AND box_id = $2 AND reaction_unread <> $3
        """,
        owner,
        box_id,
        unread,
    )


async def summaries(
    db: Executor,
    owner: int,
    peer: int,
    box_ids: Sequence[int],
    *,
    distributed: bool = False,
) -> list[tuple[int, bool, list[list[Any]]]]:
    """(box id, reaction unread, summary) of the owner's visible boxes among ``box_ids``
    in the chat with ``peer``. ``distributed`` (Citus): the boxes in a subquery Citus
    runs first, then the bodies (as store/messages.py body_of_box)."""
    # Plain PostgreSQL: one probe per box (OFFSET 0 in the lookup). Citus: the fence
    # moves to the boxes' subquery, which it runs on the owner's shard first.
    box_fence, body_fence = ("OFFSET 0", "") if distributed else ("", "OFFSET 0")
    rows = await db.fetch(
        f"""
        SELECT b.box_id, b.reaction_unread, m.reactions
          FROM (SELECT * FROM message_boxes
                 WHERE owner_user_id = $1 AND peer_user_id = $2
                   AND box_id = ANY($3::integer[]) AND NOT deleted
                {box_fence}) b
         CROSS JOIN LATERAL (
               SELECT pm.reactions FROM private_messages pm
                WHERE pm.sender_user_id = b.sender_user_id AND pm.id = b.message_id
               {body_fence}) m
         ORDER BY b.box_id
        """,
        owner,
        peer,
        list(box_ids),
    )
    return [(r["box_id"], r["reaction_unread"], list(r["reactions"] or [])) for r in rows]


async def reaction_list(
    db: Executor,
    sender: int,
    message_id: int,
    *,
    viewer: int,
    reaction: str | None,
    after: tuple[int, int, str] | None,
    limit: int,
) -> tuple[int, list[ReactionRow]]:
    """(how many, a page) of the message's reactions, oldest first, optionally only
    ``reaction``; the page starts after the (date, user, reaction) key ``after``. Hidden
    reactions are seen by their reactor alone."""
    count = await db.fetchval(
        """
        SELECT count(*) FROM message_reactions
         WHERE sender_user_id = $1 AND message_id = $2 AND ($3::text IS NULL OR reaction = $3)
           AND (NOT hidden OR user_id = $4)
        """,
        sender,
        message_id,
        reaction,
        viewer,
    )
    rows = await db.fetch(
        """
        SELECT user_id, reaction, big, date FROM message_reactions
         WHERE sender_user_id = $1 AND message_id = $2 AND ($3::text IS NULL OR reaction = $3)
           AND ($4::integer IS NULL OR (date, user_id, reaction) > ($4, $5::bigint, $6::text))
           AND (NOT hidden OR user_id = $8)
         ORDER BY date, user_id, reaction
         LIMIT $7
        """,
        sender,
        message_id,
        reaction,
        after[0] if after else None,
        after[1] if after else None,
        after[2] if after else None,
        limit,
        viewer,
    )
    return int(count), [from_row(ReactionRow, r) for r in rows]


async def message_of_box(
    db: Executor, owner: int, peer: int, box_id: int
) -> tuple[int, int] | None:
    """(sender, message id) of the owner's visible box in the chat with ``peer``."""
    row = await db.fetchrow(
        """
        SELECT sender_user_id, message_id FROM message_boxes
         WHERE owner_user_id = $1 AND box_id = $2 AND peer_user_id = $3 AND NOT deleted
        """,
        owner,
        box_id,
        peer,
    )
    return None if row is None else (row["sender_user_id"], row["message_id"])


async def unread_counts(db: Executor, owner: int, peers: Sequence[int]) -> dict[int, int]:
    """Per peer among ``peers``: how many of the owner's messages have a reaction the
    owner has not seen (peers with none are left out)."""
    rows = await db.fetch(
        """
        SELECT peer_user_id, count(*) AS n FROM message_boxes
         WHERE owner_user_id = $1 AND peer_user_id = ANY($2::bigint[])
           AND reaction_unread AND NOT deleted
         GROUP BY peer_user_id
        """,
        owner,
        list(peers),
    )
    return {r["peer_user_id"]: int(r["n"]) for r in rows}


async def unread_box_ids(
    db: Executor,
    owner: int,
    peer: int,
    *,
    above: int,
    below: int | None,
    limit: int,
    skip: int = 0,
    ascending: bool = False,
) -> list[int]:
    """Ids of the owner's messages in the chat with an unseen reaction, above < id <
    below, newest first (or oldest first), after skipping ``skip``."""
    order = "ASC" if ascending else "DESC"
    rows = await db.fetch(
        f"""
        SELECT box_id FROM message_boxes
         WHERE owner_user_id = $1 AND peer_user_id = $2 AND reaction_unread AND NOT deleted
           -- an index bound in a generic plan too (see store/history.py)
           AND box_id > $3 AND box_id < COALESCE($4::bigint, 2147483648)
         ORDER BY box_id {order}
         OFFSET $5 LIMIT $6
        """,
        owner,
        peer,
        above,
        below,
        skip,
        limit,
    )
    return [r["box_id"] for r in rows]


async def count_unread(db: Executor, owner: int, peer: int) -> int:
    return int(
        await db.fetchval(
            """
            SELECT count(*) FROM message_boxes
             WHERE owner_user_id = $1 AND peer_user_id = $2 AND reaction_unread AND NOT deleted
            """,
            owner,
            peer,
        )
    )


async def clear_unread_txn(
    conn: asyncpg.Connection, owner: int, peer: int, limit: int
) -> list[int]:
    """Mark up to ``limit`` of the owner's unseen reactions in the chat as seen (oldest
    first); the box ids it changed. The rows are picked once, in a materialized CTE: as
    a subquery the planner may rescan, its LIMIT would skip rows this statement already
    changed and take more."""
    rows = await conn.fetch(
        """
        WITH picked AS MATERIALIZED (
            SELECT box_id FROM message_boxes
             WHERE owner_user_id = $1 AND peer_user_id = $2 AND reaction_unread
               AND NOT deleted
             ORDER BY box_id
             LIMIT $3
               FOR UPDATE
        )
        UPDATE message_boxes b SET reaction_unread = false
          FROM picked p
         WHERE b.owner_user_id = $1 AND b.box_id = p.box_id
        RETURNING b.box_id
        """,
        owner,
        peer,
        limit,
    )
    return sorted(r["box_id"] for r in rows)


async def default_reaction(db: Executor, user: int) -> str | None:
    value = await db.fetchval("SELECT reaction FROM reaction_defaults WHERE user_id = $1", user)
    return None if value is None else str(value)


async def set_default_reaction(db: Executor, user: int, reaction: str) -> None:
    await db.execute(
        """
        INSERT INTO reaction_defaults (user_id, reaction) VALUES ($1, $2)
        ON CONFLICT (user_id) DO UPDATE SET reaction = EXCLUDED.reaction
        """,
        user,
        reaction,
    )


async def add_recent_txn(
    conn: asyncpg.Connection, user: int, reactions: Sequence[str], keep: int
) -> None:
    """Put ``reactions`` at the head of the user's recent list (the last one newest) and
    keep its newest ``keep``."""
    await conn.execute(
        """
        INSERT INTO reaction_recent (user_id, reaction, seq)
        SELECT $1, r.reaction,
               (SELECT coalesce(max(seq), 0) FROM reaction_recent WHERE user_id = $1) + r.n
          FROM unnest($2::text[]) WITH ORDINALITY AS r(reaction, n)
        ON CONFLICT (user_id, reaction) DO UPDATE SET seq = EXCLUDED.seq
        """,
        user,
        list(reactions),
    )
    await conn.execute(
        """
        DELETE FROM reaction_recent
         WHERE user_id = $1
           AND reaction NOT IN (SELECT reaction FROM reaction_recent WHERE user_id = $1
                                 ORDER BY seq DESC LIMIT $2)
        """,
        user,
        keep,
    )


async def recent(db: Executor, user: int, limit: int) -> list[str]:
    """The user's recent reactions, newest first."""
    rows = await db.fetch(
        """
        SELECT reaction FROM reaction_recent WHERE user_id = $1
         ORDER BY seq DESC LIMIT $2
        """,
        user,
        limit,
    )
    return [r["reaction"] for r in rows]


async def clear_recent(db: Executor, user: int) -> None:
    await db.execute("DELETE FROM reaction_recent WHERE user_id = $1", user)
