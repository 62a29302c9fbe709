"""The contexts around a send's write: pts filled on failure, pts announced to the pushes."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence

import pytest

from telesrv.services.held_pushes import expecting
from telesrv.services.update_log import PtsRange
from telesrv.store.counters import Allocation
from telesrv.store.db import Db
from telesrv.store.log_writes import filled_on_failure
from telesrv.store.messages import BoxMessage
from telesrv.store.update_log import UpdateEvent

_user_ids = itertools.count(7_300_000_000)


async def _committed(db: Db, user_id: int) -> list[tuple[int, str]]:
    rows = await db.pool.fetch(
        "SELECT pts, event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts", user_id
    )
    return [(row["pts"], row["event_type"]) for row in rows]


async def test_failed_work_leaves_its_pts_as_noops_and_fails_as_it_did(db: Db) -> None:
    a, b = next(_user_ids), next(_user_ids)
    taken = [Allocation(a, 3, 4, 1, 2), Allocation(b, 0, 0, 5, 5)]  # b took no pts
    with pytest.raises(ValueError, match="the send's own"):
        async with filled_on_failure(db, taken, 100):
            raise ValueError("the send's own")
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


class _Held:
    """Records what a send announces and settles (it pushes nothing)."""

    lease = 1.0
    pushes_held = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[PtsRange]]] = []

    async def push_held(
        self,
        events: Sequence[tuple[UpdateEvent, tuple[int, int] | None]],
        boxes: Sequence[BoxMessage],
    ) -> None:
        raise AssertionError("nothing is pushed here")

    def expect_pts(self, ranges: Sequence[PtsRange]) -> None:
        self.calls.append(("expect", list(ranges)))

    def settle_pts(self, ranges: Sequence[PtsRange]) -> None:
        self.calls.append(("settle", list(ranges)))


def test_a_send_s_pts_are_announced_then_settled_whatever_becomes_of_it() -> None:
    held = _Held()
    taken = [Allocation(1, 3, 4, 1, 2), Allocation(2, 0, 0, 5, 5)]  # 2 took no pts
    with pytest.raises(KeyError), expecting(held, taken):
        assert held.calls == [("expect", [(1, 3, 4)])]
        raise KeyError
    assert held.calls == [("expect", [(1, 3, 4)]), ("settle", [(1, 3, 4)])]
    with expecting(None, taken):  # nobody pushes here: nothing to announce
        pass
