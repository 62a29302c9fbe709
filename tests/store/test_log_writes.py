"""Pts taken for work that fails become noops."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from telesrv.store.counters import Allocation
from telesrv.store.db import Db
from telesrv.store.log_writes import filled_on_failure

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
