"""updates.getState / updates.getDifference over the account's two durable logs.

The pts log: only its contiguous committed prefix is ever exposed: a pts that is
allocated but not yet committed (or being filled by a noop) stops the answer
there, so a client never steps over an event it has not seen.

The state log holds updates that have no pts; each device's cursor in it is kept
here, server side, because clients send no cursor for it.

A getDifference answer is put together here whole (``UpdatesService.get_difference``):
both logs read from one snapshot, cut to a byte budget, the device's two cursors
moved. Only turning events into TL is left to the caller, which passes it in.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

import asyncpg

from telesrv.store import dialog_list as dialog_list_store
from telesrv.store import state_log
from telesrv.store import update_log as update_log_store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db
from telesrv.store.log_writes import LogWrites

log = logging.getLogger(__name__)

DIFFERENCE_LIMIT = 100  # events per getDifference answer, then differenceSlice
STATE_LIMIT = 100  # state events per getDifference answer, then differenceSlice
# A hole below an event older than this is not an in-flight transaction any more but
# one that died (or a rolled-back account change): it is filled with noops.
HOLE_GRACE = 30
TOO_LONG = 100_000  # further behind than this: differenceTooLong
CONTIGUOUS_WINDOW = 4096  # holes only exist among the newest, in-flight pts
# Serialized updates per getDifference answer, pts and state events together. Past it
# the answer is a differenceSlice ending at the last event that fits (at least one
# event, so the client always moves).
DIFFERENCE_BYTES = 512 * 1024

DifferenceKind = Literal["empty", "slice", "full", "too_long"]


@dataclass(frozen=True, slots=True)
class State:
    pts: int
    unread_count: int


@dataclass(frozen=True, slots=True)
class Difference:
    """The pts log's part of a difference."""

    kind: DifferenceKind
    pts: int  # the state the client moves to
    events: list[update_log_store.UpdateEvent] = field(default_factory=list)
    unread_count: int = 0


def contiguous_pts(events_desc: list[tuple[int, int]], window: int) -> int:
    """The highest pts p such that every pts in 1..p is covered by an event.

    ``events_desc`` holds (pts, pts_count) newest first; an event covers
    pts - pts_count + 1 .. pts.
    """
    if not events_desc:
        return 0
    ascending = events_desc[::-1]
    first_pts, first_count = ascending[0]
    expected = first_pts - first_count + 1
    if len(ascending) < window and expected != 1:
        return 0  # even pts 1 is still in flight
    for pts, count in ascending:
        if pts - count + 1 != expected:
            return expected - 1
        expected = pts + 1
    return ascending[-1][0]


@dataclass(frozen=True, slots=True)
class StateDifference:
    """The state events a device has not been given yet (oldest first)."""

    events: list[update_log_store.UpdateEvent]
    cursor: int | None  # the device's cursor once they are given; None: leave it
    more: bool  # more than STATE_LIMIT were waiting
    # Each event's id, so a caller that gives only the first few can move the cursor
    # to the last one it gave instead of past the rest.
    ids: list[int] = field(default_factory=list)


def cut_to_budget(sizes: list[int], budget: int) -> int:
    """How many leading items fit in ``budget`` bytes; never fewer than one."""
    total = 0
    for index, size in enumerate(sizes):
        total += size
        if total > budget:
            return max(1, index)
    return len(sizes)


def stale_pts(hole: int, after: tuple[int, int, int] | None, now: int) -> list[int]:
    """The pts to fill with noops from ``hole`` up to the event ``after`` it (pts,
    pts_count, date): none while that event is younger than the grace (the hole may
    be a transaction still running) or when there is no event after the hole."""
    if after is None:
        return []
    next_pts, next_count, date = after
    next_start = next_pts - next_count + 1
    if next_start <= hole or now - date < HOLE_GRACE:
        return []
    return list(range(hole, min(next_start, hole + CONTIGUOUS_WINDOW)))


# What the caller renders each event into (TL updates, in rpc/), and its size on the
# wire: the byte budget is of the answer as sent, which only the rendering knows.
R = TypeVar("R")
Render = Callable[[list[update_log_store.UpdateEvent]], Awaitable[list[R]]]


