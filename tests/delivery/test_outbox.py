"""The outbox delivery and its store queries, on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import asyncpg
import pytest
from generic_plans import generic_plans, plan_nodes
from hypothesis import given
from hypothesis import strategies as st

from telesrv.config import MAX_OUTBOX_BATCH
from telesrv.delivery.outbox import (
    BATCH_GROWTH,
    IDLE_BACKOFF,
    OutboxDelivery,
    grown_batch_bound,
    retry_delay,
)
from telesrv.delivery.row_groups import group_rows
from telesrv.store import db as dbmod
from telesrv.store import dialogs as dialogs_store
from telesrv.store import history as history_store
from telesrv.store import outbox as outbox_store
from telesrv.store import state_log as state_log_store
from telesrv.store import update_log as update_log_store
from telesrv.store.db import Db
from telesrv.store.outbox import OutboxRow
from telesrv.store.update_log import UpdateEvent

AUTH_KEY = 0x1122334455667788
SESSION = 0x0102030405060708


@pytest.fixture(autouse=True)
async def empty_tables(db: Db) -> AsyncIterator[None]:
    await db.pool.execute("TRUNCATE dispatch_outbox, user_update_events")
    yield


async def add_event(db: Db, user_id: int, pts: int, event_type: str = "new_message") -> None:
    await db.pool.execute(
        """
        INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date, box_ids)
        VALUES ($1, $2::integer, 1, $3, 1700000000, ARRAY[$2::integer])
        """,
        user_id,
        pts,
        event_type,
    )


async def add_row(
    db: Db, user_id: int, pts: int, exclude: tuple[int, int] | None = None, *, event: bool = True
) -> int:
    """An event (unless ``event`` is false) and its outbox row; returns the row id."""
    if event:
        await add_event(db, user_id, pts)
    row_id = await db.pool.fetchval(
        """
        INSERT INTO dispatch_outbox (target_user_id, pts, exclude_auth_key_id, exclude_session_id)
        VALUES ($1, $2, $3, $4) RETURNING id
        """,
        user_id,
        pts,
        *(exclude or (None, None)),
    )
    return int(row_id)


async def outbox_rows(db: Db) -> list[Any]:
    return list(
        await db.pool.fetch(
            """
            SELECT target_user_id, pts, status, attempts, last_error,
                   EXTRACT(EPOCH FROM available_at - clock_timestamp())::float8 AS due_in
              FROM dispatch_outbox ORDER BY target_user_id, pts
            """
        )
    )


class Recorder:
    """render and push for the dispatcher, recording what they were given."""

    def __init__(self, reached: int = 1) -> None:
        self.reached = reached
        self.rendered: list[tuple[int, list[int], int]] = []
        self.pushes: list[tuple[int, list[int], tuple[int, int] | None]] = []
        self.fail_users: set[int] = set()
        self.invisible_users: set[int] = set()
        self.pushed = asyncio.Event()
        self.gate: asyncio.Event | None = None  # when set: render waits for it
        self.rendering = asyncio.Event()

    async def render(self, user_id: int, events: list[UpdateEvent], date: int) -> bytes | None:
        assert all(e.user_id == user_id for e in events)
        self.rendered.append((user_id, [e.pts for e in events], date))
        self.rendering.set()
        if self.gate is not None:
            await self.gate.wait()
        if user_id in self.fail_users:
            raise RuntimeError(f"cannot render for {user_id}")
        if user_id in self.invisible_users:
            return None
        return json.dumps([[e.pts, e.pts_count] for e in events]).encode()

    def push(self, user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int:
        self.pushes.append((user_id, [p for p, _ in json.loads(body)], exclude))
        self.pushed.set()
        return self.reached

    def pushed_pts(self) -> Counter[tuple[int, int]]:
        return Counter((user, pts) for user, ptss, _ in self.pushes for pts in ptss)


def make_dispatcher(db: Db, rec: Recorder, **options: Any) -> OutboxDelivery:
    options.setdefault("clock", lambda: 1_700_000_123.9)
    return OutboxDelivery(db, rec.render, rec.push, **options)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.01)


async def drained(db: Db) -> bool:
    return await outbox_store.pending_count(db.pool) == 0


async def start_parked(dispatcher: OutboxDelivery, workers: int) -> None:
    """Start the workers and return once each has made its first claim (which finds
    nothing) and waits for a wake: a row added after this is claimed only when woken,
    however the loop's turns fall on a loaded machine."""
    first_claims = 0
    parked = asyncio.Event()
    claim = dispatcher.run_once

    async def counted(*, probe: bool = True, limit: int | None = None) -> int:
        nonlocal first_claims
        claimed = await claim(probe=probe, limit=limit)
        assert claimed == 0, "the outbox was not empty"
        first_claims += 1
        if first_claims == workers:
            # The last worker goes on to wait for a wake before this test's turn.
            dispatcher.run_once = claim  # type: ignore[method-assign]
            parked.set()
        return claimed

    dispatcher.run_once = counted  # type: ignore[method-assign]
    dispatcher.start()
    async with asyncio.timeout(5.0):
        await parked.wait()


# -- grouping and delivery ------------------------------------------------------------


def test_group_rows_by_user_and_excluded_session_in_pts_order() -> None:
    def row(user: int, pts: int, exclude: tuple[int, int] | None = None) -> OutboxRow:
        auth_key_id, session_id = exclude or (None, None)
        return OutboxRow(user, pts * 10, pts, auth_key_id, session_id, 1)

    groups = group_rows(
        [row(2, 7), row(1, 5, (9, 9)), row(2, 3), row(1, 4), row(1, 2, (9, 9)), row(1, 6)]
    )
    assert [(key, [r.pts for r in rows]) for key, rows in groups] == [
        ((1, None), [4, 6]),
        ((1, (9, 9)), [2, 5]),
        ((2, None), [3, 7]),
    ]


_EXCLUDES = st.sampled_from([None, (9, 9), (8, 9)])


