"""Pts taken for work that fails become noops; a write tells the delivery of its process
which pts it took, and when they are committed."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from telesrv.store import update_log as update_log_store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db
from telesrv.store.log_writes import LogWrites, filled_on_failure

_user_ids = itertools.count(7_300_000_000)


async def _committed(db: Db, user_id: int) -> list[tuple[int, str]]:
    rows = await db.pool.fetch(
        "SELECT pts, event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts", user_id
    )
    return [(row["pts"], row["event_type"]) for row in rows]


async def test_failed_work_leaves_its_pts_as_noops_and_fails_as_it_did(db: Db) -> None:
    a, b = next(_user_ids), next(_user_ids)
    taken = [Allocation(a, 3, 4, 1, 2), Allocation(b, 0, 0, 5, 5)]  # b took no pts
    failure = ValueError("the send's own")
    with pytest.raises(ValueError) as raised:
        async with filled_on_failure(db, taken, 100):
            raise failure
    assert raised.value is failure
    assert await _committed(db, a) == [(3, "noop"), (4, "noop")]
    assert await _committed(db, b) == []


async def test_cancelled_work_fills_too_and_work_that_ends_fills_nothing(db: Db) -> None:
    a, b = next(_user_ids), next(_user_ids)
    with pytest.raises(asyncio.CancelledError):
        async with filled_on_failure(db, [Allocation(a, 1, 1, 1, 1)], 100):
            raise asyncio.CancelledError
    assert await _committed(db, a) == [(1, "noop")]
    async with filled_on_failure(db, [Allocation(b, 1, 1, 1, 1)], 100):
        pass
    assert await _committed(db, b) == []


class Announced:
    """A PtsDelivery recording what a write tells it, in order."""

    lease = 30.0

    def __init__(self, *, running: bool = True) -> None:
        self.pushes_held = running
        self.calls: list[tuple[str, list[tuple[int, int, int]]]] = []

    def expect_pts(self, ranges: Sequence[tuple[int, int, int]]) -> None:
        self.calls.append(("expect", list(ranges)))

    async def push_written(self, ranges: Sequence[tuple[int, int, int]]) -> None:
        self.calls.append(("push", list(ranges)))

    def settle_pts(self, ranges: Sequence[tuple[int, int, int]]) -> None:
        self.calls.append(("settle", list(ranges)))


async def _append_events(conn: Any, allocations: list[Allocation]) -> None:
    for a in allocations:
        for pts in range(a.first_pts, a.last_pts + 1):
            await update_log_store.append_event_txn(conn, a.user_id, pts, "read_history_inbox", 1)


async def _held(db: Db, users: list[int]) -> list[tuple[int, int, bool]]:
    """Each outbox row of these users: whether it is held (due well after now)."""
    rows = await db.pool.fetch(
        "SELECT target_user_id, pts, available_at > now() + interval '20 seconds' AS held"
        " FROM dispatch_outbox WHERE target_user_id = ANY($1::bigint[]) ORDER BY 1, 2",
        users,
    )
    return [(r["target_user_id"], r["pts"], r["held"]) for r in rows]


async def test_a_write_holds_its_rows_and_hands_them_over_once_committed(
    db: Db, redis: Any
) -> None:
    a, b = next(_user_ids), next(_user_ids)
    delivery = Announced()
    log_writes = LogWrites(db, Counters(redis, db), delivery)
    takes = [(a, 2, 0), (b, 1, 0)]
    _, allocations = await log_writes.write("two_users", takes, _append_events, now=1)
    ranges = [(a, 1, 2), (b, 1, 1)]
    assert [(x.user_id, x.first_pts, x.last_pts) for x in allocations] == ranges
    # Settled by the delivery once pushed, not here.
    assert delivery.calls == [("expect", ranges), ("push", ranges)]
    assert await _held(db, [a, b]) == [(a, 1, True), (a, 2, True), (b, 1, True)]


async def test_without_a_running_outbox_a_write_tells_nothing_and_holds_nothing(
    db: Db, redis: Any
) -> None:
    a = next(_user_ids)
    delivery = Announced(running=False)
    log_writes = LogWrites(db, Counters(redis, db), delivery)
    await log_writes.write("not_held", [(a, 1, 0)], _append_events, now=1)
    assert delivery.calls == []
    assert await _held(db, [a]) == [(a, 1, False)]


async def test_a_failed_write_is_settled_and_not_pushed(db: Db, redis: Any) -> None:
    a = next(_user_ids)
    delivery = Announced()
    log_writes = LogWrites(db, Counters(redis, db), delivery)

    async def fails(conn: Any, allocations: list[Allocation]) -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError):
        await log_writes.write("fails", [(a, 1, 0)], fails, now=1)
    assert delivery.calls == [("expect", [(a, 1, 1)]), ("settle", [(a, 1, 1)])]
    assert await _committed(db, a) == [(1, "noop")]


async def test_a_write_that_takes_no_pts_tells_nothing(db: Db, redis: Any) -> None:
    a = next(_user_ids)
    delivery = Announced()
    log_writes = LogWrites(db, Counters(redis, db), delivery)
    await log_writes.write("box_ids_only", [(a, 0, 1)], _append_events, now=1)
    assert delivery.calls == []
