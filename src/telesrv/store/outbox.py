"""The dispatch outbox: claim, delete and retry rows; one function per query.

A claim leases its rows: it pushes their ``available_at`` past the lease and counts the
attempt, so the rows of a worker that dies come back once the lease runs out. Handled
rows are deleted; rows that keep failing end in the terminal ``'failed'`` status, kept
for inspection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.rows import from_row

# (target_user_id, id): the outbox primary key
OutboxKey = tuple[int, int]


@dataclass(frozen=True, slots=True)
class OutboxRow:
    target_user_id: int
    id: int
    pts: int | None  # a pts event, or
    exclude_auth_key_id: int | None
    exclude_session_id: int | None
    attempts: int  # claims so far, this one included
    state_id: int | None = None  # a state event (updates with no pts)

    @property
    def key(self) -> OutboxKey:
        return (self.target_user_id, self.id)

    @property
    def exclude(self) -> tuple[int, int] | None:
        """The session that caused the update, which must not get it pushed."""
        if self.exclude_auth_key_id is None or self.exclude_session_id is None:
            return None
        return (self.exclude_auth_key_id, self.exclude_session_id)


async def claim_batch_txn(
    conn: asyncpg.Connection, limit: int, lease_seconds: float
) -> list[OutboxRow]:
    """Lease up to ``limit`` due rows, oldest first, skipping rows other workers hold.

    ``due`` walks the partial index ``dispatch_outbox_claim`` of every partition (a
    Merge Append on available_at) and locks what it takes. The UPDATE finds those rows
    again by (tableoid, ctid), which cannot move while we hold the lock: joining back
    by primary key instead makes the planner price a probe into every partition per
    row, and it then prefers a hash join over a Seq Scan of the whole outbox.
    """
    rows = await conn.fetch(
        """
        WITH due AS (
            SELECT tableoid AS part, ctid AS tid
              FROM dispatch_outbox
             WHERE status = 'pending' AND available_at <= now()
             ORDER BY available_at
             LIMIT $1
               FOR UPDATE SKIP LOCKED
        )
        UPDATE dispatch_outbox o
           SET available_at = now() + make_interval(secs => $2::float8),
               attempts = o.attempts + 1
         WHERE o.ctid = ANY (ARRAY(SELECT tid FROM due))
           AND (o.tableoid, o.ctid) IN (SELECT part, tid FROM due)
        RETURNING o.target_user_id, o.id, o.pts, o.exclude_auth_key_id, o.exclude_session_id,
                  o.attempts, o.state_id
        """,
        limit,
        lease_seconds,
    )
    return [from_row(OutboxRow, r) for r in rows]


# Rows by key: a LATERAL probe per key (OFFSET 0 keeps it a nested loop, so each probe
# is pruned to one partition at run time), then the rows by (tableoid, ctid). A plain
# join with unnest() is planned as a hash join over a Seq Scan of every partition once
# the key list is longer than a handful.


async def delete_rows(db: Executor, keys: Sequence[OutboxKey]) -> int:
    """Delete handled rows; returns how many were still there."""
    if not keys:
        return 0
    status = await db.execute(
        """
        WITH doomed AS (
            SELECT r.part, r.tid
              FROM unnest($1::bigint[], $2::bigint[]) AS k(target_user_id, id),
                   LATERAL (SELECT o.tableoid AS part, o.ctid AS tid
                              FROM dispatch_outbox o
                             WHERE o.target_user_id = k.target_user_id AND o.id = k.id
                            OFFSET 0) r
        )
        DELETE FROM dispatch_outbox o
         WHERE o.ctid = ANY (ARRAY(SELECT tid FROM doomed))
           AND (o.tableoid, o.ctid) IN (SELECT part, tid FROM doomed)
        """,
        [k[0] for k in keys],
        [k[1] for k in keys],
    )
    return int(status.rsplit(" ", 1)[-1])


async def delete_pts_rows(db: Executor, keys: Sequence[tuple[int, int]]) -> int:
    """Delete the pts events' rows by (target user, pts), for rows whose writer pushed
    them itself (it never learnt their ids); returns how many were still there. A user
    has few rows at a time, so the probe by target user and then pts stays small."""
    if not keys:
        return 0
    status = await db.execute(
        """
        WITH doomed AS (
            SELECT r.part, r.tid
              FROM unnest($1::bigint[], $2::integer[]) AS k(target_user_id, pts),
                   LATERAL (SELECT o.tableoid AS part, o.ctid AS tid
                              FROM dispatch_outbox o
                             WHERE o.target_user_id = k.target_user_id AND o.pts = k.pts
                            OFFSET 0) r
        )
        DELETE FROM dispatch_outbox o
         WHERE o.ctid = ANY (ARRAY(SELECT tid FROM doomed))
           AND (o.tableoid, o.ctid) IN (SELECT part, tid FROM doomed)
        """,
        [k[0] for k in keys],
        [k[1] for k in keys],
    )
    return int(status.rsplit(" ", 1)[-1])


async def retry_rows(
    db: Executor,
    keys: Sequence[OutboxKey],
    backoff_seconds: float,
    max_attempts: int,
    error: str,
) -> int:
    """Make rows due again after ``backoff_seconds``, or 'failed' once they used up
    ``max_attempts`` claims; returns how many turned 'failed'."""
    if not keys:
        return 0
    failed = await db.fetchval(
        """
        WITH target AS (
            SELECT r.part, r.tid
              FROM unnest($1::bigint[], $2::bigint[]) AS k(target_user_id, id),
                   LATERAL (SELECT o.tableoid AS part, o.ctid AS tid
                              FROM dispatch_outbox o
                             WHERE o.target_user_id = k.target_user_id AND o.id = k.id
                            OFFSET 0) r
        ), changed AS (
            UPDATE dispatch_outbox o
               SET status = CASE WHEN o.attempts >= $4 THEN 'failed' ELSE 'pending' END,
                   available_at = now() + make_interval(secs => $3::float8),
                   last_error = $5
             WHERE o.ctid = ANY (ARRAY(SELECT tid FROM target))
               AND (o.tableoid, o.ctid) IN (SELECT part, tid FROM target)
            RETURNING o.status
        )
        SELECT count(*) FILTER (WHERE status = 'failed') FROM changed
        """,
        [k[0] for k in keys],
        [k[1] for k in keys],
        backoff_seconds,
        max_attempts,
        error,
    )
    return int(failed)


async def pending_count(db: Executor) -> int:
    return int(await db.fetchval("SELECT count(*) FROM dispatch_outbox WHERE status = 'pending'"))


async def failed_count(db: Executor) -> int:
    return int(await db.fetchval("SELECT count(*) FROM dispatch_outbox WHERE status = 'failed'"))


@dataclass(frozen=True, slots=True)
class Backlog:
    pending: int
    failed: int
    # Seconds the oldest due pending row has waited since it became due (0: none due).
    oldest_due_seconds: float


async def backlog(db: Executor) -> Backlog:
    """The outbox's size and lag, for the metrics; the age reads the claim index."""
    row = await db.fetchrow(
        """
        SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
               count(*) FILTER (WHERE status = 'failed') AS failed,
               (SELECT extract(epoch FROM now() - min(available_at))
                  FROM dispatch_outbox
                 WHERE status = 'pending' AND available_at <= now()) AS oldest
          FROM dispatch_outbox
        """
    )
    assert row is not None
    return Backlog(
        pending=int(row["pending"]),
        failed=int(row["failed"]),
        oldest_due_seconds=max(0.0, float(row["oldest"] or 0.0)),
    )


