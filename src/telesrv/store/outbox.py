"""The dispatch outbox: claim, delete and retry rows; one function per query.

A worker claims rows by locking them in a transaction it keeps open while it pushes
them, and deletes (or puts back for a retry) what it handled before it commits: the
rows of a worker that dies (its connection drops, or PostgreSQL ends its transaction
after it waited past the lease for its client, the pool's
``idle_in_transaction_session_timeout``) are unlocked at once, due as they were. Rows
that keep failing end in the terminal ``'failed'`` status, kept for inspection. Rows
pushed by their writer (held rows) are deleted by (target user, pts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.rows import from_row
from telesrv.store.update_log import UpdateEvent

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
        return excluded_session(self.exclude_auth_key_id, self.exclude_session_id)


def excluded_session(auth_key_id: int | None, session_id: int | None) -> tuple[int, int] | None:
    """A row's (auth_key_id, session_id) to skip, None when it skips none."""
    if auth_key_id is None or session_id is None:
        return None
    return (auth_key_id, session_id)


async def claim_batch_txn(
    conn: asyncpg.Connection, limit: int, *, distributed: bool = False
) -> list[OutboxRow]:
    """Lock up to ``limit`` due rows, oldest first, skipping rows other workers hold, for
    the rest of the transaction; ``attempts`` counts this claim.

    ``distributed`` (Citus, which cannot lock rows of many shards in one statement): the
    users with the oldest due rows are read first, without locks, then each one's rows
    are claimed by a statement on that user's shard.

    The scan walks the partial index ``dispatch_outbox_claim`` of every partition (a
    Merge Append on available_at). Locking instead of leasing with an UPDATE saves a new
    row version and two index entries per row.
    """
    rows = (
        await conn.fetch(
            """
        SELECT target_user_id, id, pts, exclude_auth_key_id, exclude_session_id,
               attempts + 1 AS attempts, state_id
          FROM dispatch_outbox
         WHERE status = 'pending' AND available_at <= now()
         ORDER BY available_at
         LIMIT $1
           FOR UPDATE SKIP LOCKED
        """,
            limit,
        )
        if not distributed
        else await _claim_per_user(conn, limit)
    )
    return [from_row(OutboxRow, r) for r in rows]


async def _claim_per_user(conn: asyncpg.Connection, limit: int) -> list[asyncpg.Record]:
    users = await conn.fetch(
        """
        SELECT target_user_id FROM dispatch_outbox
         WHERE status = 'pending' AND available_at <= now()
         GROUP BY target_user_id
         ORDER BY min(available_at)
         LIMIT $1
        """,
        limit,
    )
    rows: list[asyncpg.Record] = []
    for user in users:
        rows += await conn.fetch(
            """
            SELECT target_user_id, id, pts, exclude_auth_key_id, exclude_session_id,
                   attempts + 1 AS attempts, state_id
              FROM dispatch_outbox
             WHERE target_user_id = $1 AND status = 'pending' AND available_at <= now()
             ORDER BY available_at
             LIMIT $2
               FOR UPDATE SKIP LOCKED
            """,
            user["target_user_id"],
            limit - len(rows),
        )
        if len(rows) >= limit:
            break
    return rows


async def hold_rows_txn(conn: asyncpg.Connection, seconds: float) -> None:
    """The pts events' rows appended in the rest of this transaction are held for
    ``seconds`` (``telesrv_hold_outbox``, 0015): their writer pushes them."""
    await conn.execute("SELECT telesrv_hold_outbox(p_seconds => $1, p_pass => 0)", seconds)