@given(
    st.lists(
        st.tuples(st.integers(1, 3), _EXCLUDES, st.none() | st.integers(1, 6), st.integers(1, 4)),
        max_size=30,
    )
)
def test_group_rows_is_all_rows_sorted_then_cut_at_each_group(
    specs: list[tuple[int, tuple[int, int] | None, int | None, int]],
) -> None:
    # The order a batch is handled in: by user, then its rows with no excluded session
    # before those with one (by the session), each group's pts events in pts order
    # and its state events (no pts) after them, by state id; rows equal in all of
    # that stay in the order claimed.
    rows = [
        OutboxRow(
            user,
            index,
            pts,
            exclude[0] if exclude else None,
            exclude[1] if exclude else None,
            1,
            state_id=None if pts is not None else state,
        )
        for index, (user, exclude, pts, state) in enumerate(specs)
    ]

    def order(r: OutboxRow) -> tuple[int, bool, tuple[int, int], int, int]:
        exclude = r.exclude
        pts = r.pts if r.pts is not None else 2**31
        return (r.target_user_id, exclude is not None, exclude or (0, 0), pts, r.state_id or 0)

    expected: list[tuple[tuple[int, tuple[int, int] | None], list[int]]] = []
    for r in sorted(rows, key=order):
        key = (r.target_user_id, r.exclude)
        if expected and expected[-1][0] == key:
            expected[-1][1].append(r.id)
        else:
            expected.append((key, [r.id]))
    assert [(key, [r.id for r in group]) for key, group in group_rows(rows)] == expected


async def test_batch_groups_by_user_and_exclusion_and_deletes_rows(db: Db) -> None:
    await add_row(db, 10, 2, (AUTH_KEY, SESSION))
    await add_row(db, 10, 1, (AUTH_KEY, SESSION))
    await add_row(db, 10, 3)
    await add_row(db, 11, 1)
    rec = Recorder()
    dispatcher = make_dispatcher(db, rec)

    assert await dispatcher.run_once() == 4

    assert sorted(rec.pushes, key=repr) == sorted(
        [
            (10, [1, 2], (AUTH_KEY, SESSION)),
            (10, [3], None),
            (11, [1], None),
        ],
        key=repr,
    )
    assert {date for _, _, date in rec.rendered} == {1_700_000_123}
    assert await outbox_rows(db) == []
    assert await dispatcher.run_once() == 0


async def test_rows_are_deleted_when_nobody_is_online_or_nothing_is_visible(db: Db) -> None:
    await add_row(db, 20, 1)
    await add_row(db, 21, 1)
    rec = Recorder(reached=0)
    rec.invisible_users.add(21)
    dispatcher = make_dispatcher(db, rec)

    assert await dispatcher.run_once() == 2

    assert rec.pushes == [(20, [1], None)]  # 21 rendered nothing, so nothing to push
    assert await outbox_rows(db) == []


async def test_offline_users_skip_rendering_when_presence_is_known(db: Db) -> None:
    await add_row(db, 30, 1)
    await add_row(db, 31, 1)
    rec = Recorder()
    dispatcher = make_dispatcher(db, rec, online=lambda user_id: user_id == 31)

    assert await dispatcher.run_once() == 2

    assert [user for user, _, _ in rec.rendered] == [31]
    assert rec.pushes == [(31, [1], None)]
    assert await outbox_rows(db) == []


async def test_a_row_without_its_event_is_dropped(db: Db) -> None:
    await add_row(db, 40, 1, event=False)
    rec = Recorder()
    dispatcher = make_dispatcher(db, rec)

    assert await dispatcher.run_once() == 1

    assert rec.rendered == [] and rec.pushes == []
    assert await outbox_rows(db) == []


async def test_workers_deliver_every_row_exactly_once(db: Db) -> None:
    expected = set()
    for user in range(100, 150):
        for pts in range(1, 13):
            await add_row(db, user, pts)
            expected.add((user, pts))
    rec = Recorder()
    dispatcher = make_dispatcher(db, rec, workers=4, batch=20, interval=0.01)

    dispatcher.start()
    try:
        await eventually(lambda: drained(db))
    finally:
        await dispatcher.stop()

    pushed = rec.pushed_pts()
    assert set(pushed) == expected
    assert max(pushed.values()) == 1
    for _, ptss, _ in rec.pushes:
        assert ptss == sorted(ptss)
    assert await outbox_rows(db) == []


async def claim_and_delete(conn: Any, limit: int) -> list[OutboxRow]:
    """What a worker's transaction does with rows it handled."""
    rows = await outbox_store.claim_batch_txn(conn, limit)
    await asyncio.sleep(0.01)  # other claims run meanwhile
    assert await outbox_store.delete_claimed_txn(conn, rows) == len(rows)
    return rows


async def test_concurrent_claims_never_share_a_row(db: Db) -> None:
    for user in range(200, 240):
        for pts in range(1, 11):
            await add_row(db, user, pts)

    claims = await asyncio.gather(
        *(db.run_txn("test_claim", claim_and_delete, 60) for _ in range(6))
    )

    keys = [row.key for claim in claims for row in claim]
    assert len(keys) == len(set(keys)) == 360
    assert all(row.attempts == 1 for claim in claims for row in claim)


async def test_claim_takes_the_oldest_due_rows_only(db: Db) -> None:
    await add_row(db, 50, 1)
    await add_row(db, 50, 2)
    await add_row(db, 51, 1)
    await add_row(db, 52, 1)
    await db.pool.execute(
        """
        UPDATE dispatch_outbox SET available_at = now() - interval '1 minute' * pts
         WHERE target_user_id = 50;
        UPDATE dispatch_outbox SET available_at = now() + interval '1 hour'
         WHERE target_user_id = 51;
        UPDATE dispatch_outbox SET status = 'failed' WHERE target_user_id = 52;
        """
    )

    first = await db.run_txn("test_claim", claim_and_delete, 1)
    rest = await db.run_txn("test_claim", claim_and_delete, 10)

    assert [(r.target_user_id, r.pts) for r in first] == [(50, 2)]  # due the earliest
    assert [(r.target_user_id, r.pts) for r in rest] == [(50, 1)]


