"""Pinned messages of private chats: the per-owner flag on message_boxes, and the
pinned_messages events of both sides' pts logs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from telesrv.store.db import Executor


@dataclass(frozen=True, slots=True)
class PinTarget:
    """A box of the pinner's and its copy on the peer's side."""

    pinned: bool  # the pinner's box is pinned now
    peer_box_id: int | None  # the peer's copy (None: deleted, blocked, or own notes)
    peer_pinned: bool


async def pin_target(
    db: Executor, owner: int, peer: int, box_id: int, *, distributed: bool = False
) -> PinTarget | None:
    """The owner's undeleted box ``box_id`` in the chat with ``peer`` (None: no such
    box). The peer's copy is left out when the peer blocked the owner: a pin does not
    reach someone who blocked its maker, as a message does not. ``distributed``
    (Citus): the owner's box, then the peer's copy, one user's rows per statement."""
    if distributed:
        return await _pin_target_by_user(db, owner, peer, box_id)
    row = await db.fetchrow(
        """
        SELECT b.pinned, o.box_id AS peer_box_id, COALESCE(o.pinned, false) AS peer_pinned
          FROM message_boxes b
          LEFT JOIN LATERAL (
               SELECT p.box_id, p.pinned FROM message_boxes p
                WHERE p.owner_user_id = $3 AND $3 <> $1
                  AND p.sender_user_id = b.sender_user_id AND p.message_id = b.message_id
                  AND NOT p.deleted
                  AND NOT EXISTS (SELECT 1 FROM contact_blocks k
                                   WHERE k.owner_user_id = $3 AND k.blocked_user_id = $1)
               OFFSET 0) o ON true
         WHERE b.owner_user_id = $1 AND b.box_id = $2 AND b.peer_user_id = $3
           AND NOT b.deleted
        """,
        owner,
        box_id,
        peer,
    )
    if row is None:
        return None
    return PinTarget(row["pinned"], row["peer_box_id"], row["peer_pinned"])


async def _pin_target_by_user(db: Executor, owner: int, peer: int, box_id: int) -> PinTarget | None:
    mine = await db.fetchrow(
        """
        SELECT pinned, sender_user_id, message_id FROM message_boxes
         WHERE owner_user_id = $1 AND box_id = $2 AND peer_user_id = $3 AND NOT deleted
        """,
        owner,
        box_id,
        peer,
    )
    if mine is None:
        return None
    theirs = None
    if peer != owner:
        theirs = await db.fetchrow(
            """
            SELECT p.box_id, p.pinned FROM message_boxes p
             WHERE p.owner_user_id = $1
               AND p.sender_user_id = $2 AND p.message_id = $3 AND NOT p.deleted
               AND NOT EXISTS (SELECT 1 FROM contact_blocks k
                                WHERE k.owner_user_id = $1 AND k.blocked_user_id = $4)
            """,
            peer,
            mine["sender_user_id"],
            mine["message_id"],
            owner,
        )
    return PinTarget(
        mine["pinned"],
        None if theirs is None else theirs["box_id"],
        False if theirs is None else theirs["pinned"],
    )


@dataclass(frozen=True, slots=True)
class PinnedPage:
    box_ids: list[int]  # the owner's, newest first
    more: bool  # more pinned messages remain past the page


async def pinned_box_ids(db: Executor, owner: int, peer: int, limit: int) -> PinnedPage:
    """The newest ``limit`` pinned messages of the chat (the partial index only)."""
    rows = await db.fetch(
        """
        SELECT box_id FROM message_boxes
         WHERE owner_user_id = $1 AND peer_user_id = $2 AND pinned AND NOT deleted
         ORDER BY box_id DESC
         LIMIT $3
        """,
        owner,
        peer,
        limit + 1,
    )
    ids = [r["box_id"] for r in rows]
    return PinnedPage(ids[:limit], len(ids) > limit)


async def latest_pinned(db: Executor, owner: int, peer: int) -> int | None:
    """The newest pinned message of the chat, in the owner's ids."""
    value = await db.fetchval(
        """
        SELECT box_id FROM message_boxes
         WHERE owner_user_id = $1 AND peer_user_id = $2 AND pinned AND NOT deleted
         ORDER BY box_id DESC
         LIMIT 1
        """,
        owner,
        peer,
    )
    return None if value is None else int(value)