async def held_events(
    db: Executor, keys: Sequence[tuple[int, int]]
) -> list[tuple[UpdateEvent, tuple[int, int] | None]]:
    """The events of these (target user, pts) whose rows are still held, each with the
    session its push skips: what a write that held its rows reads back after its commit
    to push them. One statement per user (a write touches one or two), on that user's
    partition or shard, by the primary key's user prefix (a user's rows are few: they
    are deleted once pushed)."""
    by_user: dict[int, list[int]] = {}
    for user, pts in keys:
        by_user.setdefault(user, []).append(pts)
    found: list[tuple[UpdateEvent, tuple[int, int] | None]] = []
    for user, ptss in sorted(by_user.items()):
        rows = await db.fetch(
            """
            SELECT e.user_id, e.pts, e.pts_count, e.event_type, e.date, e.peer_user_id,
                   e.max_id, e.box_ids, e.payload,
                   o.exclude_auth_key_id, o.exclude_session_id
              FROM dispatch_outbox o
              JOIN user_update_events e ON e.user_id = o.target_user_id AND e.pts = o.pts
             WHERE o.target_user_id = $1 AND o.pts = ANY($2::integer[])
               AND e.user_id = $1 AND e.pts = ANY($2::integer[])
               AND o.status = 'pending' AND o.available_at > now()
             ORDER BY e.pts
            """,
            user,
            ptss,
        )
        found += [
            (
                from_row(UpdateEvent, r),
                excluded_session(r["exclude_auth_key_id"], r["exclude_session_id"]),
            )
            for r in rows
        ]
    return found


async def any_due(db: Executor) -> bool:
    """Whether a claim would find a row: an idle poll asks this in one statement instead
    of opening a transaction to claim nothing. Ordered like the claim, so it reads the
    claim index: a bare EXISTS may be planned as a Seq Scan, which reads every held row
    when none is due."""
    found = await db.fetchval(
        """
        SELECT available_at FROM dispatch_outbox
         WHERE status = 'pending' AND available_at <= now()
         ORDER BY available_at
         LIMIT 1
        """
    )
    return found is not None


async def delete_claimed_txn(
    conn: asyncpg.Connection, rows: Sequence[OutboxRow], *, distributed: bool = False
) -> int:
    """Delete handled rows this transaction claimed; returns how many.

    By primary key, joined with the keys in a plan made for any keys
    (``telesrv_delete_outbox_rows``, 0021 and 0030): a nested loop of primary key
    probes, past the smallest outboxes, whatever the statistics say. The keys given as
    two arrays to every partition cost each partition a pass over both arrays. ``distributed``
    (Citus): one statement, which Citus runs on the shards of the batch's users at once;
    ids are unique across users (an identity, drawn on each node from a range of its
    own), so ``id = ANY`` alone names exactly the rows, and the users prune the shards.
    Citus would lock each shard against every other statement of this kind until the
    commit, so that the batches of all workers would delete one after another; the rows
    are this transaction's own (claimed FOR UPDATE), so the deletes of two batches
    commute, and the statement says so."""
    if not rows:
        return 0
    if distributed:
        await conn.execute("SET LOCAL citus.all_modifications_commutative = on")
        status = await conn.execute(
            "DELETE FROM dispatch_outbox"
            " WHERE target_user_id = ANY($1::bigint[]) AND id = ANY($2::bigint[])",
            sorted({r.target_user_id for r in rows}),
            [r.id for r in rows],
        )
        return int(status.rsplit(" ", 1)[-1])
    deleted = await conn.fetchval(
        "SELECT telesrv_delete_outbox_rows(p_target_user_ids => $1, p_ids => $2)",
        [r.target_user_id for r in rows],
        [r.id for r in rows],
    )
    return int(deleted)