# -- failures, retries, leases ------------------------------------------------------------


def test_retry_delay_doubles_up_to_the_cap() -> None:
    assert [retry_delay(n, 0.5, 5.0) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert retry_delay(10_000, 0.5, 5.0) == 5.0


async def test_failing_group_backs_off_then_fails_while_others_go_on(db: Db) -> None:
    await add_row(db, 60, 1)
    await add_row(db, 60, 2)
    await add_row(db, 61, 1)
    rec = Recorder()
    rec.fail_users.add(60)
    dispatcher = make_dispatcher(db, rec, max_attempts=3, retry_base=0.3, retry_cap=10.0)

    assert await dispatcher.run_once() == 3
    assert rec.pushes == [(61, [1], None)]  # the other user's group went through
    rows = await outbox_rows(db)
    assert [(r["target_user_id"], r["pts"], r["status"], r["attempts"]) for r in rows] == [
        (60, 1, "pending", 1),
        (60, 2, "pending", 1),
    ]
    assert "cannot render for 60" in rows[0]["last_error"]
    assert 0.1 < rows[0]["due_in"] <= 0.3

    assert await dispatcher.run_once() == 0  # backing off
    await asyncio.sleep(0.35)
    assert await dispatcher.run_once() == 2
    rows = await outbox_rows(db)
    assert [(r["status"], r["attempts"]) for r in rows] == [("pending", 2)] * 2
    assert 0.4 < rows[0]["due_in"] <= 0.6  # doubled

    await asyncio.sleep(0.65)
    assert await dispatcher.run_once() == 2
    rows = await outbox_rows(db)
    assert [(r["status"], r["attempts"]) for r in rows] == [("failed", 3)] * 2
    assert await outbox_store.failed_count(db.pool) == 2
    assert await outbox_store.pending_count(db.pool) == 0

    await asyncio.sleep(1.3)
    assert await dispatcher.run_once() == 0  # 'failed' is terminal
    assert [user for user, _, _ in rec.rendered].count(60) == 3


async def test_rows_of_a_worker_that_dies_mid_batch_come_back_at_once(db: Db) -> None:
    await add_row(db, 70, 1)
    await add_row(db, 71, 1)
    rec = Recorder()
    dispatcher = make_dispatcher(db, rec)
    # A worker claims in its transaction and dies before committing.
    dying = await db.pool.acquire()
    try:
        txn = dying.transaction()
        await txn.start()
        crashed = await outbox_store.claim_batch_txn(dying, 1)
        assert [(r.target_user_id, r.attempts) for r in crashed] == [(70, 1)]

        # Claimed rows are neither visible as pending to others nor claimable twice.
        assert await dispatcher.run_once() == 1
        assert rec.pushes == [(71, [1], None)]
        assert await dispatcher.run_once() == 0
    finally:
        backend = dying.get_server_pid()
        dying.terminate()
        await db.pool.release(dying)
    # The server ends that backend (and its transaction) when it sees the socket close,
    # which is not at once on a busy machine: until then the row is still locked.
    async with asyncio.timeout(30):
        while await db.pool.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", backend
        ):
            await asyncio.sleep(0.01)

    assert await dispatcher.run_once() == 1  # back, and due as it was
    assert rec.pushes == [(71, [1], None), (70, [1], None)]
    assert await outbox_rows(db) == []


async def test_a_claim_left_idle_past_the_lease_is_ended_by_the_server(
    db: Db, database_url: str
) -> None:
    await add_row(db, 72, 1)
    pool = await dbmod.create_pool(
        database_url, min_size=1, max_size=1, idle_transaction_timeout=0.2
    )
    try:
        async with pool.acquire() as stuck:
            txn = stuck.transaction()
            await txn.start()
            assert len(await outbox_store.claim_batch_txn(stuck, 10)) == 1
            # The worker stops talking to the server (stuck, or cut off) while it holds
            # the claim; the server ends its session, and the row is due again.
            rec = Recorder()
            dispatcher = make_dispatcher(db, rec)

            async def claimed_again() -> bool:
                return await dispatcher.run_once() == 1

            await eventually(claimed_again, timeout=30.0)
            assert rec.pushes == [(72, [1], None)]
            with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, OSError)):
                await stuck.fetchval("SELECT 1")
    finally:
        pool.terminate()


async def test_retry_and_delete_touch_only_the_given_claimed_rows(db: Db) -> None:
    await add_row(db, 80, 1, (AUTH_KEY, SESSION))
    await add_row(db, 81, 1)
    await add_row(db, 82, 1)
    await add_row(db, 83, 1)
    await db.pool.execute("UPDATE dispatch_outbox SET attempts = 4 WHERE target_user_id = 82")

    async def handle(conn: Any) -> list[OutboxRow]:
        rows = {r.target_user_id: r for r in await outbox_store.claim_batch_txn(conn, 10)}
        failed = await outbox_store.retry_claimed_txn(conn, [rows[80], rows[82]], 60.0, 5, "boom")
        assert failed == 1
        assert await outbox_store.delete_claimed_txn(conn, [rows[81]]) == 1
        assert await outbox_store.retry_claimed_txn(conn, [], 1.0, 1, "x") == 0
        assert await outbox_store.delete_claimed_txn(conn, []) == 0
        return list(rows.values())

    claimed = await db.run_txn("test_claim", handle)

    assert sorted((r.target_user_id, r.attempts) for r in claimed) == [
        (80, 1),
        (81, 1),
        (82, 5),
        (83, 1),
    ]
    rows = await outbox_rows(db)
    assert [(r["target_user_id"], r["status"], r["attempts"], r["last_error"]) for r in rows] == [
        (80, "pending", 1, "boom"),
        (82, "failed", 5, "boom"),
        (83, "pending", 0, None),  # claimed, neither handled nor failed: as it was
    ]
    assert 50 < rows[0]["due_in"] <= 60
    assert rows[2]["due_in"] <= 0


