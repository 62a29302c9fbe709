"""A write's pts events pushed by the process that wrote them, right after its commit:
its rows claimed by (user, pts), without waiting for a worker; what a worker holds, or
what this could not claim, is left to the workers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from telesrv.delivery.outbox import OutboxDelivery
from telesrv.store import outbox as outbox_store
from telesrv.store.db import Db

from .test_held_outbox import KnownRecorder, event, held_of
from .test_held_outbox import make as make_held
from .test_outbox import Recorder, add_row, eventually, make_dispatcher, outbox_rows, start_parked


@pytest.fixture(autouse=True)
async def empty_tables(db: Db) -> AsyncIterator[None]:
    await db.pool.execute("TRUNCATE dispatch_outbox, user_update_events")
    yield


def rows_left(rows: list[Any]) -> list[tuple[int, int]]:
    return [(r["target_user_id"], r["pts"]) for r in rows]


async def parked(db: Db, rec: Recorder) -> OutboxDelivery:
    """Workers that claim only when woken (their polls are an hour apart)."""
    dispatcher = make_dispatcher(db, rec, interval=3600.0)
    await start_parked(dispatcher, 2)
    return dispatcher


async def test_the_writes_rows_are_pushed_and_deleted_without_a_worker(db: Db) -> None:
    rec = Recorder()
    dispatcher = await parked(db, rec)
    try:
        await add_row(db, 1, 1, (7, 8))
        await add_row(db, 1, 2)
        await add_row(db, 2, 1)
        await add_row(db, 1, 3)  # another write's
        await dispatcher.push_committed([(1, 1, 2), (2, 1, 1)])
        # Pushed before push_committed returned, by (user, excluded session).
        assert sorted(rec.pushes) == [(1, [1], (7, 8)), (1, [2], None), (2, [1], None)]
        assert rows_left(await outbox_rows(db)) == [(1, 3)]
    finally:
        await dispatcher.stop()


async def test_rows_a_worker_holds_are_left_to_it(db: Db) -> None:
    rec = Recorder()
    dispatcher = await parked(db, rec)
    try:
        held_by_worker = await add_row(db, 1, 1)
        await add_row(db, 1, 2)
        async with db.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "SELECT 1 FROM dispatch_outbox WHERE target_user_id = 1 AND id = $1 FOR UPDATE",
                held_by_worker,
            )
            await dispatcher.push_committed([(1, 1, 2)])
            assert rec.pushes == [(1, [2], None)]
        assert rows_left(await outbox_rows(db)) == [(1, 1)]
    finally:
        await dispatcher.stop()


async def test_an_outbox_that_does_not_run_leaves_the_rows_due(db: Db) -> None:
    rec = Recorder()
    dispatcher = make_dispatcher(db, rec)
    await add_row(db, 1, 1)
    await dispatcher.push_committed([(1, 1, 1)])
    assert rec.pushes == []
    [row] = await outbox_rows(db)
    assert row["due_in"] <= 0 and row["attempts"] == 0


async def test_a_failed_claim_leaves_the_rows_to_a_woken_worker(
    db: Db, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder()
    dispatcher = await parked(db, rec)

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionResetError("the database went away")

    monkeypatch.setattr(outbox_store, "claim_pts_txn", refused)
    caplog.set_level(logging.ERROR, logger="telesrv.delivery.outbox")
    try:
        await add_row(db, 1, 1)
        await dispatcher.push_committed([(1, 1, 1)])  # does not raise
        assert "pushing a write's events failed" in caplog.text

        async def delivered() -> bool:
            return rec.pushes == [(1, [1], None)] and await outbox_rows(db) == []

        await eventually(delivered)
    finally:
        await dispatcher.stop()


async def test_a_later_push_waits_for_the_write_announced_before_it(db: Db) -> None:
    """A send's own push of pts 6 is ready while the write of pts 5 is in its
    transaction: it goes once pts 5 is pushed, right after that write's commit."""
    rec = KnownRecorder()
    dispatcher = make_held(db, rec, interval=3600.0)
    await start_parked(dispatcher, 1)
    try:
        dispatcher.expect_pts([(1, 5, 5)])
        await add_row(db, 1, 6)  # the send's row (a held row in a server; due here)
        await held_of(dispatcher).push_held([(event(1, 6), None)], [])
        await asyncio.sleep(0.05)
        assert rec.pushes == []  # waits for pts 5
        await add_row(db, 1, 5)  # the write commits
        await dispatcher.push_committed([(1, 5, 5)])
        dispatcher.settle_pts([(1, 5, 5)])
        assert rec.pushes == [(1, [5], None), (1, [6], None)]
    finally:
        await dispatcher.stop()
