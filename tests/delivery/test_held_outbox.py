"""Outbox rows held by their writer: pushed by the process that committed them, delivered
by the workers only once the hold runs out (the writer died or its push failed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from telesrv.delivery.held_pushes import HeldPushes
from telesrv.delivery.outbox import OutboxDelivery
from telesrv.store import outbox as outbox_store
from telesrv.store.db import Db
from telesrv.store.update_log import UpdateEvent

from .test_outbox import Recorder, eventually, outbox_rows, start_parked

HOLD = 30.0
DATE = 1_700_000_000


@pytest.fixture(autouse=True)
async def empty_tables(db: Db) -> AsyncIterator[None]:
    await db.pool.execute("TRUNCATE dispatch_outbox, user_update_events")
    yield


async def append(db: Db, user_id: int, pts: int, hold: float | None) -> None:
    """One event and its outbox row, held for ``hold`` seconds (None: due at once)."""
    await db.pool.execute(
        """
        SELECT telesrv_append_event(
            p_user_id => $1, p_pts => $2, p_pts_count => 1, p_event_type => 'new_message',
            p_date => telesrv_hold_outbox(p_seconds => $3, p_pass => $4),
            p_box_ids => ARRAY[$2::integer])
        """,
        user_id,
        pts,
        hold,
        DATE,
    )


def event(user_id: int, pts: int) -> UpdateEvent:
    return UpdateEvent(user_id, pts, 1, "new_message", DATE, None, None, [pts], None)


class KnownRecorder(Recorder):
    """Also renders with the boxes given, recording them."""

    def __init__(self) -> None:
        super().__init__()
        self.known: list[list[Any]] = []

    async def render_known(
        self, groups: list[tuple[int, list[UpdateEvent]]], date: int, boxes: Sequence[Any]
    ) -> list[bytes | None]:
        self.known.append(list(boxes))
        return [await self.render(user_id, events, date) for user_id, events in groups]


def held_of(dispatcher: OutboxDelivery) -> HeldPushes:
    """The dispatcher's pushes of held rows (made when it has ``render_known``)."""
    assert dispatcher.held is not None
    return dispatcher.held


def make(db: Db, rec: KnownRecorder, **options: Any) -> OutboxDelivery:
    return OutboxDelivery(
        db,
        rec.render,
        rec.push,
        render_known=rec.render_known,
        clock=lambda: DATE + 0.5,
        lease=HOLD,
        **options,
    )


async def test_a_held_row_is_not_due_and_the_hold_ends_with_the_statement(db: Db) -> None:
    await append(db, 1, 1, HOLD)
    async with db.pool.acquire() as conn:  # one connection: the setting must not stay on it
        await conn.execute(
            """
            SELECT telesrv_append_event(
                p_user_id => 2, p_pts => 1, p_pts_count => 1, p_event_type => 'new_message',
                p_date => telesrv_hold_outbox(p_seconds => $1, p_pass => 1))
            """,
            HOLD,
        )
        await conn.execute(
            """
            SELECT telesrv_append_event(
                p_user_id => 3, p_pts => 1, p_pts_count => 1, p_event_type => 'new_message',
                p_date => 1)
            """
        )
    due = {r["target_user_id"]: r["due_in"] for r in await outbox_rows(db)}
    assert HOLD - 5 < due[1] <= HOLD
    assert HOLD - 5 < due[2] <= HOLD
    assert due[3] <= 0
    async with db.pool.acquire() as conn:
        claimed = await outbox_store.claim_batch_txn(conn, 10)
    assert [r.target_user_id for r in claimed] == [3]


async def test_a_null_hold_leaves_the_rows_due_at_once(db: Db) -> None:
    await append(db, 1, 1, None)
    [row] = await outbox_rows(db)
    assert row["due_in"] <= 0


async def test_push_held_pushes_with_the_given_boxes_then_deletes_the_rows(db: Db) -> None:
    rec = KnownRecorder()
    dispatcher = make(db, rec, reap_interval=0.01)
    await append(db, 1, 1, HOLD)
    await append(db, 2, 1, HOLD)
    await append(db, 2, 2, HOLD)  # another user's later event, untouched
    dispatcher.start()
    try:
        assert held_of(dispatcher).pushes_held
        boxes = ["box of 1", "box of 2"]
        await held_of(dispatcher).push_held([(event(1, 1), (7, 8)), (event(2, 1), None)], boxes)
        assert sorted(rec.pushes) == [(1, [1], (7, 8)), (2, [1], None)]
        assert rec.known == [boxes]

        async def only_the_other_left() -> bool:
            rows = await outbox_rows(db)
            return [(r["target_user_id"], r["pts"]) for r in rows] == [(2, 2)]

        await eventually(only_the_other_left)
        # The workers never saw the held rows: each was pushed once.
        assert await dispatcher.run_once() == 0
        assert sorted(rec.pushed_pts().values()) == [1, 1]
    finally:
        await dispatcher.stop()
    assert not held_of(dispatcher).pushes_held