async def test_an_idle_poll_is_one_statement(db: Db) -> None:
    assert not await outbox_store.any_due(db.pool)
    await add_row(db, 83, 1)
    await db.pool.execute("UPDATE dispatch_outbox SET available_at = now() + interval '1 hour'")
    assert not await outbox_store.any_due(db.pool)  # held, not due
    await db.pool.execute("UPDATE dispatch_outbox SET available_at = now()")
    assert await outbox_store.any_due(db.pool)
    await db.pool.execute("UPDATE dispatch_outbox SET status = 'failed'")
    assert not await outbox_store.any_due(db.pool)


# -- the worker loop ------------------------------------------------------------------


async def test_wake_makes_an_idle_worker_claim_at_once(db: Db) -> None:
    rec = Recorder()
    dispatcher = make_dispatcher(db, rec, workers=2, interval=60.0)
    try:
        await start_parked(dispatcher, 2)  # both found nothing and wait for the interval
        await add_row(db, 90, 1)
        await asyncio.sleep(0.2)
        assert rec.pushes == []  # nobody polls before the interval ends

        dispatcher.wake()
        async with asyncio.timeout(2.0):
            await rec.pushed.wait()
        assert rec.pushes == [(90, [1], None)]
    finally:
        await asyncio.wait_for(dispatcher.stop(), 5.0)


async def test_idle_polls_back_off_until_woken_or_claiming(db: Db) -> None:
    """Claims that find nothing stretch the idle wait (doubling, up to IDLE_BACKOFF
    intervals); a wake or a claim that found rows brings it back to the interval."""
    dispatcher = make_dispatcher(db, Recorder(), workers=1, interval=1.0)
    claims = iter([0, 0, 0, 3, 0, 0, 0, 0, 0, 0])
    woken_at = {7}  # the eighth wait ends with a wake
    waits: list[float] = []
    probes: list[bool] = []

    async def run_once(*, probe: bool = True, limit: int | None = None) -> int:
        probes.append(probe)
        return next(claims)

    async def idle(seconds: float) -> bool:
        waits.append(seconds)
        if len(waits) == 10:
            dispatcher._stopping = True
        return len(waits) - 1 in woken_at

    dispatcher.run_once = run_once  # type: ignore[method-assign]
    dispatcher._idle = idle  # type: ignore[method-assign]
    await asyncio.wait_for(dispatcher._work(), 5.0)
    assert IDLE_BACKOFF == 8
    assert waits == [1.0, 2.0, 4.0, 1.0, 2.0, 4.0, 8.0, 8.0, 1.0, 2.0]
    # A poll after a timeout asks first whether anything is due; one after a wake claims.
    assert probes == [True] * 8 + [False, True]


async def test_a_full_batch_is_followed_by_a_claim_without_asking(db: Db) -> None:
    dispatcher = make_dispatcher(db, Recorder(), workers=1, interval=1.0, batch=5)
    claims = iter([5, 10, 2, 0])
    probes: list[bool] = []

    async def run_once(*, probe: bool = True, limit: int | None = None) -> int:
        probes.append(probe)
        return next(claims)

    async def idle(seconds: float) -> bool:
        dispatcher._stopping = len(probes) == 4
        return False

    dispatcher.run_once = run_once  # type: ignore[method-assign]
    dispatcher._idle = idle  # type: ignore[method-assign]
    await asyncio.wait_for(dispatcher._work(), 5.0)
    assert probes == [True, False, False, True]


async def test_full_claims_grow_up_to_the_bound_and_a_short_one_resets_them(db: Db) -> None:
    # Claims that come back full double the next one, up to BATCH_GROWTH times the
    # batch (at the bound, and not past it); one that comes back short goes back to
    # the batch.
    batch = 5
    bound = grown_batch_bound(batch)
    dispatcher = make_dispatcher(db, Recorder(), workers=1, interval=1.0, batch=batch)
    limits: list[int | None] = []
    stop_after = 9

    async def run_once(*, probe: bool = True, limit: int | None = None) -> int:
        limits.append(limit)
        # Full while the backlog lasts (6 claims), then one short, then nothing.
        if len(limits) <= 6:
            return limit or batch
        return 1 if len(limits) == 7 else 0

    async def idle(seconds: float) -> bool:
        dispatcher._stopping = len(limits) >= stop_after
        return False

    dispatcher.run_once = run_once  # type: ignore[method-assign]
    dispatcher._idle = idle  # type: ignore[method-assign]
    await asyncio.wait_for(dispatcher._work(), 5.0)
    assert bound == 40
    assert limits == [5, 10, 20, 40, 40, 40, 40, 5, 5]


async def test_a_failed_batch_goes_back_to_the_batch_size(db: Db) -> None:
    dispatcher = make_dispatcher(db, Recorder(), workers=1, interval=1.0, batch=5)
    limits: list[int | None] = []

    async def run_once(*, probe: bool = True, limit: int | None = None) -> int:
        limits.append(limit)
        dispatcher._stopping = len(limits) >= 7
        if len(limits) in (4, 5):
            raise ConnectionError("the database went away")
        return limit or 5  # full

    async def idle(seconds: float) -> bool:
        return False

    dispatcher.run_once = run_once  # type: ignore[method-assign]
    dispatcher._idle = idle  # type: ignore[method-assign]
    await asyncio.wait_for(dispatcher._work(), 5.0)
    assert limits == [5, 10, 20, 40, 5, 5, 10]


