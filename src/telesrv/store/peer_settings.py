"""What the action bar of a private chat offers (add contact, block, report spam):
one function per query; ``_txn`` ones run in the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from telesrv.store.db import Executor


@dataclass(frozen=True, slots=True)
class BarFacts:
    hidden: bool  # the owner hid the bar
    contact: bool  # the owner has the peer in their contacts
    replied: bool  # the owner has written in the chat


async def bar_facts(db: Executor, owner: int, peer: int) -> BarFacts | None:
    """None when there is no such dialog."""
    row = await db.fetchrow(
        """
        SELECT d.peer_settings_hidden AS hidden,
               EXISTS (SELECT 1 FROM contacts c
                        WHERE c.owner_user_id = $1 AND c.contact_user_id = $2) AS contact,
               EXISTS (SELECT 1 FROM message_boxes b
                        WHERE b.owner_user_id = $1 AND b.peer_user_id = $2 AND b.out
                          AND NOT b.deleted) AS replied
          FROM dialogs d
         WHERE d.user_id = $1 AND d.peer_user_id = $2
        """,
        owner,
        peer,
    )
    return None if row is None else BarFacts(row["hidden"], row["contact"], row["replied"])


async def hide_bar_txn(conn: asyncpg.Connection, owner: int, peer: int) -> bool:
    """Whether the bar was shown until now (the dialog exists and was not hidden)."""
    value = await conn.fetchval(
        """
        UPDATE dialogs SET peer_settings_hidden = true
         WHERE user_id = $1 AND peer_user_id = $2 AND NOT peer_settings_hidden
        RETURNING true
        """,
        owner,
        peer,
    )
    return bool(value)


async def shown_bars_txn(conn: asyncpg.Connection, owner: int, peers: Sequence[int]) -> list[int]:
    """The peers among ``peers`` whose chat shows the bar to the owner now: the dialog
    exists, the owner did not hide the bar, has not written in the chat and does not
    have them in their contacts."""
    rows = await conn.fetch(
        """
        SELECT d.peer_user_id FROM dialogs d
         WHERE d.user_id = $1 AND d.peer_user_id = ANY($2::bigint[])
           AND d.peer_user_id <> $1 AND NOT d.peer_settings_hidden
           AND NOT EXISTS (SELECT 1 FROM contacts c
                            WHERE c.owner_user_id = $1 AND c.contact_user_id = d.peer_user_id)
           AND NOT EXISTS (SELECT 1 FROM message_boxes b
                            WHERE b.owner_user_id = $1 AND b.peer_user_id = d.peer_user_id
                              AND b.out AND NOT b.deleted)
         ORDER BY d.peer_user_id
        """,
        owner,
        list(peers),
    )
    return [r["peer_user_id"] for r in rows]


async def close_on_reply(
    db: Executor,
    owner: int,
    peer: int,
    date: int,
    event_type: str,
    payload: dict[str, Any],
    *,
    distributed: bool = False,
) -> bool | None:
    """The owner wrote in the chat: the bar closes for good (the dialog is marked as
    hidden, which later sends find at once). When it was shown until this message (the
    peer wrote first and is no contact), the state event ``event_type`` is appended in
    the same statement. Whether it was shown (None: it was closed already, or there is
    no dialog).

    ``distributed`` (Citus): two statements in one transaction. Citus runs the first on
    the owner's shard, where a function that writes distributed tables cannot run; the
    event is appended by a statement of its own."""
    if distributed:
        if isinstance(db, asyncpg.Pool):
            async with db.acquire() as conn, conn.transaction():
                return await _close_on_reply_in_two(conn, owner, peer, date, event_type, payload)
        async with db.transaction():
            return await _close_on_reply_in_two(db, owner, peer, date, event_type, payload)
    value = await db.fetchval(
        """
        WITH closed AS (
            UPDATE dialogs d SET peer_settings_hidden = true
             WHERE d.user_id = $1 AND d.peer_user_id = $2 AND NOT d.peer_settings_hidden
            RETURNING NOT EXISTS (SELECT 1 FROM contacts c
                                   WHERE c.owner_user_id = $1 AND c.contact_user_id = $2)
                  AND EXISTS (SELECT 1 FROM message_boxes b
                               WHERE b.owner_user_id = $1 AND b.peer_user_id = $2
                                 AND NOT b.out AND NOT b.deleted)
                  AND (SELECT count(*) FROM (SELECT 1 FROM message_boxes b
                                              WHERE b.owner_user_id = $1 AND b.peer_user_id = $2
                                                AND b.out AND NOT b.deleted
                                              LIMIT 2) o) = 1 AS shown
        )
        SELECT shown,
               CASE WHEN shown THEN telesrv_append_state_event(
                   p_user_id => $1, p_event_type => $4, p_date => $3, p_peer_user_id => $2,
                   p_payload => $5) END AS state_id
          FROM closed
        """,
        owner,
        peer,
        date,
        event_type,
        payload,
    )
    return None if value is None else bool(value)


async def _close_on_reply_in_two(
    conn: asyncpg.Connection,
    owner: int,
    peer: int,
    date: int,
    event_type: str,
    payload: dict[str, Any],
) -> bool | None:
    shown = await conn.fetchval(
        """
        UPDATE dialogs d SET peer_settings_hidden = true
         WHERE d.user_id = $1 AND d.peer_user_id = $2 AND NOT d.peer_settings_hidden
        RETURNING NOT EXISTS (SELECT 1 FROM contacts c
                               WHERE c.owner_user_id = $1 AND c.contact_user_id = $2)
              AND EXISTS (SELECT 1 FROM message_boxes b
                           WHERE b.owner_user_id = $1 AND b.peer_user_id = $2
                             AND NOT b.out AND NOT b.deleted)
              AND (SELECT count(*) FROM (SELECT 1 FROM message_boxes b
                                          WHERE b.owner_user_id = $1 AND b.peer_user_id = $2
                                            AND b.out AND NOT b.deleted
                                          LIMIT 2) o) = 1 AS shown
        """,
        owner,
        peer,
    )
    if shown:
        await conn.execute(
            """
            SELECT telesrv_append_state_event(
                p_user_id => $1, p_event_type => $3, p_date => $2, p_peer_user_id => $4,
                p_payload => $5)
            """,
            owner,
            date,
            event_type,
            peer,
            payload,
        )
    return None if shown is None else bool(shown)