async def test_stop_deletes_the_pushed_rows_still_waiting(db: Db) -> None:
    rec = KnownRecorder()
    dispatcher = make(db, rec, reap_interval=3600.0)
    await append(db, 1, 1, HOLD)
    dispatcher.start()
    await held_of(dispatcher).push_held([(event(1, 1), None)], [])
    assert len(await outbox_rows(db)) == 1  # the delete waits for its batch
    await dispatcher.stop()
    assert await outbox_rows(db) == []


async def test_a_failed_push_leaves_the_rows_for_the_workers_after_the_hold(db: Db) -> None:
    rec = KnownRecorder()
    rec.fail_users.add(1)
    dispatcher = make(db, rec, reap_interval=0.01)
    await append(db, 1, 1, HOLD)
    dispatcher.start()
    try:
        await held_of(dispatcher).push_held([(event(1, 1), None)], [])
        assert rec.pushes == []
        await asyncio.sleep(0.05)
        assert len(await outbox_rows(db)) == 1
    finally:
        await dispatcher.stop()
    assert len(await outbox_rows(db)) == 1


async def test_rows_of_a_writer_that_died_are_delivered_once_the_hold_runs_out(db: Db) -> None:
    rec = KnownRecorder()
    dispatcher = make(db, rec)
    await append(db, 1, 1, HOLD)  # committed; the writer died before its push
    assert await dispatcher.run_once() == 0
    # The hold runs out.
    await db.pool.execute("UPDATE dispatch_outbox SET available_at = now()")
    await append(db, 1, 2, None)
    assert await dispatcher.run_once() == 2
    assert rec.pushes == [(1, [1, 2], None)]
    assert await outbox_rows(db) == []


async def test_offline_users_rows_are_deleted_without_rendering(db: Db) -> None:
    rec = KnownRecorder()
    dispatcher = OutboxDelivery(
        db,
        rec.render,
        rec.push,
        render_known=rec.render_known,
        online=lambda user_id: user_id != 2,
        lease=HOLD,
        reap_interval=0.01,
    )
    await append(db, 1, 1, HOLD)
    await append(db, 2, 1, HOLD)
    dispatcher.start()
    try:
        await held_of(dispatcher).push_held([(event(1, 1), None), (event(2, 1), None)], [])
        assert [user for user, _, _ in rec.rendered] == [1]

        async def empty() -> bool:
            return await outbox_rows(db) == []

        await eventually(empty)
    finally:
        await dispatcher.stop()


async def test_delete_pts_rows_touches_only_the_given_keys(db: Db) -> None:
    for user, pts in [(1, 1), (1, 2), (2, 1)]:
        await append(db, user, pts, None)
    assert await outbox_store.delete_pts_rows(db.pool, [(1, 2), (2, 1), (3, 1)], HOLD) == 2
    assert [(r["target_user_id"], r["pts"]) for r in await outbox_rows(db)] == [(1, 1)]
    assert await outbox_store.delete_pts_rows(db.pool, [], HOLD) == 0


async def test_delete_pts_rows_takes_held_due_and_failed_rows(db: Db) -> None:
    # Rows held since a moment ago go by the first statement; a due row, a failed one
    # and one held for longer (due in 10 s: written 20 s ago) by the second.
    for user, pts in [(1, 1), (1, 2), (2, 1), (2, 2), (5, 1)]:
        await append(db, user, pts, HOLD)
    await append(db, 3, 1, None)
    await db.pool.execute(
        """
        UPDATE dispatch_outbox SET status = 'failed', available_at = now() + interval '1 hour'
         WHERE target_user_id = 2 AND pts = 2
        """
    )
    await db.pool.execute(
        """
        UPDATE dispatch_outbox SET available_at = now() + interval '10 seconds'
         WHERE target_user_id = 5
        """
    )
    keys = [(1, 1), (2, 1), (2, 2), (3, 1), (4, 1), (5, 1)]
    assert await outbox_store.delete_pts_rows(db.pool, keys, HOLD) == 5
    assert [(r["target_user_id"], r["pts"]) for r in await outbox_rows(db)] == [(1, 2)]
    assert await outbox_store.delete_pts_rows(db.pool, [(1, 2), (1, 2)], HOLD) == 1
    assert await outbox_rows(db) == []


