"""A worker's batch whose push is held back for a lower pts of its user, on a real
PostgreSQL: it keeps its transaction (and its rows) until the push went, then deletes
the rows; a held-back push that raises when it finally goes puts its group back.

What the dispatcher does is logged in one list as it happens: each push, and each delete
and retry of claimed rows (the store functions, wrapped). A batch that deleted or
committed before its push would have logged the delete by the time the test looks: the
worker goes from handing its push over to the delete without waiting for anything but
the push. The order wait is long, so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg
import pytest

from telesrv.store import outbox as outbox_store
from telesrv.store.db import Db
from telesrv.store.outbox import OutboxRow

from .test_held_outbox import HOLD, append, event, held_of
from .test_outbox import add_row, outbox_rows
from .test_outbox_order import OrderRecorder, make

# (what happened, the (user, pts) it was about)
Step = tuple[str, list[tuple[int, int]]]

# A hang guard only: every wait below ends on an event the test causes.
HANG_GUARD = 10.0


@pytest.fixture(autouse=True)
async def empty_tables(db: Db) -> AsyncIterator[None]:
    await db.pool.execute("TRUNCATE dispatch_outbox, user_update_events")
    yield


def keys(rows: Sequence[OutboxRow]) -> list[tuple[int, int]]:
    return [(r.target_user_id, r.pts or 0) for r in rows]


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[Step]:
    """The log, with the deletes and retries of claimed rows in it (the real ones run)."""
    log: list[Step] = []
    delete = outbox_store.delete_claimed_txn
    retry = outbox_store.retry_claimed_txn

    async def logged_delete(
        conn: asyncpg.Connection, rows: Sequence[OutboxRow], **kwargs: Any
    ) -> int:
        log.append(("delete", keys(rows)))
        deleted: int = await delete(conn, rows, **kwargs)
        return deleted

    async def logged_retry(conn: asyncpg.Connection, rows: Sequence[OutboxRow], *args: Any) -> int:
        log.append(("retry", keys(rows)))
        failed: int = await retry(conn, rows, *args)
        return failed

    monkeypatch.setattr(outbox_store, "delete_claimed_txn", logged_delete)
    monkeypatch.setattr(outbox_store, "retry_claimed_txn", logged_retry)
    return log


class StepRecorder(OrderRecorder):
    """Logs each push in ``steps``; a push to a user in ``fail_pushes`` raises."""

    def __init__(self, steps: list[Step]) -> None:
        super().__init__()
        self.steps = steps
        self.fail_pushes: set[int] = set()

    def push(self, user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int:
        pts = [(user_id, p) for p, _ in json.loads(body)]
        if user_id in self.fail_pushes:
            self.steps.append(("push failed", pts))
            raise RuntimeError(f"cannot push to {user_id}")
        self.steps.append(("push", pts))
        return super().push(user_id, body, exclude)


async def row_keys(db: Db) -> list[tuple[int, int]]:
    return [(r["target_user_id"], r["pts"]) for r in await outbox_rows(db)]


async def claimable(db: Db) -> list[OutboxRow]:
    """What another worker's claim would take now (rows a batch holds are skipped)."""
    async with db.pool.acquire() as conn, conn.transaction():
        rows: list[OutboxRow] = await outbox_store.claim_batch_txn(conn, 100)
    return rows


@pytest.mark.parametrize("lower", ["settled", "pushed"])
async def test_a_batch_held_back_by_an_announced_pts_keeps_its_rows_until_it_pushed(
    db: Db, steps: list[Step], lower: str
) -> None:
    rec = StepRecorder(steps)
    dispatcher = make(db, rec)
    if lower == "pushed":
        await append(db, 1, 5, HOLD)  # the send's row: its writer pushes it
    await add_row(db, 1, 6)  # written without a hold: a worker pushes it
    # A send of user 1 took pts 5 and is still in its transaction.
    held_of(dispatcher).expect_pts([(1, 5, 5)])
    worker = asyncio.create_task(dispatcher.run_once())
    try:
        async with asyncio.timeout(HANG_GUARD):
            await rec.rendering.wait()  # the batch rendered pts 6 and handed its push over
        # Held back for pts 5: not pushed, the rows neither deleted nor committed, the
        # claim still held.
        assert rec.pushes == []
        assert steps == []
        assert not worker.done()
        assert await row_keys(db) == ([(1, 5)] if lower == "pushed" else []) + [(1, 6)]
        assert await claimable(db) == []

        if lower == "settled":
            held_of(dispatcher).settle_pts([(1, 5, 5)])  # the send failed: pts 5 is not coming
            assert steps == [("push", [(1, 6)])]
        else:
            await held_of(dispatcher).push_held([(event(1, 5), None)], [])
            held_of(dispatcher).settle_pts([(1, 5, 5)])
            assert steps == [("push", [(1, 5)]), ("push", [(1, 6)])]
        async with asyncio.timeout(HANG_GUARD):
            assert await worker == 1
        # The rows went once the push had gone, and the batch committed.
        assert steps[-2:] == [("push", [(1, 6)]), ("delete", [(1, 6)])]
        assert await row_keys(db) == ([(1, 5)] if lower == "pushed" else [])
        await dispatcher.stop()  # deletes the held row pushed by its writer
        assert await row_keys(db) == []
        assert set(rec.pushed_pts().values()) == {1}  # nothing pushed twice
    finally:
        held_of(dispatcher).settle_pts([(1, 5, 5)])
        await asyncio.wait([worker], timeout=HANG_GUARD)
        await dispatcher.stop()


async def test_a_held_back_batch_push_that_raises_puts_its_group_back(
    db: Db, steps: list[Step]
) -> None:
    rec = StepRecorder(steps)
    rec.fail_pushes.add(1)
    # Backoff far beyond the test: "due later" does not depend on its speed.
    dispatcher = make(db, rec, retry_base=3600.0, retry_cap=3600.0)
    await add_row(db, 1, 6)
    await add_row(db, 2, 1)
    held_of(dispatcher).expect_pts([(1, 5, 5)])
    worker = asyncio.create_task(dispatcher.run_once())
    try:
        async with asyncio.timeout(HANG_GUARD):
            await rec.pushed.wait()
        # User 2's group went at once; user 1's waits for pts 5, the batch with it.
        assert steps == [("push", [(2, 1)])]
        assert not worker.done()
        assert await row_keys(db) == [(1, 6), (2, 1)]

        held_of(dispatcher).settle_pts([(1, 5, 5)])  # pts 6 goes now, and its push raises
        assert steps == [("push", [(2, 1)]), ("push failed", [(1, 6)])]
        async with asyncio.timeout(HANG_GUARD):
            assert await worker == 2
        assert steps[2:] == [("retry", [(1, 6)]), ("delete", [(2, 1)])]
        # The failed group is back, due later, its claim counted; the other is gone.
        [row] = await outbox_rows(db)
        assert (row["target_user_id"], row["pts"], row["status"], row["attempts"]) == (
            1,
            6,
            "pending",
            1,
        )
        assert "cannot push to 1" in row["last_error"]
        assert row["due_in"] > 0
        assert await dispatcher.run_once() == 0

        # Nothing lost: once due, it is delivered.
        rec.fail_pushes.clear()
        await db.pool.execute("UPDATE dispatch_outbox SET available_at = now()")
        assert await dispatcher.run_once() == 1
        assert rec.order() == [(2, [1]), (1, [6])]
        assert await row_keys(db) == []
    finally:
        held_of(dispatcher).settle_pts([(1, 5, 5)])
        await asyncio.wait([worker], timeout=HANG_GUARD)
        await dispatcher.stop()