def test_a_grown_claim_is_bounded() -> None:
    assert grown_batch_bound(1) == BATCH_GROWTH
    assert grown_batch_bound(MAX_OUTBOX_BATCH // BATCH_GROWTH) == MAX_OUTBOX_BATCH
    assert grown_batch_bound(MAX_OUTBOX_BATCH // BATCH_GROWTH + 1) == MAX_OUTBOX_BATCH
    assert grown_batch_bound(MAX_OUTBOX_BATCH) == MAX_OUTBOX_BATCH
    assert grown_batch_bound(MAX_OUTBOX_BATCH + 1) == MAX_OUTBOX_BATCH + 1


async def test_a_grown_claim_takes_that_many_rows(db: Db) -> None:
    for user_id, pts in [(10, 1), (10, 2), (11, 1), (11, 2), (12, 1), (12, 2), (12, 3)]:
        await add_row(db, user_id, pts)
    dispatcher = make_dispatcher(db, Recorder(), batch=2)
    assert await dispatcher.run_once(limit=6) == 6
    assert await dispatcher.run_once() == 1
    assert await outbox_rows(db) == []


class Sleeps:
    """The dispatcher's sleep: records the gather waits and returns at once."""

    def __init__(self) -> None:
        self.calls: list[float] = []
        self.called = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        self.called.set()
        await asyncio.sleep(0)


async def test_an_idle_outbox_claims_without_the_gather_window(db: Db) -> None:
    rec = Recorder()
    sleeps = Sleeps()
    dispatcher = make_dispatcher(db, rec, workers=2, interval=60.0, gather=1000.0, sleep=sleeps)
    try:
        # Both idle first: a worker whose first claim took the row would have it in
        # flight when the other is woken, which then rightly waits the window.
        await start_parked(dispatcher, 2)
        await add_row(db, 91, 1)
        dispatcher.wake()
        async with asyncio.timeout(5.0):
            await rec.pushed.wait()
        assert rec.pushes == [(91, [1], None)]
        assert sleeps.calls == []  # nothing was in flight: no window to wait for
    finally:
        await asyncio.wait_for(dispatcher.stop(), 5.0)


async def test_a_wake_during_a_batch_gathers_before_claiming(db: Db) -> None:
    rec = Recorder()
    rec.gate = asyncio.Event()
    sleeps = Sleeps()
    dispatcher = make_dispatcher(db, rec, workers=2, interval=60.0, gather=0.25, sleep=sleeps)
    try:
        await start_parked(dispatcher, 2)
        await add_row(db, 92, 1)
        dispatcher.wake()
        async with asyncio.timeout(5.0):
            await rec.rendering.wait()  # one worker holds a batch
        await add_row(db, 93, 1)
        dispatcher.wake()
        async with asyncio.timeout(5.0):
            await sleeps.called.wait()
        assert sleeps.calls == [0.25]  # the second worker let more commits join
        rec.gate.set()
        await eventually(lambda: drained(db))
        assert sorted(rec.pushes) == [(92, [1], None), (93, [1], None)]
    finally:
        rec.gate.set()
        await asyncio.wait_for(dispatcher.stop(), 5.0)


async def test_stop_finishes_the_batch_in_progress(db: Db) -> None:
    await add_row(db, 95, 1)
    rec = Recorder()
    rec.gate = asyncio.Event()
    dispatcher = make_dispatcher(db, rec, workers=1, interval=60.0)
    dispatcher.start()
    dispatcher.wake()
    async with asyncio.timeout(2.0):
        await rec.rendering.wait()

    stopping = asyncio.create_task(dispatcher.stop())
    await asyncio.sleep(0.05)
    assert not stopping.done()
    rec.gate.set()
    await asyncio.wait_for(stopping, 5.0)

    assert rec.pushes == [(95, [1], None)]
    assert await outbox_rows(db) == []


# -- query plans ----------------------------------------------------------------------


class SqlRecorder:
    """Stands in for a connection to capture a store function's SQL and arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        self.calls.append((sql, args))
        return []

    async def fetchval(self, sql: str, *args: Any) -> Any:
        self.calls.append((sql, args))
        return 0

    async def execute(self, sql: str, *args: Any) -> str:
        self.calls.append((sql, args))
        return "DELETE 0"


async def plan_of(db: Db, call: Callable[[Any], Awaitable[object]]) -> dict[str, Any]:
    """The JSON plan PostgreSQL picks for the one statement ``call`` runs."""
    [plan] = await plans_of(db, call)
    return plan


async def plans_of(db: Db, call: Callable[[Any], Awaitable[object]]) -> list[dict[str, Any]]:
    """The JSON plans PostgreSQL picks for the statements ``call`` runs (each finding
    nothing)."""
    recorder = SqlRecorder()
    await call(cast(Any, recorder))
    plans = []
    for sql, args in recorder.calls:
        text = await db.pool.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args)
        plans.append(cast(dict[str, Any], json.loads(text)[0]["Plan"]))
    return plans


def scanned_partitions(plan: dict[str, Any], table: str) -> set[str]:
    pattern = re.compile(rf"^{table}_p\d+$")
    return {
        n["Relation Name"]
        for n in plan_nodes(plan)
        if "Scan" in n["Node Type"] and pattern.match(n.get("Relation Name", ""))
    }


def seq_scans(plan: dict[str, Any]) -> list[str]:
    return [n.get("Relation Name", "?") for n in plan_nodes(plan) if n["Node Type"] == "Seq Scan"]


async def test_outbox_queries_use_indexes_on_a_real_backlog(db: Db) -> None:
    # A few thousand rows over many users, some not due and some failed; ANALYZE, so
    # the plans are the ones the planner would really pick.
    await db.pool.execute(
        """
        INSERT INTO dispatch_outbox (target_user_id, pts, available_at, status)
        SELECT 1000 + g % 1500, g,
               now() - interval '1 second' * (g % 600) + interval '1 hour' * (g % 7 = 0)::int,
               CASE WHEN g % 50 = 0 THEN 'failed' ELSE 'pending' END
          FROM generate_series(1, 6000) AS g
        """
    )
    await db.pool.execute("ANALYZE dispatch_outbox")
    claim_indexes = {
        r["name"]
        for r in await db.pool.fetch(
            """
            SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'dispatch_outbox_claim'::regclass
            """
        )
    }
    assert len(claim_indexes) == 4
    keys = [
        (r["target_user_id"], r["pts"])
        for r in await db.pool.fetch(
            "SELECT target_user_id, pts FROM dispatch_outbox ORDER BY random() LIMIT 100"
        )
    ]

    claimed = [
        OutboxRow(r["target_user_id"], r["id"], r["pts"], None, None, 1, None)
        for r in await db.pool.fetch(
            "SELECT target_user_id, id, pts FROM dispatch_outbox ORDER BY random() LIMIT 100"
        )
    ]

    claim = await plan_of(db, lambda c: outbox_store.claim_batch_txn(c, 100))
    due = await plan_of(db, outbox_store.any_due)
    # Held rows, then (a worker may hold them) rows past their hold.
    held, late = await plans_of(db, lambda c: outbox_store.delete_pts_rows(c, keys, 30.0))
    retry = await plan_of(db, lambda c: outbox_store.retry_claimed_txn(c, claimed, 1.0, 10, "e"))
    back_off = await plan_of(db, lambda c: outbox_store.back_off_rows(c, claimed, 1.0, "e"))

    for plan in (claim, due):
        scans = {n.get("Index Name") for n in plan_nodes(plan) if "Index" in n["Node Type"]}
        assert claim_indexes <= scans
    # (The delete of handled rows is a function call: its statement's plan is tested in
    # test_handled_rows_go_by_primary_key_probes_on_a_large_outbox.)
    for plan in (claim, due, held, late, retry, back_off):
        assert seq_scans(plan) == []


async def _delete_plan_nodes(db: Db) -> list[dict[str, Any]]:
    """The plan nodes of the outbox worker's delete as its function holds it: planned
    for any keys, with the function's own settings."""
    fn = await db.pool.fetchrow(
        """
        SELECT prosrc, proconfig FROM pg_proc
         WHERE oid = 'telesrv_delete_outbox_rows(bigint[], bigint[])'::regprocedure
        """
    )
    assert fn["proconfig"] == [
        "plan_cache_mode=force_generic_plan",
        "enable_hashjoin=off",
        "enable_mergejoin=off",
        "enable_seqscan=off",
    ]
    body = (
        fn["prosrc"].replace("p_target_user_ids", "$1::bigint[]").replace("p_ids", "$2::bigint[]")
    )
    async with db.pool.acquire() as conn, conn.transaction():
        for setting in fn["proconfig"]:
            name, _, value = setting.partition("=")
            await conn.execute("SELECT set_config($1, $2, true)", name, value)
        [text] = await generic_plans(conn, [body], "JSON")
    return plan_nodes(json.loads(text)[0]["Plan"])


async def test_handled_rows_go_by_primary_key_probes_on_a_large_outbox(db: Db) -> None:
    # A nested loop over the keys, each probing the primary key of the partition it
    # prunes to at run time; no partition scanned. At a few thousand rows the planner
    # alone picks a hash join over every partition; a drain's statistics lag its
    # backlog, and that plan then read the whole backlog on each delete. So it must
    # be probes at either size.
    for first, last in ((1, 200), (201, 3000), (3001, 40000)):
        await db.pool.execute(
            f"""
            INSERT INTO dispatch_outbox (target_user_id, pts)
            SELECT 1000 + g % 1500, g FROM generate_series({first}, {last}) AS g;
            ANALYZE dispatch_outbox
            """
        )
        nodes = await _delete_plan_nodes(db)
        types = [n["Node Type"] for n in nodes]
        assert "Nested Loop" in types, (last, types)
        assert not {
            "Hash Join",
            "Merge Join",
            "Seq Scan",
            "Bitmap Heap Scan",
            "Materialize",
        } & set(types), (last, types)
        probes = [n for n in nodes if n["Node Type"] == "Index Scan"]
        assert probes and all(
            n["Index Name"].endswith("_pkey")
            and "k.target_user_id" in n.get("Index Cond", "")
            and "k.id" in n.get("Index Cond", "")
            for n in probes
        ), (last, probes[:1])
    keys = await db.pool.fetch("SELECT target_user_id, id FROM dispatch_outbox LIMIT 200")
    async with db.pool.acquire() as conn, conn.transaction():
        assert await outbox_store.delete_claimed_txn(
            conn, [OutboxRow(k[0], k[1], 0, None, None, 1, None) for k in keys]
        ) == len(keys)
    assert await db.pool.fetchval("SELECT count(*) FROM dispatch_outbox") == 40000 - len(keys)


async def test_held_rows_are_read_from_a_slice_of_the_claim_index(db: Db) -> None:
    # The delete of held rows as the function holds it, planned for any keys (its
    # setting) on a large outbox: a due backlog, rows put back for later and rows held
    # for longer, besides 100 rows held since a moment ago. The plan reads the claim
    # index only, between the slice's two bounds; run, it reads the slice's rows and
    # nothing else, whatever the statistics said.
    await db.pool.execute(
        """
        INSERT INTO dispatch_outbox (target_user_id, pts, available_at)
        SELECT 1000 + g % 1500, g,
               CASE WHEN g % 400 = 0 THEN now() + interval '29 seconds'
                    WHEN g % 3 = 0 THEN now() + interval '2 minutes'
                    WHEN g % 3 = 1 THEN now() + interval '10 seconds'
                    ELSE now() END
          FROM generate_series(1, 40000) AS g;
        ANALYZE dispatch_outbox
        """
    )
    fn = await db.pool.fetchrow(
        """
        SELECT prosrc, proconfig FROM pg_proc
         WHERE oid = 'telesrv_delete_held_outbox_rows(bigint[], integer[], double precision,
                                                      double precision)'::regprocedure
        """
    )
    assert fn["proconfig"] == ["plan_cache_mode=force_generic_plan"]
    body = (
        fn["prosrc"]
        .replace("p_target_user_ids", "$1::bigint[]")
        .replace("p_ptss", "$2::integer[]")
        .replace("p_due_after", "$3::double precision")
        .replace("p_due_by", "$4::double precision")
    )
    claim_indexes = {
        r["name"]
        for r in await db.pool.fetch(
            """
            SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'dispatch_outbox_claim'::regclass
            """
        )
    }
    keys = [
        (r["target_user_id"], r["pts"])
        for r in await db.pool.fetch(
            """
            SELECT target_user_id, pts FROM dispatch_outbox WHERE pts % 400 = 0
            """
        )
    ]
    assert len(keys) == 100
    async with db.pool.acquire() as conn:
        [text] = await generic_plans(conn, [body], "JSON")
        run = conn.transaction()  # rolled back: nothing is deleted here
        await run.start()
        try:
            await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            # Held since a moment ago as this transaction sees it (its now() stands
            # still), however long the setup took.
            await conn.execute(
                """
                UPDATE dispatch_outbox o SET available_at = now() + interval '29 seconds'
                  FROM unnest($1::bigint[], $2::integer[]) AS k(target_user_id, pts)
                 WHERE o.target_user_id = k.target_user_id AND o.pts = k.pts
                """,
                [k[0] for k in keys],
                [k[1] for k in keys],
            )
            await conn.execute(f"PREPARE held_delete AS {body}")
            users = "{" + ",".join(str(k[0]) for k in keys) + "}"
            ptss = "{" + ",".join(str(k[1]) for k in keys) + "}"
            ran = await conn.fetchval(
                "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE held_delete("
                f"'{users}'::bigint[], '{ptss}'::integer[], 25.0, 30.0)"
            )
        finally:
            await run.rollback()
            await conn.execute("DEALLOCATE held_delete")
    for plan in (json.loads(text)[0]["Plan"], json.loads(ran)[0]["Plan"]):
        nodes = plan_nodes(plan)
        assert not {"Seq Scan", "Nested Loop", "Merge Join"} & {n["Node Type"] for n in nodes}
        index_scans = [n for n in nodes if "Index Name" in n]
        assert index_scans and all(
            n["Index Name"] in claim_indexes
            and "available_at > (now() +" in n["Index Cond"]
            and "available_at <= (now() +" in n["Index Cond"]
            for n in index_scans
        )
    # Run, the partitions gave the slice's 100 rows and no other.
    read = [
        n
        for n in plan_nodes(json.loads(ran)[0]["Plan"])
        if "Scan" in n["Node Type"] and "Relation Name" in n
    ]
    assert read and sum(n["Actual Rows"] * n["Actual Loops"] for n in read) == 100
    assert await outbox_store.delete_pts_rows(db.pool, keys, 30.0) == 100
    assert await db.pool.fetchval("SELECT count(*) FROM dispatch_outbox") == 40000 - 100


async def fill_message_tables(db: Db, messages: int) -> None:
    """``messages`` messages among 40 users (both boxes each), dialogs, an update log."""
    await db.pool.execute(
        f"""
        INSERT INTO private_messages (sender_user_id, recipient_user_id, random_id, date, message)
        SELECT 1 + g % 40, 1 + (g + 1) % 40, g, 1700000000 + g, 'hi'
          FROM generate_series(1, {messages}) AS g;
        INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id,
                                   message_id, out, date)
        SELECT m.sender_user_id, m.id::int, m.recipient_user_id, m.sender_user_id, m.id, true,
               m.date
          FROM private_messages m;
        INSERT INTO dialogs (user_id, peer_user_id, top_message, top_message_date)
        SELECT u, p, 10, 1700000000 + p FROM generate_series(1, 40) u, generate_series(1, 40) p;
        INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date)
        SELECT 1 + g % 40, g, 1, 'noop', 1700000000 FROM generate_series(1, {messages}) AS g;
        ANALYZE private_messages, message_boxes, dialogs, user_update_events;
        """
    )


@pytest.fixture
async def message_tables(db: Db) -> AsyncIterator[None]:
    await fill_message_tables(db, 4000)
    yield
    await db.pool.execute("TRUNCATE private_messages, message_boxes, dialogs, user_update_events")


def history_call(c: Any) -> Awaitable[object]:
    return history_store.history_page(c, 7, 8, above=0, below=None, limit=20, budget=1 << 20)


async def test_single_user_message_queries_touch_one_partition(
    db: Db, message_tables: None
) -> None:
    history = await plan_of(db, history_call)
    after = await plan_of(db, lambda c: update_log_store.events_after(c, 7, 100, 100))
    top = await plan_of(db, lambda c: update_log_store.top_pts(c, 7, 4096))
    dialogs = await plan_of(
        db,
        lambda c: dialogs_store.page(
            c,
            7,
            folder_id=0,
            exclude_pinned=False,
            offset_date=None,
            offset_id=None,
            offset_peer=None,
            limit=20,
        ),
    )

    assert len(scanned_partitions(history, "message_boxes")) == 1
    assert len(scanned_partitions(after, "user_update_events")) == 1
    assert len(scanned_partitions(top, "user_update_events")) == 1
    assert len(scanned_partitions(dialogs, "dialogs")) == 1
    for plan in (history, after, top, dialogs):
        assert not any(
            name.startswith(("message_boxes", "user_update_events", "dialogs"))
            for name in seq_scans(plan)
        )


async def test_get_history_reads_message_bodies_by_index(db: Db, message_tables: None) -> None:
    history = await plan_of(db, history_call)

    assert seq_scans(history) == []


async def test_a_batch_loads_its_events_by_key_not_by_scanning_the_log(
    db: Db, message_tables: None
) -> None:
    await db.pool.execute(
        """
        INSERT INTO user_state_events (user_id, id, event_type, date)
        SELECT 1 + g % 40, g, 'dialog_pinned', 1700000000 FROM generate_series(1, 4000) AS g;
        ANALYZE user_state_events;
        """
    )
    keys = [(1 + g % 40, g) for g in range(1, 4000, 40)]  # 100 keys over many users
    pts_plan = await plan_of(db, lambda c: update_log_store.events_at(c, keys))
    state_plan = await plan_of(db, lambda c: state_log_store.events_at(c, keys))
    for plan in (pts_plan, state_plan):
        assert seq_scans(plan) == []
        assert not [n for n in plan_nodes(plan) if n["Node Type"] == "Hash Join"]
    found = await update_log_store.events_at(db.pool, keys[:3] + [(1, 10**6)])
    assert sorted((e.user_id, e.pts) for e in found) == sorted(keys[:3])
    states = await state_log_store.events_at(db.pool, keys[:3] + [(1, 10**6)])
    assert sorted(states) == sorted(keys[:3])
    await db.pool.execute("TRUNCATE user_state_events")


class BrokenPlacement(Exception):
    pass


async def test_a_batch_that_raises_counts_the_claim_and_backs_off(db: Db) -> None:
    await add_row(db, 95, 1)
    await add_row(db, 96, 1)
    rec = Recorder()
    locates = 0

    async def locate(user_ids: list[int]) -> Any:
        nonlocal locates
        locates += 1
        raise BrokenPlacement("redis away")

    dispatcher = make_dispatcher(db, rec, locate=locate, lease=0.75)

    with pytest.raises(BrokenPlacement):
        await dispatcher.run_once()
    rows = await outbox_rows(db)
    assert [(r["target_user_id"], r["status"], r["attempts"]) for r in rows] == [
        (95, "pending", 1),
        (96, "pending", 1),
    ]
    assert all("redis away" in r["last_error"] for r in rows)
    assert all(0 < r["due_in"] <= 0.5 for r in rows)  # the first retry delay
    # Not first in line again at once: a second batch does not claim them.
    await db.pool.execute("UPDATE dispatch_outbox SET available_at = now() + interval '1 hour'")
    assert await dispatcher.run_once() == 0
    assert locates == 1

    # Later failures back off longer, up to the lease, and never end 'failed'.
    for attempt in range(2, 13):
        await db.pool.execute("UPDATE dispatch_outbox SET available_at = now()")
        with pytest.raises(BrokenPlacement):
            await dispatcher.run_once()
        rows = await outbox_rows(db)
        assert [(r["status"], r["attempts"]) for r in rows] == [("pending", attempt)] * 2
        assert all(0 < r["due_in"] <= min(0.5 * 2 ** (attempt - 1), 0.75) for r in rows)
    assert rec.pushes == []


async def test_backing_off_skips_rows_another_worker_holds_or_claimed_since(db: Db) -> None:
    await add_row(db, 97, 1)
    await add_row(db, 98, 1)
    await add_row(db, 99, 1)
    async with db.pool.acquire() as conn:
        async with conn.transaction():
            claimed = await outbox_store.claim_batch_txn(conn, 10)
    assert len(claimed) == 3
    by_user = {r.target_user_id: r for r in claimed}
    # 98 was claimed and put back by another worker since: its attempts moved on.
    await db.pool.execute("UPDATE dispatch_outbox SET attempts = 1 WHERE target_user_id = 98")
    holder = await db.pool.acquire()
    try:
        txn = holder.transaction()
        await txn.start()
        await holder.execute("SELECT 1 FROM dispatch_outbox WHERE target_user_id = 99 FOR UPDATE")
        assert await outbox_store.back_off_rows(db.pool, claimed, 60.0, "boom") == 1
        await txn.rollback()
    finally:
        await db.pool.release(holder)
    rows = await outbox_rows(db)
    assert [(r["target_user_id"], r["attempts"], r["last_error"]) for r in rows] == [
        (97, 1, "boom"),
        (98, 1, None),
        (99, 0, None),
    ]
    assert 50 < rows[0]["due_in"] <= 60
    assert by_user[97].attempts == 1
    assert await outbox_store.back_off_rows(db.pool, [], 1.0, "x") == 0


async def test_claimed_rows_are_found_by_their_whole_key(db: Db) -> None:
    a = await add_row(db, 84, 1)
    b = await add_row(db, 85, 1)
    wrong = [
        OutboxRow(85, a, 1, None, None, 1, None),  # a's id, b's user
        OutboxRow(84, b, 1, None, None, 1, None),
    ]

    async def handle(conn: Any) -> tuple[int, int, int]:
        await outbox_store.claim_batch_txn(conn, 10)
        return (
            await outbox_store.retry_claimed_txn(conn, wrong, 60.0, 1, "boom"),
            await outbox_store.delete_claimed_txn(conn, wrong),
            await outbox_store.back_off_rows(conn, wrong, 60.0, "boom"),
        )

    assert await db.run_txn("test_claim", handle) == (0, 0, 0)
    rows = await outbox_rows(db)
    assert [(r["target_user_id"], r["status"], r["attempts"]) for r in rows] == [
        (84, "pending", 0),
        (85, "pending", 0),
    ]


async def test_an_outage_logs_its_first_failed_batch_and_its_end(
    db: Db, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the database is away every batch fails; the log gets the first failure with
    its traceback and one line when batches work again, not a traceback a batch."""
    dispatcher = make_dispatcher(db, Recorder(), workers=1)
    failures = 3
    outcomes: list[str] = []
    worked = asyncio.Event()

    async def run_once(*, probe: bool = True, limit: int | None = None) -> int:
        if len(outcomes) < failures:
            outcomes.append("failed")
            raise ConnectionError("the database went away")
        outcomes.append("ok")
        worked.set()
        return 0

    monkeypatch.setattr(dispatcher, "run_once", run_once)
    monkeypatch.setattr("telesrv.delivery.outbox.ERROR_PAUSE_SECONDS", 0.01)
    caplog.set_level("INFO", logger="telesrv.delivery.outbox")
    dispatcher.start()
    try:
        async with asyncio.timeout(10.0):  # only against a hang
            await worked.wait()
    finally:
        await dispatcher.stop()
    assert outcomes[: failures + 1] == ["failed"] * failures + ["ok"]
    logged = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert logged == [
        ("ERROR", "outbox batch failed; pausing before the next claim", True),
        ("WARNING", f"outbox batches work again after {failures} failed in a row", False),
    ]