# Not slotted: a frozen slotted generic dataclass breaks when built as
# DifferenceResult[T](...), which sets an attribute on the new instance.
@dataclass(frozen=True)
class DifferenceResult(Generic[R]):
    """One getDifference answer, before TL.

    ``kind``: "too_long" (the client reloads everything), "empty" (nothing new in
    either log), "slice" (more waits: the client asks again from ``state``) or "full".
    """

    kind: DifferenceKind
    state: State  # the state the client moves to (the intermediate one of a slice)
    events: list[update_log_store.UpdateEvent] = field(default_factory=list)  # pts log
    state_events: list[update_log_store.UpdateEvent] = field(default_factory=list)
    # ``events`` then ``state_events``, as the caller's render made them.
    rendered: list[R] = field(default_factory=list)
    # The device's cursor in the state log after this answer; None: it stayed put.
    state_cursor: int | None = None


@dataclass(frozen=True, slots=True)
class _PtsRead:
    diff: Difference
    # (pts, pts_count, date) of the first event above the answer's last pts, when the
    # answer stops at a hole (empty or full): is that hole stale?
    after: tuple[int, int, int] | None = None


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """Both logs as one read-only transaction saw them."""

    pts: _PtsRead
    # For "too_long": no events, and the cursor at the head (the client reloads what
    # the state log holds).
    state: StateDifference


# The lowest pts of a user that a write of this process is still on (taken, and its
# answer not yet given), or None.
InFlight = Callable[[int], int | None]