async def retry_claimed_txn(
    conn: asyncpg.Connection,
    rows: Sequence[OutboxRow],
    backoff_seconds: float,
    max_attempts: int,
    error: str,
) -> int:
    """Make rows this transaction claimed due again after ``backoff_seconds``, or
    'failed' once they used up ``max_attempts`` claims; returns how many turned
    'failed'. By primary key as two arrays (``= ANY``), read from the primary key index
    of each partition; ids come from one identity sequence, so ``id = ANY`` finds
    exactly the given rows, and the pair is checked too, so a wrong user never matches.
    (Only a batch's failed groups come here, seldom and few.)"""
    if not rows:
        return 0
    failed = await conn.fetchval(
        """
        WITH changed AS (
            UPDATE dispatch_outbox o
               SET attempts = o.attempts + 1,
                   status = CASE WHEN o.attempts + 1 >= $3 THEN 'failed' ELSE 'pending' END,
                   available_at = now() + make_interval(secs => $4::float8),
                   last_error = $5
             WHERE o.target_user_id = ANY ($1::bigint[]) AND o.id = ANY ($2::bigint[])
               AND o.target_user_id = ($1::bigint[])[array_position($2::bigint[], o.id)]
            RETURNING o.status
        )
        SELECT count(*) FILTER (WHERE status = 'failed') FROM changed
        """,
        [r.target_user_id for r in rows],
        [r.id for r in rows],
        max_attempts,
        backoff_seconds,
        error,
    )
    return int(failed)


async def back_off_rows(
    db: Executor,
    rows: Sequence[OutboxRow],
    backoff_seconds: float,
    error: str,
    *,
    distributed: bool = False,
) -> int:
    """Count a claim that rolled back (its batch raised) and make the rows due only after
    ``backoff_seconds``; returns how many rows changed. A row is skipped when another
    worker holds it or has claimed it since (its attempts moved on): that claim counts
    for itself. Never 'failed': what makes a whole batch raise (Redis away, the
    database) is seldom the rows' fault. ``distributed`` (Citus): the same statement
    for one target user at a time, on that user's shard."""
    if not rows:
        return 0
    if distributed:
        by_user: dict[int, list[OutboxRow]] = {}
        for r in rows:
            by_user.setdefault(r.target_user_id, []).append(r)
        changed = 0
        for _, own in sorted(by_user.items()):
            changed += await back_off_rows(db, own, backoff_seconds, error)
        return changed
    status = await db.execute(
        """
        WITH mine AS (
            SELECT o.id
              FROM dispatch_outbox o
             WHERE o.target_user_id = ANY ($1::bigint[]) AND o.id = ANY ($2::bigint[])
               AND o.target_user_id = ($1::bigint[])[array_position($2::bigint[], o.id)]
               AND o.attempts = ($3::integer[])[array_position($2::bigint[], o.id)] - 1
               AND o.status = 'pending'
               FOR UPDATE SKIP LOCKED
        )
        UPDATE dispatch_outbox o
           SET attempts = o.attempts + 1,
               available_at = now() + make_interval(secs => $4::float8),
               last_error = $5
         WHERE o.target_user_id = ANY ($1::bigint[])
           AND o.id = ANY (ARRAY(SELECT id FROM mine))
        """,
        [r.target_user_id for r in rows],
        [r.id for r in rows],
        [r.attempts for r in rows],
        backoff_seconds,
        error,
    )
    return int(status.rsplit(" ", 1)[-1])


# How long after its send a held row's writer may still delete it through the claim
# index (it does within moments); a row it deletes later goes by the slower statement.
HELD_DELETE_WINDOW_SECONDS = 5.0


