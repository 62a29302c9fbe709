"""Pushing what a write committed from the process that committed it.

A write's outbox rows of pts events are written held: due to a worker only after the
lease. This process pushes their events at once, from what a lone send has in hand (no
claim, no reading back) or read back after the commit (any other write), then deletes
the rows together, a batch every ``reap_interval``. A row whose rendering or push fails
stays held, and a worker delivers it once the hold runs out, as it would a crashed
worker's batch. The services' side is ``services/held_pushes.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from telesrv.delivery.metrics import DELIVERED, HELD_PUSHED
from telesrv.delivery.pending_pushes import Send
from telesrv.delivery.placement import Placement, Push, PushTargets, push_now, reached
from telesrv.delivery.push_order import PushOrder
from telesrv.delivery.row_groups import GroupKey
from telesrv.store import outbox as outbox_store
from telesrv.store.db import Db
from telesrv.store.log_writes import PtsRange
from telesrv.store.update_log import UpdateEvent

log = logging.getLogger(__name__)

# (user_id, events in pts order, date, the message boxes the events show) -> the
# serialized ``updates``, None when none of the events has a client-visible form
RenderKnown = Callable[
    [list[tuple[int, list[UpdateEvent]]], int, Sequence[Any]], Awaitable[list[bytes | None]]
]

# How long the rows a process pushed itself wait to be deleted together. Nothing waits
# for the delete (the push is out), so a longer wait only makes the batch bigger.
HELD_REAP_SECONDS = 0.05
# After a failed delete, before the next.
REAP_ERROR_PAUSE_SECONDS = 1.0
# How long a stop waits for the writes' pushes under way.
WRITES_STOP_WAIT = 5.0


def pts_span(events: Sequence[UpdateEvent]) -> tuple[int, int]:
    """The first and last pts a push of these events covers."""
    return min(e.pts - e.pts_count + 1 for e in events), max(e.pts for e in events)


def pts_covered(events: Sequence[UpdateEvent]) -> set[int]:
    return {p for e in events for p in range(e.pts - e.pts_count + 1, e.pts + 1)}


class HeldPushes:
    def __init__(
        self,
        db: Db,
        render_known: RenderKnown,
        targets: PushTargets,
        order: PushOrder,
        *,
        lease: float,
        reap_interval: float = HELD_REAP_SECONDS,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._db = db
        self._render_known = render_known
        self._targets = targets
        self._order = order
        self.lease = lease
        self.reap_interval = reap_interval
        self._clock = clock
        self._sleep = sleep
        self._running = False
        # (target user, pts) of held rows pushed here, waiting for their batched delete
        self._done: list[tuple[int, int]] = []
        self._reap_wakeup = asyncio.Event()
        self._reaper: asyncio.Task[None] | None = None
        # Writes' pushes under way (push_written), apart from the requests that made them
        self._writes: set[asyncio.Task[None]] = set()

    # -- lifecycle (the outbox delivery's) ---------------------------------------------

    def start(self) -> None:
        self._running = True
        self._reaper = asyncio.create_task(self._reap(), name="outbox-held-reaper")

    def stopping(self) -> None:
        """Writers hold no more rows from now on: the workers are stopping."""
        self._running = False

    async def stop(self) -> None:
        """Stop deleting in batches; what was pushed and not deleted yet is deleted now
        (call once no push waits any more), after the writes' pushes under way, for at
        most ``WRITES_STOP_WAIT`` (what they have not pushed by then stays held, and a
        worker delivers it once the hold runs out)."""
        self._running = False
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=WRITES_STOP_WAIT)
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.cancel()  # it may be waiting to gather a batch; what it holds is done here
            await asyncio.gather(reaper, return_exceptions=True)
        if self._done:
            with contextlib.suppress(Exception):  # left over, they are pushed once more
                await self._delete()

    # -- what a write asks ----------------------------------------------------------------

    @property
    def pushes_held(self) -> bool:
        """Whether writers should hold their rows and call ``push_held`` after commit."""
        return self._running

    def expect_pts(self, ranges: Sequence[PtsRange]) -> None:
        """A write in progress here took these pts, and will push what it commits of them
        itself (``push_held``): a push of a later pts of those users waits for it."""
        self._order.expect(ranges)

    def settle_pts(self, ranges: Sequence[PtsRange]) -> None:
        """That write is over, committed and pushed or not."""
        self._order.settle(ranges)

    async def push_held(
        self, events: Sequence[tuple[UpdateEvent, tuple[int, int] | None]], boxes: Sequence[Any]
    ) -> None:
        """Push events this process has just committed with held outbox rows (due only
        after the lease), given with their excluded sessions and the boxes they show.

        No worker can claim the rows before the hold runs out, so this push is the only
        one; the rows are then deleted in a later batch. A row whose rendering or push
        fails stays held, and a worker delivers it once the hold runs out. The pushes
        may leave after this returns: those that wait for a lower pts of their user.
        """
        groups: dict[GroupKey, list[UpdateEvent]] = {}
        for event, exclude in events:
            groups.setdefault((event.user_id, exclude), []).append(event)
        # Each group takes its place among its user's pushes before the first await.
        slots = {
            key: self._order.begin(key[0], *pts_span(evs), covers=pts_covered(evs))
            for key, evs in groups.items()
        }
        try:
            online, push, placement = await self._targets.resolve([u for u, _ in groups])
            # The sender's own row usually reaches nobody (its only session is the one
            # that sent): not rendered at all then.
            live = [(k, evs) for k, evs in groups.items() if reached(online, placement, *k)]
            for key in groups.keys() - {k for k, _ in live}:
                slots.pop(key).drop()
                self._handled(groups[key])
            bodies = (
                await self._render_known(
                    [(u, evs) for (u, _), evs in live], int(self._clock()), boxes
                )
                if live
                else []
            )
            for ((user_id, exclude), evs), body in zip(live, bodies, strict=True):
                slot = slots.pop((user_id, exclude))
                if body is None:
                    slot.drop()
                    self._handled(evs)
                else:
                    self._order.send(slot, self._push(push, placement, user_id, body, exclude, evs))
        except Exception:
            log.exception("pushing committed events failed; the outbox delivers them later")
        finally:
            for slot in slots.values():  # given up: what waits for them goes on
                slot.drop()

    async def push_written(self, ranges: Sequence[PtsRange]) -> None:
        """Push what a write of this process has just committed with held outbox rows,
        then settle its pts (announced with ``expect_pts``): the events of these pts
        whose rows are still held, read back (a write other than a lone send has
        neither its events nor the boxes they show in hand), pushed as ``push_held``
        does. Returns once done, before the write is answered: a device that asks for
        its state after the answer then finds the write in it (``lowest_expected``).
        In a task of its own, which a cancelled request does not stop. Should the read
        fail, the rows stay held and a worker delivers them once the hold runs out."""
        task = asyncio.create_task(self._push_written(list(ranges)), name="held-push-of-a-write")
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        await asyncio.shield(task)

    async def _push_written(self, ranges: list[PtsRange]) -> None:
        try:
            keys = [(user, pts) for user, first, last in ranges for pts in range(first, last + 1)]
            events = await outbox_store.held_events(self._db.pool, keys) if keys else []
            if events:
                await self.push_held(events, [])
        except Exception:
            log.exception("pushing committed events failed; the outbox delivers them later")
        finally:
            self._order.settle(ranges)

    def _push(
        self,
        push: Push,
        placement: Placement | None,
        user_id: int,
        body: bytes,
        exclude: tuple[int, int] | None,
        events: list[UpdateEvent],
    ) -> Send:
        def send() -> None:
            try:
                push_now(push, placement, user_id, body, exclude)
            except Exception:
                log.exception("pushing committed events failed; the outbox delivers them later")
                return
            self._handled(events)

        return send

    def _handled(self, events: list[UpdateEvent]) -> None:
        """Events pushed (or with nobody to push to): their rows go in the next delete."""
        HELD_PUSHED.inc(len(events))
        DELIVERED.inc(len(events))
        self._done.extend((e.user_id, e.pts) for e in events)
        self._reap_wakeup.set()

    # -- the rows' delete -----------------------------------------------------------------

    async def _reap(self) -> None:
        """Delete the held rows pushed here, a batch at a time."""
        while True:
            await self._reap_wakeup.wait()
            await self._sleep(self.reap_interval)
            self._reap_wakeup.clear()
            try:
                await self._delete()
            except Exception:
                log.exception("deleting pushed outbox rows failed; retrying")
                await self._sleep(REAP_ERROR_PAUSE_SECONDS)
                self._reap_wakeup.set()

    async def _delete(self) -> None:
        keys, self._done = self._done, []
        try:
            await outbox_store.delete_pts_rows(
                self._db.pool, keys, self.lease, distributed=self._db.distributed
            )
        except BaseException:
            self._done[:0] = keys
            raise