class UpdatesService:
    def __init__(self, db: Db, counters: Counters, *, in_flight: InFlight | None = None) -> None:
        self._db = db
        self._log = LogWrites(db, counters)
        self._in_flight = in_flight

    async def contiguous(self, user_id: int, now: int | None = None) -> int:
        """The contiguous committed pts; with ``now``, stale holes are repaired first."""
        top = await update_log_store.top_pts(self._db.pool, user_id, CONTIGUOUS_WINDOW)
        pts = contiguous_pts(top, CONTIGUOUS_WINDOW)
        if now is not None and top and pts < top[0][0]:
            after = await update_log_store.event_dates_after(self._db.pool, user_id, pts, 1)
            if await self._fill(user_id, stale_pts(pts + 1, after[0] if after else None, now), now):
                top = await update_log_store.top_pts(self._db.pool, user_id, CONTIGUOUS_WINDOW)
                pts = contiguous_pts(top, CONTIGUOUS_WINDOW)
        return pts

    async def _fill(self, user_id: int, missing: list[int], now: int) -> bool:
        """Fill the stale pts ``missing`` (if any) with noops; whether there were any."""
        if not missing:
            return False
        log.warning("filling stale pts %d..%d of user %d", missing[0], missing[-1], user_id)
        await update_log_store.fill_pts(self._db.pool, user_id, missing, now)
        return True

    async def state(self, user_id: int, now: int) -> State:
        pts = await self.contiguous(user_id, now)
        if pts == 0:
            # A new account: give it pts 1 so clients see a real state (Telethon reads
            # pts 0 as "no state" and would skip what happens while it is offline).
            await self._log.write(
                "first_pts", [(user_id, 1, 0)], functools.partial(_noop_txn, date=now), now=now
            )
            pts = await self.contiguous(user_id, now)
        # A write still on its way (a send whose answer its device has not had yet)
        # stays out of the state: a device told of its pts first would ask for the
        # difference and get its own message back as someone else's, before the answer
        # that names it as the one it sent.
        lowest = self._in_flight(user_id) if self._in_flight is not None else None
        if lowest is not None and lowest <= pts:
            pts = max(lowest - 1, 1)
        unread = await dialog_list_store.total_unread(self._db.pool, user_id)
        return State(pts=pts, unread_count=unread)

    async def get_difference(
        self,
        user_id: int,
        auth_key_id: int,
        pts: int,
        now: int,
        render: Render[R],
        size: Callable[[R], int],
        *,
        budget: int = DIFFERENCE_BYTES,
    ) -> DifferenceResult[R]:
        """updates.getDifference of device ``auth_key_id`` from ``pts``: the pts events
        after it and the state events after the device's cursor, read in one snapshot;
        ``render`` turns them into what the answer holds and ``size`` tells each one's
        bytes, so that the answer ends where ``budget`` runs out. The device's pts and
        state-log cursor move to the end of what it is given."""
        snapshot = await self._db.run_read_txn(
            "get_difference", _difference_snapshot_txn, user_id, auth_key_id, pts
        )
        if await self._fill(user_id, self._stale(snapshot.pts, now), now):
            snapshot = await self._db.run_read_txn(
                "get_difference", _difference_snapshot_txn, user_id, auth_key_id, pts
            )
        diff, state_diff = snapshot.pts.diff, snapshot.state
        if diff.kind == "too_long":
            # The client reloads its dialogs, contacts and blocks from scratch: the state
            # events so far are part of what it loads.
            await self._save_cursors(auth_key_id, user_id, None, now, state_diff.cursor)
            return DifferenceResult(
                "too_long", State(diff.pts, diff.unread_count), state_cursor=state_diff.cursor
            )
        if diff.kind == "empty" and not state_diff.events:
            await self._save_cursors(auth_key_id, user_id, None, now, state_diff.cursor)
            return DifferenceResult(
                "empty", State(diff.pts, diff.unread_count), state_cursor=state_diff.cursor
            )

        events, state_events = diff.events, state_diff.events
        new_pts, sliced = diff.pts, diff.kind == "slice"
        rendered = await render(events + state_events)
        # One budget for the whole answer: pts events first, then state events.
        keep = cut_to_budget([size(r) for r in rendered], budget)
        if keep < len(events):
            events, sliced = events[:keep], True
            new_pts = events[-1].pts
        state_keep = max(0, keep - len(events))
        state_cursor = state_diff.cursor
        if state_keep < len(state_events):
            # The rest of the state events come in the next call: the cursor stops at
            # the last one given (or stays put when none was), and the slice makes the
            # client ask again.
            state_events, sliced = state_events[:state_keep], True
            state_cursor = state_diff.ids[state_keep - 1] if state_keep else None
        await self._save_cursors(auth_key_id, user_id, new_pts, now, state_cursor)
        return DifferenceResult(
            "slice" if sliced or state_diff.more else "full",
            State(new_pts, diff.unread_count),
            events,
            state_events,
            rendered[: len(events)] + rendered[len(diff.events) :][: len(state_events)],
            state_cursor,
        )

    async def _save_cursors(
        self, auth_key_id: int, user_id: int, pts: int | None, date: int, state_id: int | None
    ) -> None:
        """Move the device's pts (None: leave it, and its date) and its state-log cursor
        (None: leave it), in one statement."""
        if pts is not None:
            await self._db.run_txn(
                "get_difference_cursors",
                update_log_store.save_update_state,
                auth_key_id,
                user_id,
                pts,
                date,
                state_id,
                single_statement=True,
            )
        elif state_id is not None:
            await self._db.run_txn(
                "get_difference_cursors",
                state_log.save_device_cursor,
                auth_key_id,
                user_id,
                state_id,
                single_statement=True,
            )

    # -- the pts log ------------------------------------------------------------------

    async def difference(self, user_id: int, pts: int, now: int | None = None) -> Difference:
        """The pts log's part of a difference alone; with ``now``, a stale hole where
        the answer stops is repaired first."""
        read = await self._db.run_read_txn("difference", _pts_difference_txn, user_id, pts)
        if now is not None and await self._fill(user_id, self._stale(read, now), now):
            read = await self._db.run_read_txn("difference", _pts_difference_txn, user_id, pts)
        return read.diff

    @staticmethod
    def _stale(read: _PtsRead, now: int) -> list[int]:
        """The pts of the hole the answer stops at, when it is too old to be a
        transaction still running. A slice stops at the end of a page, not at a hole,
        and too_long answers are not stopped by one."""
        if read.diff.kind not in ("empty", "full"):
            return []
        return stale_pts(read.diff.pts + 1, read.after, now)

    async def save_device_state(self, auth_key_id: int, user_id: int, pts: int, date: int) -> None:
        await update_log_store.save_update_state(self._db.pool, auth_key_id, user_id, pts, date)

    # -- the state log ----------------------------------------------------------------

    async def state_head(self, user_id: int) -> int:
        return await state_log.head(self._db.pool, user_id)

    async def state_difference(
        self, auth_key_id: int, user_id: int, limit: int = STATE_LIMIT
    ) -> StateDifference:
        """The state log's part of a difference alone."""
        return await self._db.run_read_txn(
            "state_difference", _state_difference_txn, auth_key_id, user_id, limit
        )

    async def save_state_cursor(self, auth_key_id: int, user_id: int, state_id: int) -> None:
        await state_log.save_device_cursor(self._db.pool, auth_key_id, user_id, state_id)