@dataclass(frozen=True, slots=True)
class FailedRow:
    target_user_id: int
    id: int
    pts: int | None
    state_id: int | None
    attempts: int
    available_at: datetime  # when it would have been retried
    last_error: str | None


async def list_failed(db: Executor, *, user_id: int | None, limit: int) -> list[FailedRow]:
    """Rows that ended 'failed', oldest first (of one target user, or of everyone)."""
    rows = await db.fetch(
        """
        SELECT target_user_id, id, pts, state_id, attempts, available_at, last_error
          FROM dispatch_outbox
         WHERE status = 'failed' AND ($1::bigint IS NULL OR target_user_id = $1)
         ORDER BY available_at, target_user_id, id
         LIMIT $2
        """,
        user_id,
        limit,
    )
    return [
        FailedRow(
            target_user_id=r["target_user_id"],
            id=r["id"],
            pts=r["pts"],
            state_id=r["state_id"],
            attempts=r["attempts"],
            available_at=r["available_at"],
            last_error=r["last_error"],
        )
        for r in rows
    ]


async def requeue_failed(db: Executor, *, user_id: int | None) -> int:
    """Failed rows become pending and due now, with their attempts counted from zero."""
    status = await db.execute(
        """
        UPDATE dispatch_outbox
           SET status = 'pending', attempts = 0, available_at = now(), last_error = NULL
         WHERE status = 'failed' AND ($1::bigint IS NULL OR target_user_id = $1)
        """,
        user_id,
    )
    return int(status.rsplit(" ", 1)[-1])


async def purge_failed(db: Executor, *, user_id: int | None) -> int:
    """Delete failed rows: their updates stay in the users' logs (getDifference finds
    them); only the push is given up."""
    status = await db.execute(
        """
        DELETE FROM dispatch_outbox
         WHERE status = 'failed' AND ($1::bigint IS NULL OR target_user_id = $1)
        """,
        user_id,
    )
    return int(status.rsplit(" ", 1)[-1])
