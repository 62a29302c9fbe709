"""The account's state log (updates with no pts) and each device's cursor in it.

One function per query. Events come back as ``UpdateEvent`` with pts and pts_count 0,
so one renderer serves both logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.update_log import UpdateEvent


def _event(r: asyncpg.Record) -> UpdateEvent:
    return UpdateEvent(
        user_id=r["user_id"],
        pts=0,
        pts_count=0,
        event_type=r["event_type"],
        date=r["date"],
        peer_user_id=r["peer_user_id"],
        max_id=None,
        box_ids=None,
        payload=r["payload"],
    )


async def append_txn(
    conn: asyncpg.Connection,
    user_id: int,
    event_type: str,
    date: int,
    *,
    peer_user_id: int | None = None,
    payload: dict[str, Any] | None = None,
    exclude_auth_key_id: int | None = None,
    exclude_session_id: int | None = None,
) -> int:
    """Append one state event and its outbox row in the caller's transaction; its id.

    Taking the id locks the user's head row until commit, so a user's state events
    commit in id order and a rolled-back transaction gives its id back.
    """
    state_id = await conn.fetchval(
        """
        SELECT telesrv_append_state_event(
               p_user_id => $1, p_event_type => $2, p_date => $3, p_peer_user_id => $4,
               p_payload => $5, p_exclude_auth_key_id => $6, p_exclude_session_id => $7)
        """,
        user_id,
        event_type,
        date,
        peer_user_id,
        payload,
        exclude_auth_key_id,
        exclude_session_id,
    )
    return int(state_id)


async def head(db: Executor, user_id: int) -> int:
    """The id of the user's newest committed state event (0: none)."""
    value = await db.fetchval("SELECT last_id FROM user_state_heads WHERE user_id = $1", user_id)
    return 0 if value is None else int(value)


async def events_after(
    db: Executor, user_id: int, after_id: int, limit: int
) -> list[tuple[int, UpdateEvent]]:
    """(id, event) of the state events above ``after_id``, oldest first."""
    rows = await db.fetch(
        """
        SELECT id, user_id, event_type, date, peer_user_id, payload FROM user_state_events
         WHERE user_id = $1 AND id > $2 ORDER BY id LIMIT $3
        """,
        user_id,
        after_id,
        limit,
    )
    return [(r["id"], _event(r)) for r in rows]


async def events_at(
    db: Executor, keys: Sequence[tuple[int, int]], *, distributed: bool = False
) -> dict[tuple[int, int], Any]:
    """State events by (user_id, id), for the dispatcher's batches: a LATERAL probe per
    key, as ``update_log.events_at`` (a plain join may hash the whole log).
    ``distributed`` (Citus): a plain join with the keys, run on every shard at once, as
    ``update_log.events_at``."""
    if distributed:
        rows = await db.fetch(
            """
            SELECT e.id, e.user_id, e.event_type, e.date, e.peer_user_id, e.payload
              FROM unnest($1::bigint[], $2::bigint[]) AS k(user_id, id)
              JOIN user_state_events e ON e.user_id = k.user_id AND e.id = k.id
            """,
            [k[0] for k in keys],
            [k[1] for k in keys],
        )
        return {(r["user_id"], r["id"]): _event(r) for r in rows}
    rows = await db.fetch(
        """
        SELECT e.id, e.user_id, e.event_type, e.date, e.peer_user_id, e.payload
          FROM unnest($1::bigint[], $2::bigint[]) AS k(user_id, id)
         CROSS JOIN LATERAL (
               SELECT * FROM user_state_events l
                WHERE l.user_id = k.user_id AND l.id = k.id
               OFFSET 0) e
        """,
        [k[0] for k in keys],
        [k[1] for k in keys],
    )
    return {(r["user_id"], r["id"]): _event(r) for r in rows}


async def device_cursor(db: Executor, auth_key_id: int, user_id: int) -> int | None:
    """The last state event this device was given (None: it never asked for its state)."""
    value = await db.fetchval(
        "SELECT state_id FROM update_states WHERE auth_key_id = $1 AND user_id = $2",
        auth_key_id,
        user_id,
    )
    return None if value is None else int(value)


async def save_device_cursor(db: Executor, auth_key_id: int, user_id: int, state_id: int) -> None:
    """Move the device's cursor forward (never back: answers may finish out of order)."""
    await db.execute(
        """
        INSERT INTO update_states (auth_key_id, user_id, state_id, updated_at)
        VALUES ($1, $2, $3, now())
        ON CONFLICT (auth_key_id, user_id) DO UPDATE
           SET state_id = GREATEST(update_states.state_id, EXCLUDED.state_id),
               updated_at = EXCLUDED.updated_at
        """,
        auth_key_id,
        user_id,
        state_id,
    )
