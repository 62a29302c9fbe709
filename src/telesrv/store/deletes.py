"""Message deletes: per-id revokes, history deletes and emptied dialogs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.store.db import Executor, sql_refusal


@dataclass(frozen=True, slots=True)
class RevokeTarget:
    """Another owner's undeleted boxes of the messages being revoked."""

    owner_user_id: int
    boxes: int
    blocked_deleter: bool  # that owner blocked the one deleting


async def visible_box_ids(db: Executor, owner: int, box_ids: Sequence[int]) -> list[int]:
    """Which of ``box_ids`` the owner still sees, ascending."""
    rows = await db.fetch(
        """
        SELECT box_id FROM message_boxes
         WHERE owner_user_id = $1 AND box_id = ANY ($2::integer[]) AND NOT deleted
         ORDER BY box_id
        """,
        owner,
        list(box_ids),
    )
    return [r["box_id"] for r in rows]


async def newest_box_ids(db: Executor, owner: int, peer: int, max_id: int, limit: int) -> list[int]:
    """Up to ``limit`` of the chat's undeleted box ids <= max_id (0: any), newest first."""
    rows = await db.fetch(
        """
        SELECT box_id FROM message_boxes
         WHERE owner_user_id = $1 AND peer_user_id = $2 AND NOT deleted
           AND ($3 <= 0 OR box_id <= $3)
         ORDER BY box_id DESC
         LIMIT $4
        """,
        owner,
        peer,
        max_id,
        limit,
    )
    return [r["box_id"] for r in rows]


async def revoke_targets(
    db: Executor, owner: int, box_ids: Sequence[int], *, distributed: bool = False
) -> list[RevokeTarget]:
    """The other owners a revoking delete of ``box_ids`` would reach. ``distributed``
    (Citus): the owner's boxes first, then each peer's, one user's rows per statement."""
    if distributed:
        return await _revoke_targets_by_user(db, owner, box_ids)
    rows = await db.fetch(
        """
        SELECT r.owner_user_id, count(*) AS boxes,
               EXISTS (SELECT 1 FROM contact_blocks c
                        WHERE c.owner_user_id = r.owner_user_id AND c.blocked_user_id = $1)
                 AS blocked
          FROM message_boxes b
         CROSS JOIN LATERAL (
               -- per box, in the peer's partition (a join could hash whole tables)
               SELECT r.owner_user_id FROM message_boxes r
                WHERE r.owner_user_id = b.peer_user_id
                  AND r.sender_user_id = b.sender_user_id
                  AND r.message_id = b.message_id AND NOT r.deleted
               OFFSET 0) r
         WHERE b.owner_user_id = $1 AND b.box_id = ANY ($2::integer[]) AND NOT b.deleted
           AND b.peer_user_id <> $1
         GROUP BY r.owner_user_id
         ORDER BY r.owner_user_id
        """,
        owner,
        list(box_ids),
    )
    return [
        RevokeTarget(
            owner_user_id=r["owner_user_id"], boxes=r["boxes"], blocked_deleter=r["blocked"]
        )
        for r in rows
    ]


async def _revoke_targets_by_user(
    db: Executor, owner: int, box_ids: Sequence[int]
) -> list[RevokeTarget]:
    mine = await db.fetch(
        """
        SELECT peer_user_id, sender_user_id, message_id FROM message_boxes
         WHERE owner_user_id = $1 AND box_id = ANY ($2::integer[]) AND NOT deleted
           AND peer_user_id <> $1
        """,
        owner,
        list(box_ids),
    )
    by_peer: dict[int, list[asyncpg.Record]] = {}
    for r in mine:
        by_peer.setdefault(r["peer_user_id"], []).append(r)
    targets = []
    for peer, boxes in sorted(by_peer.items()):
        row = await db.fetchrow(
            """
            SELECT count(*) AS boxes,
                   EXISTS (SELECT 1 FROM contact_blocks c
                            WHERE c.owner_user_id = $1 AND c.blocked_user_id = $4) AS blocked
              FROM message_boxes r
              JOIN unnest($2::bigint[], $3::bigint[]) AS k(sender_user_id, message_id)
                ON r.sender_user_id = k.sender_user_id AND r.message_id = k.message_id
             WHERE r.owner_user_id = $1 AND NOT r.deleted
            """,
            peer,
            [b["sender_user_id"] for b in boxes],
            [b["message_id"] for b in boxes],
            owner,
        )
        if row is not None and row["boxes"]:
            targets.append(
                RevokeTarget(owner_user_id=peer, boxes=row["boxes"], blocked_deleter=row["blocked"])
            )
    return targets


@dataclass(frozen=True, slots=True)
class PtsRange:
    user_id: int
    first_pts: int
    count: int


@dataclass(frozen=True, slots=True)
class OwnerDeletion:
    user_id: int
    pts: int | None  # of its delete_messages event; None: nothing was left to delete
    box_ids: list[int]  # in that owner's ids, ascending


async def delete_message_boxes_txn(
    conn: asyncpg.Connection,
    owner: int,
    box_ids: Sequence[int],
    revoke: bool,
    keep_empty_dialog: bool,
    date: int,
    ranges: Sequence[PtsRange],
    exclude_auth_key_id: int | None,
    exclude_session_id: int | None,
) -> list[OwnerDeletion]:
    """Raises the refusal the SQL function names (DELETE_MESSAGES_FORBIDDEN); every pts
    of ``ranges`` is used or filled."""
    try:
        rows = await conn.fetch(
            """
            SELECT r_user, r_pts, r_count, r_box_ids
              FROM telesrv_delete_message_boxes(
                   p_owner => $1, p_box_ids => $2, p_revoke => $3, p_keep_empty => $4,
                   p_date => $5, p_users => $6, p_first_pts => $7, p_n_pts => $8,
                   p_exclude_auth_key_id => $9, p_exclude_session_id => $10)
            """,
            owner,
            list(box_ids),
            revoke,
            keep_empty_dialog,
            date,
            [r.user_id for r in ranges],
            [r.first_pts for r in ranges],
            [r.count for r in ranges],
            exclude_auth_key_id,
            exclude_session_id,
        )
    except asyncpg.RaiseError as e:
        raise sql_refusal(e) from None
    return [
        OwnerDeletion(user_id=r["r_user"], pts=r["r_pts"], box_ids=list(r["r_box_ids"]))
        for r in rows
    ]


async def drop_empty_dialog(db: Executor, owner: int, peer: int) -> bool:
    """Remove the owner's dialog with ``peer`` if no message is left in it."""
    status = await db.execute(
        """
        DELETE FROM dialogs d
         WHERE d.user_id = $1 AND d.peer_user_id = $2
           AND NOT EXISTS (SELECT 1 FROM message_boxes b
                            WHERE b.owner_user_id = $1 AND b.peer_user_id = $2
                              AND NOT b.deleted)
        """,
        owner,
        peer,
    )
    return bool(status != "DELETE 0")


async def date_cleared_dialog(db: Executor, owner: int, peer: int, date: int) -> None:
    """Give a chat left empty by a clear the clear's date: it keeps its place among the
    dialogs as if the clear were its latest event, as a history-clear service message
    would in Telegram, instead of sinking below every chat that has messages."""
    await db.execute(
        """
        UPDATE dialogs SET top_message_date = $3
         WHERE user_id = $1 AND peer_user_id = $2 AND top_message = 0
           AND top_message_date < $3
        """,
        owner,
        peer,
        date,
    )
