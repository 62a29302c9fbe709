"""The pts order of this process's pushes, with the timer that ends a held-back push's
wait.

``PendingPushes`` keeps each user's pushes in pts order and never awaits; it is told
when a wait runs out. This puts it on the event loop: one timer, at the first
deadline, and a fresh ``PendingPushes`` when the delivery starts again after a stop.
Both the outbox workers and the pushes of held rows go through one ``PushOrder``, so
a worker's push and a writer's own push for one user leave in pts order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence

from telesrv.delivery.pending_pushes import DEFAULT_WAIT, PendingPushes, Send, Slot
from telesrv.store.log_writes import PtsRange


class PushOrder:
    def __init__(self, wait: float = DEFAULT_WAIT) -> None:
        self._pending = PendingPushes(wait=wait)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def open(self) -> None:
        """Starting (again): after a ``close`` pushes are ordered once more."""
        if self._pending.closed:
            self._pending = PendingPushes(wait=self._pending.wait)

    def close(self) -> None:
        """Stopping: what is held back goes now, and every later push at once."""
        self._pending.close()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def begin(
        self,
        user_id: int,
        first: int | None,
        last: int | None,
        covers: Collection[int] | None = None,
    ) -> Slot:
        """A push's place among its user's pushes, taken before its first await."""
        return self._pending.begin(user_id, first, last, covers=covers)

    def send(self, slot: Slot, push: Send) -> None:
        """Hand the slot its push: it goes now, or once the lower pts are out."""
        slot.send(push)
        self._arm()

    def lowest_expected(self, user_id: int) -> int | None:
        """The lowest pts of the user still being written here (see PendingPushes)."""
        return self._pending.lowest_expected(user_id)

    def expect(self, ranges: Sequence[PtsRange]) -> None:
        """A write in progress here took these pts, and will push what it commits of
        them itself: a push of a later pts of those users waits for it."""
        for user_id, first, last in ranges:
            self._pending.expect(user_id, first, last)

    def settle(self, ranges: Sequence[PtsRange]) -> None:
        """That write is over, committed and pushed or not."""
        for user_id, first, last in ranges:
            self._pending.settle(user_id, first, last)

    def _arm(self) -> None:
        """Have the first held-back push's wait end on time."""
        deadline = self._pending.next_deadline()
        if deadline is None:
            return
        if self._timer is not None:
            if self._timer_at <= deadline:
                return
            self._timer.cancel()
        delay = max(0.0, deadline - time.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._expire)
        self._timer_at = deadline

    def _expire(self) -> None:
        self._timer = None
        self._pending.expire()
        self._arm()