async def peer_copies(
    db: Executor, owner: int, peer: int, box_ids: Sequence[int], *, distributed: bool = False
) -> list[int]:
    """The peer's undeleted copies of the owner's boxes ``box_ids`` that are pinned,
    unless the peer blocked the owner (see :func:`pin_target`). ``distributed``
    (Citus): the owner's boxes, then the peer's copies, one user's rows per statement."""
    if owner == peer:
        return []
    if distributed:
        mine = await db.fetch(
            """
            SELECT sender_user_id, message_id FROM message_boxes
             WHERE owner_user_id = $1 AND box_id = ANY($2::integer[]) AND peer_user_id = $3
            """,
            owner,
            list(box_ids),
            peer,
        )
        if not mine:
            return []
        rows = await db.fetch(
            """
            SELECT p.box_id FROM message_boxes p
              JOIN unnest($2::bigint[], $3::bigint[]) AS k(sender_user_id, message_id)
                ON p.sender_user_id = k.sender_user_id AND p.message_id = k.message_id
             WHERE p.owner_user_id = $1 AND p.pinned AND NOT p.deleted
               AND NOT EXISTS (SELECT 1 FROM contact_blocks c
                                WHERE c.owner_user_id = $1 AND c.blocked_user_id = $4)
            """,
            peer,
            [r["sender_user_id"] for r in mine],
            [r["message_id"] for r in mine],
            owner,
        )
        return sorted((r["box_id"] for r in rows), reverse=True)
    rows = await db.fetch(
        """
        SELECT p.box_id
          FROM message_boxes b
          JOIN LATERAL (
               SELECT p.box_id FROM message_boxes p
                WHERE p.owner_user_id = $2
                  AND p.sender_user_id = b.sender_user_id AND p.message_id = b.message_id
                  AND p.pinned AND NOT p.deleted
               OFFSET 0) p ON true
         WHERE b.owner_user_id = $1 AND b.box_id = ANY($3::integer[]) AND b.peer_user_id = $2
           AND NOT EXISTS (SELECT 1 FROM contact_blocks k
                            WHERE k.owner_user_id = $2 AND k.blocked_user_id = $1)
        """,
        owner,
        peer,
        list(box_ids),
    )
    return sorted((r["box_id"] for r in rows), reverse=True)


@dataclass(frozen=True, slots=True)
class PinChange:
    """One owner's side of a pin change: the boxes to set, and the pts taken for it."""

    owner: int
    peer: int  # the chat, in this owner's view
    box_ids: list[int]
    pts: int


async def set_pinned_txn(
    conn: asyncpg.Connection,
    pinner: int,
    changes: Sequence[PinChange],
    pinned: bool,
    payload: dict[str, Any],
    date: int,
    exclude_auth_key_id: int | None,
    exclude_session_id: int | None,
) -> list[tuple[int, list[int]]]:
    """Set the flag on each change's boxes and log one pinned_messages event (pts_count
    1) at its pts for those that changed; an owner whose boxes no longer change (a
    concurrent call did it first, or they went away) gets a noop at that pts instead.
    The pinner's own event skips the session that made it. Owners are written in
    ascending id order, so two users pinning in their chat at once cannot deadlock.
    Returns (owner, changed box ids newest first) for the events written."""
    done: list[tuple[int, list[int]]] = []
    for change in sorted(changes, key=lambda c: c.owner):
        rows = await conn.fetch(
            """
            UPDATE message_boxes SET pinned = $3
             WHERE owner_user_id = $1 AND box_id = ANY($2::integer[]) AND NOT deleted
               AND pinned <> $3
            RETURNING box_id
            """,
            change.owner,
            change.box_ids,
            pinned,
        )
        ids = sorted((r["box_id"] for r in rows), reverse=True)
        if not ids:
            await conn.execute(
                "SELECT telesrv_fill_pts(p_user => $1, p_pts => $2, p_date => $3)",
                change.owner,
                [change.pts],
                date,
            )
            continue
        mine = change.owner == pinner
        await conn.execute(
            """
            SELECT telesrv_append_event(
                   p_user_id => $1, p_pts => $2, p_pts_count => 1,
                   p_event_type => 'pinned_messages', p_date => $3, p_peer_user_id => $4,
                   p_box_ids => $5, p_payload => $6,
                   p_exclude_auth_key_id => $7, p_exclude_session_id => $8)
            """,
            change.owner,
            change.pts,
            date,
            change.peer,
            ids,
            payload,
            exclude_auth_key_id if mine else None,
            exclude_session_id if mine else None,
        )
        done.append((change.owner, ids))
    return done
