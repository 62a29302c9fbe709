"""Pushes for one user leave the dispatcher in pts order, on a real PostgreSQL: a writer's
own pushes and the workers' batches, whichever renders first.

Renders and placements wait on events the tests set; the order wait is long, so that
nothing here depends on how fast the machine is, except the one test of the wait
running out, which only waits for it to happen.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from telesrv.delivery.outbox import OutboxDelivery
from telesrv.store.db import Db
from telesrv.store.update_log import UpdateEvent

from .test_held_outbox import HOLD, KnownRecorder, OnlyOthers, append, event, held_of
from .test_outbox import add_row, eventually, outbox_rows

LONG_WAIT = 3600.0


@pytest.fixture(autouse=True)
async def empty_tables(db: Db) -> AsyncIterator[None]:
    await db.pool.execute("TRUNCATE dispatch_outbox, user_update_events")
    yield


class OrderRecorder(KnownRecorder):
    def order(self) -> list[tuple[int, list[int]]]:
        """(user, pts) of each push, in the order they were made."""
        return [(user, pts) for user, pts, _ in self.pushes]


class SlowRecorder(OrderRecorder):
    """Renders the pushes of the pts in ``slow`` only once ``slow_gate`` is set, and those
    of the pts in ``invisible`` as nothing."""

    def __init__(self, slow: set[int], invisible: frozenset[int] = frozenset()) -> None:
        super().__init__()
        self.slow = slow
        self.invisible = invisible
        self.slow_gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def render(self, user_id: int, events: list[UpdateEvent], date: int) -> bytes | None:
        pts = {e.pts for e in events}
        if self.slow & pts:
            self.waiting.set()
            await self.slow_gate.wait()
        body = await super().render(user_id, events, date)
        return None if self.invisible & pts else body


@contextlib.asynccontextmanager
async def worker_batch(
    dispatcher: OutboxDelivery, reached: asyncio.Event, gate: asyncio.Event
) -> AsyncIterator[asyncio.Task[int]]:
    """A worker's batch, claimed and stopped where it sets ``reached`` until ``gate`` is
    set. On the way out the gate opens and the batch ends, whatever the test found: a
    batch left waiting would keep its rows locked for the next test."""
    worker = asyncio.create_task(dispatcher.run_once())
    try:
        async with asyncio.timeout(10):
            await reached.wait()
        yield worker
    finally:
        gate.set()
        await asyncio.wait([worker], timeout=10)


def make(db: Db, rec: KnownRecorder, **options: Any) -> OutboxDelivery:
    options.setdefault("order_wait", LONG_WAIT)
    return OutboxDelivery(
        db,
        rec.render,
        rec.push,
        render_known=rec.render_known,
        clock=lambda: 1_700_000_000.5,
        lease=HOLD,
        reap_interval=0.01,
        **options,
    )


async def test_two_held_pushes_leave_in_pts_order_when_the_first_renders_slower(
    db: Db,
) -> None:
    rec = SlowRecorder(slow={1})
    dispatcher = make(db, rec)
    await append(db, 1, 1, HOLD)
    await append(db, 1, 2, HOLD)
    dispatcher.start()
    first = asyncio.create_task(held_of(dispatcher).push_held([(event(1, 1), None)], []))
    try:
        async with asyncio.timeout(10):
            await rec.waiting.wait()  # pts 1 is rendering
        await held_of(dispatcher).push_held([(event(1, 2), None)], [])  # rendered, held back
        assert rec.pushes == []
        # Another user's push is not held back by user 1's.
        await held_of(dispatcher).push_held([(event(2, 7), None)], [])
        assert rec.order() == [(2, [7])]
        rec.slow_gate.set()
        await first
        assert rec.order() == [(2, [7]), (1, [1]), (1, [2])]

        async def deleted() -> bool:
            return await outbox_rows(db) == []

        await eventually(deleted)
    finally:
        rec.slow_gate.set()
        await asyncio.wait([first], timeout=10)
        await dispatcher.stop()


async def test_a_held_push_waits_for_a_send_still_in_its_transaction(db: Db) -> None:
    rec = OrderRecorder()
    dispatcher = make(db, rec)
    dispatcher.start()
    try:
        # Sends took pts 5, 6 and 7 of user 1; 7 commits first, then 5; 6 fails.
        held_of(dispatcher).expect_pts([(1, 5, 5), (1, 6, 6), (1, 7, 7), (2, 3, 3)])
        await held_of(dispatcher).push_held([(event(1, 7), None)], [])
        assert rec.pushes == []
        await held_of(dispatcher).push_held([(event(1, 5), None)], [])
        assert rec.order() == [(1, [5])]  # 7 still waits for 6
        held_of(dispatcher).settle_pts([(1, 6, 6), (2, 3, 3)])
        assert rec.order() == [(1, [5]), (1, [7])]
    finally:
        await dispatcher.stop()


async def test_a_held_push_waits_for_a_workers_batch_of_a_lower_pts(db: Db) -> None:
    rec = SlowRecorder(slow={1})
    dispatcher = make(db, rec)
    await add_row(db, 1, 1)  # written without a hold: a worker pushes it
    await append(db, 1, 2, HOLD)
    async with worker_batch(dispatcher, rec.waiting, rec.slow_gate) as worker:
        # The writer's push needs a started dispatcher (whose workers find nothing:
        # the one due row is claimed).
        dispatcher.start()
        try:
            await held_of(dispatcher).push_held([(event(1, 2), None)], [])
            assert rec.pushes == []
            rec.slow_gate.set()
            assert await worker == 1
            assert rec.order() == [(1, [1]), (1, [2])]
        finally:
            await dispatcher.stop()


async def test_a_workers_group_with_nobody_to_push_to_lets_the_next_push_go(db: Db) -> None:
    """Rows skipped because only the session that caused them is online hold nothing up."""
    rec = OrderRecorder()
    located = asyncio.Event()
    go_on = asyncio.Event()

    async def locate(user_ids: list[int]) -> OnlyOthers:
        if not located.is_set():  # the worker's batch: it waits
            located.set()
            await go_on.wait()
        return OnlyOthers(rec)

    dispatcher = make(db, rec, locate=locate)
    await db.pool.execute(
        """
        SELECT telesrv_append_event(
            p_user_id => 1, p_pts => 1, p_pts_count => 1, p_event_type => 'new_message',
            p_date => 1, p_box_ids => ARRAY[1], p_exclude_auth_key_id => 7,
            p_exclude_session_id => 8)
        """
    )
    async with worker_batch(dispatcher, located, go_on) as worker:
        # The batch holds pts 1 and looks up where user 1 is.
        dispatcher.start()
        try:
            await held_of(dispatcher).push_held([(event(1, 2), None)], [])
            assert rec.pushes == []
            go_on.set()
            assert await worker == 1
            assert rec.order() == [(1, [2])]  # pts 1 reached nobody: not pushed
            assert [user for user, _, _ in rec.rendered] == [1]  # nor rendered
        finally:
            await dispatcher.stop()


async def test_a_workers_group_that_renders_nothing_lets_the_next_push_go(db: Db) -> None:
    rec = SlowRecorder(slow={1}, invisible=frozenset({1}))
    dispatcher = make(db, rec)
    await add_row(db, 1, 1)
    await append(db, 1, 2, HOLD)
    async with worker_batch(dispatcher, rec.waiting, rec.slow_gate) as worker:
        dispatcher.start()
        try:
            await held_of(dispatcher).push_held([(event(1, 2), None)], [])
            assert rec.pushes == []
            rec.slow_gate.set()
            assert await worker == 1
            assert rec.order() == [(1, [2])]
        finally:
            await dispatcher.stop()


async def test_a_held_back_push_goes_once_the_wait_runs_out(db: Db) -> None:
    rec = OrderRecorder()
    dispatcher = make(db, rec, order_wait=0.05)
    dispatcher.start()
    try:
        held_of(dispatcher).expect_pts([(1, 5, 5)])  # a send that never settles
        await held_of(dispatcher).push_held([(event(1, 6), None)], [])

        async def pushed() -> bool:
            return rec.order() == [(1, [6])]

        await eventually(pushed)
    finally:
        await dispatcher.stop()


async def test_stop_sends_what_is_held_back(db: Db) -> None:
    rec = OrderRecorder()
    dispatcher = make(db, rec)
    await append(db, 1, 6, HOLD)
    dispatcher.start()
    try:
        held_of(dispatcher).expect_pts([(1, 5, 5)])
        await held_of(dispatcher).push_held([(event(1, 6), None)], [])
        assert rec.pushes == []
    finally:
        await dispatcher.stop()
    assert rec.order() == [(1, [6])]
    assert await outbox_rows(db) == []  # pushed, so its row was deleted too