class OnlyOthers:
    """A placement where user 1's only session is the excluded (7, 8)."""

    def __init__(self, rec: KnownRecorder) -> None:
        self.rec = rec

    def online(self, user_id: int) -> bool:
        return True

    def reaches(self, user_id: int, exclude: tuple[int, int] | None) -> bool:
        return not (user_id == 1 and exclude == (7, 8))

    def push(self, user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int:
        return self.rec.push(user_id, body, exclude)

    def flush(self) -> None:
        return None


async def test_a_group_reaching_no_session_is_not_rendered_but_done(db: Db) -> None:
    rec = KnownRecorder()

    async def locate(user_ids: list[int]) -> OnlyOthers:
        return OnlyOthers(rec)

    dispatcher = make(db, rec, reap_interval=0.01, locate=locate)
    await append(db, 1, 1, HOLD)
    await append(db, 2, 1, HOLD)
    dispatcher.start()
    try:
        await held_of(dispatcher).push_held([(event(1, 1), (7, 8)), (event(2, 1), None)], [])
        assert [user for user, _, _ in rec.rendered] == [2]

        async def empty() -> bool:
            return await outbox_rows(db) == []

        await eventually(empty)
    finally:
        await dispatcher.stop()


async def test_a_claimed_group_reaching_no_session_is_done_without_rendering(db: Db) -> None:
    """The workers skip what nobody but the excluded session would get, as push_held does."""
    rec = KnownRecorder()

    async def locate(user_ids: list[int]) -> OnlyOthers:
        return OnlyOthers(rec)

    dispatcher = make(db, rec, locate=locate)
    await db.pool.execute(
        """
        SELECT telesrv_append_event(
            p_user_id => 1, p_pts => 1, p_pts_count => 1, p_event_type => 'new_message',
            p_date => $1, p_box_ids => ARRAY[1], p_exclude_auth_key_id => 7,
            p_exclude_session_id => 8)
        """,
        DATE,
    )
    await append(db, 2, 1, None)
    dispatcher.start()
    try:

        async def empty() -> bool:
            return await outbox_rows(db) == []

        await eventually(empty)
        assert [user for user, _, _ in rec.rendered] == [2]
        assert rec.pushes == [(2, [1], None)]
    finally:
        await dispatcher.stop()


async def test_deleting_pushed_rows_does_not_wait_for_a_worker_holding_one(db: Db) -> None:
    await append(db, 1, 1, HOLD)
    await append(db, 2, 1, HOLD)
    await append(db, 3, 1, HOLD)
    # The reaper fell behind past the hold: 2's and 3's rows are due, and a worker has
    # claimed 3's (its transaction stays open while it waits for a pooled connection).
    await db.pool.execute(
        "UPDATE dispatch_outbox SET available_at = now() WHERE pts = 1 AND target_user_id > 1"
    )
    worker = await db.pool.acquire()
    reaper = await db.pool.acquire()
    try:
        claim = worker.transaction()
        await claim.start()
        claimed = await outbox_store.claim_batch_txn(worker, 1)
        assert [r.target_user_id for r in claimed] in ([2], [3])
        # Waiting for the worker's lock would end here with an error, not hang the test.
        await reaper.execute("SET lock_timeout = '5s'")
        keys = [(1, 1), (2, 1), (3, 1)]
        assert await outbox_store.delete_pts_rows(reaper, keys, HOLD) == 2
        await reaper.execute("RESET lock_timeout")
        assert [r["target_user_id"] for r in await outbox_rows(db)] == [claimed[0].target_user_id]
        # The worker delivers what it holds.
        assert await outbox_store.delete_claimed_txn(worker, claimed) == 1
        await claim.commit()
    finally:
        await db.pool.release(reaper)
        await db.pool.release(worker)
    assert await outbox_rows(db) == []


async def test_a_short_hold_never_waits_for_a_row_near_its_end(db: Db) -> None:
    # With a hold shorter than the window, the first statement (which waits for row
    # locks) reads only rows written less than half the hold ago. This row, held for
    # 4 s and due in 1 s, is locked as a claim would lock it once due: it is left to
    # its holder, not waited for.
    await append(db, 1, 1, 4.0)
    await db.pool.execute(
        "UPDATE dispatch_outbox SET available_at = now() + interval '1 second'"
        " WHERE target_user_id = 1"
    )
    holder = await db.pool.acquire()
    reaper = await db.pool.acquire()
    try:
        lock = holder.transaction()
        await lock.start()
        await holder.execute("SELECT 1 FROM dispatch_outbox WHERE target_user_id = 1 FOR UPDATE")
        # Waiting for that lock would end here with an error, not hang the test.
        await reaper.execute("SET lock_timeout = '5s'")
        assert await outbox_store.delete_pts_rows(reaper, [(1, 1)], 4.0) == 0
        await reaper.execute("RESET lock_timeout")
        await lock.rollback()
        assert await outbox_store.delete_pts_rows(reaper, [(1, 1)], 4.0) == 1
    finally:
        await db.pool.release(reaper)
        await db.pool.release(holder)
    assert await outbox_rows(db) == []


async def append_excluding(db: Db, user_id: int, pts: int, exclude: tuple[int, int]) -> None:
    await db.pool.execute(
        """
        SELECT telesrv_append_event(
            p_user_id => $1, p_pts => $2, p_pts_count => 1, p_event_type => 'read_history_inbox',
            p_date => telesrv_hold_outbox(p_seconds => $3, p_pass => $4),
            p_exclude_auth_key_id => $5, p_exclude_session_id => $6)
        """,
        user_id,
        pts,
        HOLD,
        DATE,
        *exclude,
    )


async def test_push_written_reads_the_held_events_back_and_pushes_them(db: Db) -> None:
    rec = KnownRecorder()
    # Workers that claim only when woken (their polls are an hour apart).
    dispatcher = make(db, rec, reap_interval=0.01, interval=3600.0)
    await start_parked(dispatcher, 2)
    try:
        await append_excluding(db, 1, 1, (7, 8))
        await append(db, 1, 2, HOLD)
        await append(db, 2, 1, HOLD)
        await append(db, 1, 3, HOLD)  # another write's
        await append(db, 2, 2, None)  # due at once: a worker's, not read back
        held = held_of(dispatcher)
        held.expect_pts([(1, 1, 2), (2, 1, 2)])
        await held.push_written([(1, 1, 2), (2, 1, 2)])
        assert sorted(rec.pushes) == [(1, [1], (7, 8)), (1, [2], None), (2, [1], None)]
        assert rec.known == [[]]  # nothing in hand: the renderer loads what it shows
        assert dispatcher.lowest_expected(1) is None  # settled once pushed

        async def deleted() -> bool:
            rows = await outbox_rows(db)
            return [(r["target_user_id"], r["pts"]) for r in rows] == [(1, 3), (2, 2)]

        await eventually(deleted)
    finally:
        await dispatcher.stop()


async def test_a_failed_read_back_leaves_the_rows_held(
    db: Db, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rec = KnownRecorder()
    dispatcher = make(db, rec, reap_interval=0.01)
    await append(db, 1, 1, HOLD)

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionResetError("the database went away")

    monkeypatch.setattr(outbox_store, "held_events", refused)
    dispatcher.start()
    try:
        held = held_of(dispatcher)
        held.expect_pts([(1, 1, 1)])
        await held.push_written([(1, 1, 1)])  # does not raise
        assert "pushing committed events failed" in caplog.text
        assert dispatcher.lowest_expected(1) is None  # settled all the same
        assert rec.pushes == []
        [row] = await outbox_rows(db)
        assert row["due_in"] > HOLD / 2  # a worker delivers it once the hold runs out
    finally:
        await dispatcher.stop()


async def test_a_later_push_waits_for_a_write_announced_before_it(db: Db) -> None:
    """A send's own push of pts 6 is ready while the write of pts 5 is in its
    transaction: it goes once pts 5 is pushed, right after that write's commit."""
    rec = KnownRecorder()
    dispatcher = make(db, rec, order_wait=60.0)
    dispatcher.start()
    held = held_of(dispatcher)
    try:
        held.expect_pts([(1, 5, 5)])
        await held.push_held([(event(1, 6), None)], [])
        await asyncio.sleep(0.05)
        assert rec.pushes == []  # waits for pts 5
        await append(db, 1, 5, HOLD)  # the write commits
        await held.push_written([(1, 5, 5)])
        assert rec.pushes == [(1, [5], None), (1, [6], None)]
    finally:
        await dispatcher.stop()


async def test_stop_waits_for_the_writes_pushes_under_way(db: Db) -> None:
    """A write's push that has not read its events back yet when the outbox stops is
    still made, and its rows deleted, before stop returns."""
    rec = KnownRecorder()
    dispatcher = make(db, rec, reap_interval=3600.0)
    dispatcher.start()
    held = held_of(dispatcher)
    await append(db, 1, 1, HOLD)
    rec.gate = asyncio.Event()  # rendering waits for it
    held.expect_pts([(1, 1, 1)])
    write = asyncio.create_task(held.push_written([(1, 1, 1)]))
    await rec.rendering.wait()
    write.cancel()  # the request's cancellation does not stop the push
    stopping = asyncio.create_task(dispatcher.stop())
    await asyncio.sleep(0.05)
    assert not stopping.done()  # waits for the push under way
    rec.gate.set()
    await stopping
    assert write.cancelled()
    assert rec.pushes == [(1, [1], None)]
    assert await outbox_rows(db) == []
