"""PendingPushes: per user, pushes leave in pts order, a held one at most ``wait`` late.

No event loop and no wall time: the clock is a number the tests move, and a push is a
function that records its name.
"""

from __future__ import annotations

from telesrv.delivery.pending_pushes import MAX_EXPECTED_RANGE, PendingPushes, Send

WAIT = 0.25


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Pushed(list[str]):
    def push(self, name: str) -> Send:
        return lambda: self.append(name)


def make(**options: float) -> tuple[PendingPushes, Clock, Pushed]:
    clock = Clock()
    order = PendingPushes(wait=WAIT, clock=clock, **options)  # type: ignore[arg-type]
    return order, clock, Pushed()


def test_a_push_with_nothing_below_it_goes_at_once() -> None:
    order, _, pushed = make()
    order.begin(1, 5).send(pushed.push("5"))
    assert pushed == ["5"]
    assert len(order) == 0
    assert order.next_deadline() is None


def test_a_push_waits_for_a_lower_pts_taken_by_a_write_in_progress() -> None:
    order, _, pushed = make()
    order.expect(1, 145, 145)
    order.expect(1, 146, 146)
    order.expect(1, 147, 147)
    order.begin(1, 147).send(pushed.push("147"))  # committed first
    assert pushed == []
    order.begin(1, 145).send(pushed.push("145"))
    assert pushed == ["145"]  # 147 still waits for 146
    order.begin(1, 146).send(pushed.push("146"))
    assert pushed == ["145", "146", "147"]
    assert len(order) == 0


def test_a_group_with_gaps_stops_awaiting_only_the_pts_it_carries() -> None:
    # A worker's group of rows 5 and 9 for a user says nothing of 7, which another
    # write of this process has taken and not pushed yet: 10 still waits for 7.
    order, _, pushed = make()
    order.expect(1, 7, 7)
    order.begin(1, 5, 9, covers={5, 9}).send(pushed.push("5,9"))
    assert pushed == ["5,9"] and order.expected_count() == 1
    order.begin(1, 10).send(pushed.push("10"))
    assert pushed == ["5,9"]
    order.begin(1, 7).send(pushed.push("7"))
    assert pushed == ["5,9", "7", "10"]
    # Without ``covers``, a push of a range carries all of it.
    order.expect(1, 12, 12)
    order.begin(1, 11, 13).send(pushed.push("11-13"))
    assert order.expected_count() == 0


def test_a_push_waits_for_a_lower_one_still_rendering() -> None:
    order, _, pushed = make()
    slow = order.begin(1, 5)
    order.begin(1, 6).send(pushed.push("6"))
    assert pushed == []
    slow.send(pushed.push("5"))
    assert pushed == ["5", "6"]


def test_a_dropped_slot_lets_what_waited_for_it_go() -> None:
    # Nobody online, only the excluded session, nothing visible: nothing to push, and
    # nothing may wait for it.
    order, _, pushed = make()
    skipped = order.begin(1, 5)
    order.begin(1, 6).send(pushed.push("6"))
    assert pushed == []
    skipped.drop()
    assert pushed == ["6"]
    assert len(order) == 0


def test_a_settled_write_lets_what_waited_for_it_go() -> None:
    # The write failed (its pts became noops) or was a duplicate: it pushes nothing.
    order, _, pushed = make()
    order.expect(1, 5, 5)
    order.begin(1, 6).send(pushed.push("6"))
    assert pushed == []
    order.settle(1, 5, 5)
    assert pushed == ["6"]
    assert len(order) == 0 and order.expected_count() == 0


def test_settling_after_the_push_began_changes_nothing() -> None:
    order, _, pushed = make()
    order.expect(1, 5, 5)
    slot = order.begin(1, 5)  # the write committed; its push is rendering
    order.settle(1, 5, 5)  # the write is over
    order.begin(1, 6).send(pushed.push("6"))
    assert pushed == []  # still waits for the push in its slot
    slot.send(pushed.push("5"))
    assert pushed == ["5", "6"]


def test_the_wait_runs_out_at_its_bound_and_not_before() -> None:
    order, clock, pushed = make()
    order.expect(1, 5, 5)
    order.begin(1, 6).send(pushed.push("6"))
    deadline = clock.now + WAIT
    assert order.next_deadline() == deadline
    clock.now = deadline - 0.001
    order.expire()
    assert pushed == []
    clock.now = deadline  # at the bound
    order.expire()
    assert pushed == ["6"]
    assert order.next_deadline() is None
    # The pts given up on goes whenever it comes, and is not waited for again.
    order.begin(1, 7).send(pushed.push("7"))
    order.begin(1, 5).send(pushed.push("5"))
    assert pushed == ["6", "7", "5"]
    assert len(order) == 0


def test_past_the_bound_the_ready_ones_below_go_first_in_pts_order() -> None:
    order, clock, pushed = make()
    order.expect(1, 4, 4)
    rendering = order.begin(1, 5)
    order.begin(1, 8).send(pushed.push("8"))  # ready first: its wait ends first
    clock.now = 1000.1
    order.begin(1, 6).send(pushed.push("6"))
    clock.now = 1000.0 + WAIT  # 8's wait ran out, 6's not yet
    order.expire()
    # 8's wait ran out: 6 (ready, below it) goes first; 5, still rendering, goes when
    # it is ready, and 4 is given up.
    assert pushed == ["6", "8"]
    rendering.send(pushed.push("5"))
    assert pushed == ["6", "8", "5"]
    assert len(order) == 0


