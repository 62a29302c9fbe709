"""The update log: events by pts, the difference queries and pts gaps filled."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.frozen_slots import quick_init
from telesrv.store.rows import from_row


async def fill_pts(db: Executor, user_id: int, pts: Sequence[int], date: int) -> None:
    """Write 'noop' events for allocated pts that no transaction used."""
    await db.execute(
        "SELECT telesrv_fill_pts(p_user => $1, p_pts => $2, p_date => $3)", user_id, list(pts), date
    )


@quick_init
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


async def events_at(
    db: Executor, keys: Sequence[tuple[int, int]], *, distributed: bool = False
) -> list[UpdateEvent]:
    """Events by (user_id, pts), for the dispatcher's batches: a LATERAL probe per key
    (OFFSET 0 keeps it a nested loop, each probe pruned to one partition at run time).
    A plain join is planned as a hash join over a Seq Scan of the whole log while the
    log is small enough, and then costs more with every event the log holds.
    ``distributed`` (Citus): a plain join with the keys, which Citus runs on every shard
    at once (it cannot push the fenced LATERAL down); the outbox makes it a join by
    probes on the workers too (``citus.probe_joins_txn``)."""
    if distributed:
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
    rows = await db.fetch(
        f"""
        SELECT {", ".join("e." + c.strip() for c in _EVENT_COLUMNS.split(","))}
          FROM unnest($1::bigint[], $2::integer[]) AS k(user_id, pts)
         CROSS JOIN LATERAL (
               SELECT * FROM user_update_events l
                WHERE l.user_id = k.user_id AND l.pts = k.pts
               OFFSET 0) e
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
    db: Executor,
    auth_key_id: int,
    user_id: int,
    pts: int,
    date: int,
    state_id: int | None = None,
) -> None:
    """What this device has consumed (update_states): its pts and, unless ``state_id``
    is None, its cursor in the state log too, in one statement. Neither moves back
    (answers may finish out of order); GREATEST skips the NULL of a cursor not given."""
    await db.execute(
        """
        INSERT INTO update_states (auth_key_id, user_id, pts, date, state_id, updated_at)
        VALUES ($1, $2, $3, $4, $5, now())
        ON CONFLICT (auth_key_id, user_id) DO UPDATE
           SET pts = GREATEST(update_states.pts, EXCLUDED.pts), date = EXCLUDED.date,
               state_id = GREATEST(update_states.state_id, EXCLUDED.state_id),
               updated_at = EXCLUDED.updated_at
        """,
        auth_key_id,
        user_id,
        pts,
        date,
        state_id,
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