async def delete_pts_rows(
    db: Executor, keys: Sequence[tuple[int, int]], hold: float, *, distributed: bool = False
) -> int:
    """Delete the pts events' rows by (target user, pts), for rows whose writer pushed
    them itself (it never learnt their ids) after holding them for ``hold`` seconds;
    returns how many were still there.

    Rows written less than ``HELD_DELETE_WINDOW_SECONDS`` ago (and less than half the
    hold, for a short hold) and still held go at once, through
    ``telesrv_delete_held_outbox_rows`` (0022): a plan made for any keys that reads only
    the slice of the claim index where such rows lie. That statement waits for row
    locks, so the slice ends well before the rows in it come due (half a short hold):
    no worker's claim can hold one of them while it runs. Any other row of a key (held
    longer, put back, failed, past its hold, or one that came into the slice after the
    first statement began) is taken by a second statement, only when the first found
    fewer rows than keys, and only when no worker holds it: a worker whose claim holds
    it, kept open while the worker waits for another pooled connection, could
    otherwise be left without one while this waits for its lock, holding a
    connection. A worker that holds one delivers it.

    ``distributed`` (Citus): the same two steps, one target user per statement, each on
    that user's shard."""
    if not keys:
        return 0
    if distributed:
        return await _delete_pts_rows_per_user(db, keys, hold)
    users = [k[0] for k in keys]
    ptss = [k[1] for k in keys]
    due_after = max(hold / 2, hold - HELD_DELETE_WINDOW_SECONDS)
    deleted = int(
        await db.fetchval(
            """
            SELECT telesrv_delete_held_outbox_rows(
                p_target_user_ids => $1, p_ptss => $2, p_due_after => $3, p_due_by => $4)
            """,
            users,
            ptss,
            due_after,
            hold,
        )
    )
    if deleted >= len(keys):
        return deleted
    # Seldom: a LATERAL probe per key (OFFSET 0 keeps it a nested loop, so each probe
    # is pruned to one partition at run time), then the rows by (tableoid, ctid). The
    # rows the first statement could take are gone; it does not leave out its slice,
    # which has moved on since (its now() is later): a row that came into the slice
    # meanwhile would be left to a worker, which would push it again.
    status = await db.execute(
        """
        WITH doomed AS (
            SELECT r.part, r.tid
              FROM unnest($1::bigint[], $2::integer[]) AS k(target_user_id, pts),
                   LATERAL (SELECT o.tableoid AS part, o.ctid AS tid
                              FROM dispatch_outbox o
                             WHERE o.target_user_id = k.target_user_id AND o.pts = k.pts
                            OFFSET 0
                               FOR UPDATE SKIP LOCKED) r
        )
        DELETE FROM dispatch_outbox o
         WHERE o.ctid = ANY (ARRAY(SELECT tid FROM doomed))
           AND (o.tableoid, o.ctid) IN (SELECT part, tid FROM doomed)
        """,
        users,
        ptss,
    )
    return deleted + int(status.rsplit(" ", 1)[-1])


async def _delete_pts_rows_per_user(
    db: Executor, keys: Sequence[tuple[int, int]], hold: float
) -> int:
    by_user: dict[int, list[int]] = {}
    for user, pts in keys:
        by_user.setdefault(user, []).append(pts)
    due_after = max(hold / 2, hold - HELD_DELETE_WINDOW_SECONDS)
    deleted = 0
    for user, ptss in sorted(by_user.items()):
        status = await db.execute(
            """
            DELETE FROM dispatch_outbox
             WHERE target_user_id = $1 AND pts = ANY($2::integer[]) AND status = 'pending'
               AND available_at > now() + make_interval(secs => $3)
               AND available_at <= now() + make_interval(secs => $4)
            """,
            user,
            ptss,
            due_after,
            hold,
        )
        found = int(status.rsplit(" ", 1)[-1])
        if found < len(ptss):
            status = await db.execute(
                """
                DELETE FROM dispatch_outbox
                 WHERE target_user_id = $1
                   AND id IN (SELECT id FROM dispatch_outbox
                               WHERE target_user_id = $1 AND pts = ANY($2::integer[])
                                 FOR UPDATE SKIP LOCKED)
                """,
                user,
                ptss,
            )
            found += int(status.rsplit(" ", 1)[-1])
        deleted += found
    return deleted


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
    """The outbox's size and lag, for the metrics: one pass over the table, which the
    counts make anyway (the age as a filtered aggregate: Citus cannot run a subquery in
    the select list of an aggregate over every shard)."""
    row = await db.fetchrow(
        """
        SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
               count(*) FILTER (WHERE status = 'failed') AS failed,
               extract(epoch FROM now() - min(available_at)
                         FILTER (WHERE status = 'pending' AND available_at <= now()))
                   AS oldest
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