def test_a_wait_that_runs_out_later_is_left_alone() -> None:
    order, clock, pushed = make()
    order.expect(1, 5, 5)
    order.begin(1, 6).send(pushed.push("6"))
    clock.now = 1000.2
    order.begin(2, 9).send(pushed.push("other user"))  # nothing below: at once
    order.expect(3, 1, 1)
    order.begin(3, 2).send(pushed.push("3:2"))
    clock.now = 1000.0 + WAIT
    order.expire()
    assert pushed == ["other user", "6"]
    assert order.next_deadline() == 1000.2 + WAIT
    clock.now = 1000.2 + WAIT
    order.expire()
    assert pushed == ["other user", "6", "3:2"]


def test_another_users_gap_never_holds_a_push() -> None:
    order, _, pushed = make()
    order.expect(1, 5, 5)
    order.begin(1, 6).send(pushed.push("1:6"))
    order.begin(2, 6).send(pushed.push("2:6"))
    order.begin(2, 7).send(pushed.push("2:7"))
    assert pushed == ["2:6", "2:7"]


def test_a_push_of_a_range_waits_only_for_what_is_below_its_first_pts() -> None:
    order, _, pushed = make()
    order.expect(1, 5, 7)  # a write that took three
    order.begin(1, 5, 7).send(pushed.push("5..7"))  # one event with pts_count 3
    assert pushed == ["5..7"]
    assert order.expected_count() == 0


def test_state_events_keep_their_place_after_what_was_in_hand() -> None:
    order, _, pushed = make()
    order.expect(1, 4, 4)
    pts = order.begin(1, 5)
    draft = order.begin(1, None)  # committed after 5 was claimed
    draft.send(pushed.push("draft"))
    assert pushed == []  # waits for 5, not for the expected 4
    pts.send(pushed.push("5"))
    assert pushed == []  # 5 waits for 4
    order.settle(1, 4, 4)
    assert pushed == ["5", "draft"]


def test_a_state_event_with_nothing_in_hand_goes_at_once() -> None:
    order, _, pushed = make()
    order.expect(1, 4, 4)
    order.begin(1, None).send(pushed.push("draft"))
    assert pushed == ["draft"]


def test_a_push_that_raises_does_not_stop_the_others() -> None:
    order, _, pushed = make()
    first = order.begin(1, 5)
    order.begin(1, 6).send(pushed.push("6"))

    def boom() -> None:
        raise RuntimeError("gone")

    first.send(boom)
    assert pushed == ["6"]
    assert len(order) == 0


def test_expected_pts_are_bounded_in_number_and_in_time() -> None:
    order, clock, pushed = make(max_expected=3, forget_after=5.0)
    order.expect(1, 1, 2)
    order.expect(2, 1, 2)  # only one of these is kept
    assert order.expected_count() == 3
    order.begin(2, 3).send(pushed.push("2:3"))
    assert pushed == []  # waits for 2:1, which is kept
    order.begin(2, 1).send(pushed.push("2:1"))
    assert pushed == ["2:1", "2:3"]  # 2:2 was never kept: not waited for
    # A write that never settles stops counting after forget_after.
    clock.now += 5.0
    order.begin(1, 3).send(pushed.push("1:3"))
    assert pushed == ["2:1", "2:3", "1:3"]
    assert order.expected_count() == 0 and len(order) == 0
    # Ranges longer than any one write takes are not tracked pts by pts.
    order.expect(3, 1, MAX_EXPECTED_RANGE + 1)
    assert order.expected_count() == 0


def test_users_are_forgotten_once_nothing_of_theirs_is_in_hand() -> None:
    order, clock, pushed = make()
    for user in range(1000):
        order.expect(user, 1, 1)
        order.begin(user, 2).send(pushed.push(f"{user}:2"))
        order.begin(user, 1).send(pushed.push(f"{user}:1"))
    assert len(pushed) == 2000
    assert len(order) == 0 and order.expected_count() == 0
    assert order.next_deadline() is None  # the held entries left nothing behind


def test_close_sends_what_is_held_and_then_everything_at_once() -> None:
    order, _, pushed = make()
    order.expect(1, 4, 4)
    rendering = order.begin(1, 5)
    order.begin(1, 6).send(pushed.push("6"))
    order.close()
    assert pushed == ["6"]
    rendering.send(pushed.push("5"))
    order.expect(1, 7, 7)
    order.begin(1, 8).send(pushed.push("8"))
    assert pushed == ["6", "5", "8"]
    assert len(order) == 0 and order.closed


def test_a_zero_wait_holds_nothing_past_the_next_expire() -> None:
    order, _, pushed = make()
    order.wait = 0.0
    order.expect(1, 5, 5)
    order.begin(1, 6).send(pushed.push("6"))
    assert pushed == []
    order.expire()
    assert pushed == ["6"]