# -- the reads of a difference, each meant for one read-only transaction ---------------


async def _contiguous_txn(conn: asyncpg.Connection, user_id: int) -> int:
    top = await update_log_store.top_pts(conn, user_id, CONTIGUOUS_WINDOW)
    return contiguous_pts(top, CONTIGUOUS_WINDOW)


async def _difference_snapshot_txn(
    conn: asyncpg.Connection, user_id: int, auth_key_id: int, pts: int
) -> _Snapshot:
    read = await _pts_difference_txn(conn, user_id, pts)
    if read.diff.kind == "too_long":
        head = await state_log.head(conn, user_id)
        return _Snapshot(read, StateDifference([], head, False))
    return _Snapshot(read, await _state_difference_txn(conn, auth_key_id, user_id))


async def _pts_difference_txn(conn: asyncpg.Connection, user_id: int, pts: int) -> _PtsRead:
    unread = await dialog_list_store.total_unread(conn, user_id)
    if pts < 0:
        pts = 0
    behind = await update_log_store.count_events_after(conn, user_id, pts, TOO_LONG + 1)
    if behind > TOO_LONG:
        current = await _contiguous_txn(conn, user_id)
        return _PtsRead(Difference("too_long", current, unread_count=unread))
    events = await update_log_store.events_after(conn, user_id, pts, DIFFERENCE_LIMIT + 1)
    run: list[update_log_store.UpdateEvent] = []
    expected = pts + 1
    for event in events:
        if event.pts - event.pts_count + 1 != expected:
            break  # a hole: that pts is still in flight
        run.append(event)
        expected = event.pts + 1
    # The first event past the hole the run stops at, if it stops at one: the
    # events were read a page ahead, so it is among them when it exists.
    past = events[len(run)] if len(run) < len(events) else None
    after = (past.pts, past.pts_count, past.date) if past is not None else None
    if not run:
        if not events and pts > 0:
            # A client ahead of the log (a state from before a data loss, or made up)
            # would ignore every update until the log caught up: send it back.
            current = await _contiguous_txn(conn, user_id)
            if pts > current:
                return _PtsRead(Difference("too_long", current, unread_count=unread))
        return _PtsRead(Difference("empty", pts, unread_count=unread), after)
    if len(run) > DIFFERENCE_LIMIT:
        run = run[:DIFFERENCE_LIMIT]
        return _PtsRead(Difference("slice", run[-1].pts, run, unread))
    return _PtsRead(Difference("full", run[-1].pts, run, unread), after)


async def _state_difference_txn(
    conn: asyncpg.Connection, auth_key_id: int, user_id: int, limit: int = STATE_LIMIT
) -> StateDifference:
    cursor = await state_log.device_cursor(conn, auth_key_id, user_id)
    if cursor is None:
        # A device that never asked for its state starts at the head: what came
        # before is already part of what it loads (contacts, dialogs, blocks).
        return StateDifference([], await state_log.head(conn, user_id), False)
    rows = await state_log.events_after(conn, user_id, cursor, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    return StateDifference(
        [e for _, e in rows], rows[-1][0] if rows else None, more, [i for i, _ in rows]
    )


async def _noop_txn(conn: asyncpg.Connection, allocations: list[Allocation], *, date: int) -> None:
    """The pts taken stay used by nothing: noops."""
    for a in allocations:
        await update_log_store.fill_pts(conn, a.user_id, range(a.first_pts, a.last_pts + 1), date)
