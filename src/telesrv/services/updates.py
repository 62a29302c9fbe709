"""updates.getState / updates.getDifference over the account's two durable logs.

The pts log: only its contiguous committed prefix is ever exposed: a pts that is
allocated but not yet committed (or being filled by a noop) stops the answer
there, so a client never steps over an event it has not seen.

The state log holds updates that have no pts; each device's cursor in it is kept
here, server side, because clients send no cursor for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from telesrv.store import dialog_list as dialog_list_store
from telesrv.store import state_log
from telesrv.store import update_log as update_log_store
from telesrv.store.counters import Counters
from telesrv.store.db import Db

log = logging.getLogger(__name__)

DIFFERENCE_LIMIT = 100  # events per getDifference answer, then differenceSlice
STATE_LIMIT = 100  # state events per getDifference answer, then differenceSlice
# A hole below an event older than this is not an in-flight transaction any more but
# one that died (or a rolled-back account change): it is filled with noops.
HOLE_GRACE = 30
TOO_LONG = 100_000  # further behind than this: differenceTooLong
CONTIGUOUS_WINDOW = 4096  # holes only exist among the newest, in-flight pts


@dataclass(frozen=True, slots=True)
class State:
    pts: int
    unread_count: int


@dataclass(frozen=True, slots=True)
class Difference:
    kind: str  # "empty", "slice", "full", "too_long"
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


# The lowest pts of a user that a write of this process is still on (taken, and its
# answer not yet given), or None.
InFlight = Callable[[int], int | None]


class UpdatesService:
    def __init__(self, db: Db, counters: Counters, *, in_flight: InFlight | None = None) -> None:
        self._db = db
        self._counters = counters
        self._in_flight = in_flight

    async def contiguous(self, user_id: int, now: int | None = None) -> int:
        """The contiguous committed pts; with ``now``, stale holes are repaired first."""
        top = await update_log_store.top_pts(self._db.pool, user_id, CONTIGUOUS_WINDOW)
        pts = contiguous_pts(top, CONTIGUOUS_WINDOW)
        if (
            now is not None
            and top
            and pts < top[0][0]
            and await self._repair(user_id, pts + 1, now)
        ):
            top = await update_log_store.top_pts(self._db.pool, user_id, CONTIGUOUS_WINDOW)
            pts = contiguous_pts(top, CONTIGUOUS_WINDOW)
        return pts

    async def _repair(self, user_id: int, hole: int, now: int) -> bool:
        """Fill the hole starting at ``hole`` if the event after it is older than the grace."""
        after = await update_log_store.event_dates_after(self._db.pool, user_id, hole - 1, 1)
        if not after:
            return False
        next_pts, next_count, date = after[0]
        next_start = next_pts - next_count + 1
        if next_start <= hole or now - date < HOLE_GRACE:
            return False
        missing = list(range(hole, min(next_start, hole + CONTIGUOUS_WINDOW)))
        log.warning("filling stale pts %d..%d of user %d", missing[0], missing[-1], user_id)
        await update_log_store.fill_pts(self._db.pool, user_id, missing, now)
        return True

    async def state(self, user_id: int, now: int) -> State:
        pts = await self.contiguous(user_id, now)
        if pts == 0:
            # A new account: give it pts 1 so clients see a real state (Telethon reads
            # pts 0 as "no state" and would skip what happens while it is offline).
            allocation = (await self._counters.allocate([(user_id, 1, 0)]))[0]
            await update_log_store.fill_pts(self._db.pool, user_id, [allocation.first_pts], now)
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

    async def difference(self, user_id: int, pts: int, now: int | None = None) -> Difference:
        diff = await self._difference(user_id, pts)
        if (
            now is not None
            and diff.kind in ("empty", "full")
            and await self._repair(user_id, diff.pts + 1, now)
        ):
            diff = await self._difference(user_id, pts)
        return diff

    async def _difference(self, user_id: int, pts: int) -> Difference:
        unread = await dialog_list_store.total_unread(self._db.pool, user_id)
        if pts < 0:
            pts = 0
        behind = await update_log_store.count_events_after(
            self._db.pool, user_id, pts, TOO_LONG + 1
        )
        if behind > TOO_LONG:
            return Difference("too_long", await self.contiguous(user_id), unread_count=unread)
        events = await update_log_store.events_after(
            self._db.pool, user_id, pts, DIFFERENCE_LIMIT + 1
        )
        run: list[update_log_store.UpdateEvent] = []
        expected = pts + 1
        for event in events:
            if event.pts - event.pts_count + 1 != expected:
                break  # a hole: that pts is still in flight
            run.append(event)
            expected = event.pts + 1
        if not run:
            if not events and pts > 0:
                # A client ahead of the log (a state from before a data loss, or made up)
                # would ignore every update until the log caught up: send it back.
                current = await self.contiguous(user_id)
                if pts > current:
                    return Difference("too_long", current, unread_count=unread)
            return Difference("empty", pts, unread_count=unread)
        if len(run) > DIFFERENCE_LIMIT:
            run = run[:DIFFERENCE_LIMIT]
            return Difference("slice", run[-1].pts, run, unread)
        return Difference("full", run[-1].pts, run, unread)

    async def save_device_state(self, auth_key_id: int, user_id: int, pts: int, date: int) -> None:
        await update_log_store.save_update_state(self._db.pool, auth_key_id, user_id, pts, date)

    # -- the state log ----------------------------------------------------------------

    async def state_head(self, user_id: int) -> int:
        return await state_log.head(self._db.pool, user_id)

    async def state_difference(
        self, auth_key_id: int, user_id: int, limit: int = STATE_LIMIT
    ) -> StateDifference:
        cursor = await state_log.device_cursor(self._db.pool, auth_key_id, user_id)
        if cursor is None:
            # A device that never asked for its state starts at the head: what came
            # before is already part of what it loads (contacts, dialogs, blocks).
            return StateDifference([], await self.state_head(user_id), False)
        rows = await state_log.events_after(self._db.pool, user_id, cursor, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return StateDifference(
            [e for _, e in rows], rows[-1][0] if rows else None, more, [i for i, _ in rows]
        )

    async def save_state_cursor(self, auth_key_id: int, user_id: int, state_id: int) -> None:
        await state_log.save_device_cursor(self._db.pool, auth_key_id, user_id, state_id)
