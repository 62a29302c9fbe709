"""Message edits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.store.db import Executor, sql_refusal


@dataclass(frozen=True, slots=True)
class EditTarget:
    """A box of the editor's and what an edit of it would touch."""

    sender_user_id: int
    message_id: int
    message: str
    entities: bytes | None
    owners: list[int]  # owners with an undeleted box of the message, ascending
    peer_blocked_editor: bool


async def edit_target(
    db: Executor, editor: int, peer: int, box_id: int, *, distributed: bool = False
) -> EditTarget | None:
    """The editor's undeleted box ``box_id`` in the chat with ``peer``, or None.
    ``distributed`` (Citus): one statement per user's rows (see _edit_target_by_user)."""
    if distributed:
        return await _edit_target_by_user(db, editor, peer, box_id)
    row = await db.fetchrow(
        """
        SELECT b.sender_user_id, b.message_id, m.message, m.entities,
               ARRAY(SELECT o.owner_user_id FROM message_boxes o
                      WHERE o.owner_user_id = ANY (ARRAY[$1, $3]::bigint[])
                        AND o.sender_user_id = b.sender_user_id
                        AND o.message_id = b.message_id AND NOT o.deleted
                      ORDER BY o.owner_user_id) AS owners,
               EXISTS (SELECT 1 FROM contact_blocks
                        WHERE owner_user_id = $3 AND blocked_user_id = $1) AS blocked
          FROM message_boxes b
         CROSS JOIN LATERAL (
               SELECT pm.message, pm.entities FROM private_messages pm
                WHERE pm.sender_user_id = b.sender_user_id AND pm.id = b.message_id
               OFFSET 0) m
         WHERE b.owner_user_id = $1 AND b.box_id = $2 AND b.peer_user_id = $3
           AND NOT b.deleted
        """,
        editor,
        box_id,
        peer,
    )
    if row is None:
        return None
    return EditTarget(
        sender_user_id=row["sender_user_id"],
        message_id=row["message_id"],
        message=row["message"],
        entities=row["entities"],
        owners=list(row["owners"]),
        peer_blocked_editor=peer != editor and row["blocked"],
    )


async def _edit_target_by_user(
    db: Executor, editor: int, peer: int, box_id: int
) -> EditTarget | None:
    # Citus runs a statement on one user's shard: the editor's box and the body (the
    # editor's, who sent it) first, then each owner's box of the message, then the block.
    row = await db.fetchrow(
        """
        SELECT b.sender_user_id, b.message_id, m.message, m.entities
          FROM message_boxes b
          JOIN private_messages m ON m.sender_user_id = b.owner_user_id
                                 AND m.id = b.message_id
         WHERE b.owner_user_id = $1 AND b.box_id = $2 AND b.peer_user_id = $3
           AND b.sender_user_id = $1 AND NOT b.deleted
        """,
        editor,
        box_id,
        peer,
    )
    if row is None:
        # Not the editor's own message (or none): the caller tells which it is.
        other = await db.fetchrow(
            """
            SELECT sender_user_id, message_id FROM message_boxes
             WHERE owner_user_id = $1 AND box_id = $2 AND peer_user_id = $3 AND NOT deleted
            """,
            editor,
            box_id,
            peer,
        )
        if other is None:
            return None
        return EditTarget(
            sender_user_id=other["sender_user_id"],
            message_id=other["message_id"],
            message="",
            entities=None,
            owners=[],
            peer_blocked_editor=False,
        )
    owners = []
    for owner in sorted({editor, peer}):
        if await db.fetchval(
            """
            SELECT EXISTS (SELECT 1 FROM message_boxes
                            WHERE owner_user_id = $1 AND sender_user_id = $2
                              AND message_id = $3 AND NOT deleted)
            """,
            owner,
            row["sender_user_id"],
            row["message_id"],
        ):
            owners.append(owner)
    blocked = peer != editor and await db.fetchval(
        "SELECT EXISTS (SELECT 1 FROM contact_blocks"
        " WHERE owner_user_id = $1 AND blocked_user_id = $2)",
        peer,
        editor,
    )
    return EditTarget(
        sender_user_id=row["sender_user_id"],
        message_id=row["message_id"],
        message=row["message"],
        entities=row["entities"],
        owners=owners,
        peer_blocked_editor=bool(blocked),
    )


@dataclass(frozen=True, slots=True)
class EditedBox:
    owner_user_id: int
    box_id: int
    pts: int


async def edit_private_message_txn(
    conn: asyncpg.Connection,
    editor: int,
    peer: int,
    box_id: int,
    message: str,
    entities: bytes | None,
    date: int,
    pts_by_owner: Sequence[tuple[int, int]],
    exclude_auth_key_id: int | None,
    exclude_session_id: int | None,
    link: bool | None = None,
) -> list[EditedBox]:
    """Raises the refusal the SQL function names (MESSAGE_ID_INVALID ...); every pts in
    ``pts_by_owner`` is used or filled.
    ``link``: whether the new text holds a link (the search's link filter of a text
    message follows it); None leaves it."""
    try:
        rows = await conn.fetch(
            """
            SELECT r_user, r_box, r_pts
              FROM telesrv_edit_private_message(
                   p_editor => $1, p_peer => $2, p_box => $3, p_message => $4,
                   p_entities => $5, p_date => $6, p_users => $7, p_pts => $8,
                   p_exclude_auth_key_id => $9, p_exclude_session_id => $10,
                   p_link => $11)
            """,
            editor,
            peer,
            box_id,
            message,
            entities,
            date,
            [u for u, _ in pts_by_owner],
            [p for _, p in pts_by_owner],
            exclude_auth_key_id,
            exclude_session_id,
            link,
        )
    except asyncpg.RaiseError as e:
        raise sql_refusal(e) from None
    return [EditedBox(owner_user_id=r["r_user"], box_id=r["r_box"], pts=r["r_pts"]) for r in rows]
