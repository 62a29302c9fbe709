"""A send's pts announced to the pushes of its own process, then settled."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from telesrv.services.held_pushes import expecting
from telesrv.services.update_log import PtsRange
from telesrv.store.counters import Allocation
from telesrv.store.messages import BoxMessage
from telesrv.store.update_log import UpdateEvent


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

    async def push_written(self, ranges: Sequence[PtsRange]) -> None:
        self.calls.append(("written", list(ranges)))

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


async def test_a_send_that_hands_its_pts_over_does_not_settle_them() -> None:
    """Read back and pushed by the held pushes, they are settled there once out."""
    held = _Held()
    with expecting(held, [Allocation(1, 3, 4, 1, 2)]) as announced:
        await announced.push_written()
    assert held.calls == [("expect", [(1, 3, 4)]), ("written", [(1, 3, 4)])]
