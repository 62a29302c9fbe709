"""Per target user, the pushes this process has in hand, sent in pts order.

A pts is taken before the transaction that uses it, so two writes for one user may
commit in either order, and the pushes of committed events (a sender's own, an outbox
worker's batch) render with awaits in between, so they may finish in either order too.
A client that gets pts 147 before 145 holds it back and, if the gap does not fill
soon, asks for the difference; some do that badly. So each push goes through here:

- a push is *begun* (a slot) before its first await, and *sent* (given the function
  that pushes it) or *dropped* (nothing to push: nobody online, only the session that
  caused it, nothing visible) once it knows;
- a write that will push its own events here says which pts it took (*expect*) before
  its transaction and *settles* them once it is over, pushed or not;
- a push goes as soon as no lower pts of the same user is still expected or in a slot
  here. Else it waits, at most ``wait`` seconds from when it is ready: then it goes
  anyway, the lower ones it waited for are given up (they go whenever they come), and
  a client that sees the gap asks for the difference, as it would have before.

A push never waits for another user's, nor for a pts this process does not know it will
push: events written by another process are that process's to push, and across
processes no order is promised. A push with no pts (state events: a draft, a pin) does
not wait for expected pts, but waits for what was begun before it for the same user, so
it keeps its place after what was already in hand.

Memory: a user has an entry only while something of theirs is expected or in hand.
Slots are as many as the pushes in flight (every begun slot is sent or dropped), and a
ready push waits at most ``wait``. Expected pts are settled by their writers; should
one not be, it stops counting after ``forget_after`` seconds, and no more than
``max_expected`` are kept (beyond that, new ones are not waited for).

Nothing here awaits: the functions given to ``send`` run from inside the call that
releases them (``send``, ``drop``, ``settle``, ``expire``), in pts order. The owner calls
``expire`` at ``next_deadline``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

# Well under the half second clients wait for a gap to fill before they ask for the
# difference: a push held this long still arrives before they give up on the gap.
DEFAULT_WAIT = 0.25
# A write that took a pts and never settled it (it should always) stops holding pushes
# back after this long.
DEFAULT_FORGET_AFTER = 5.0
DEFAULT_MAX_EXPECTED = 100_000
# A range longer than this is not waited for pts by pts (no write of one message takes
# that many).
MAX_EXPECTED_RANGE = 1000

Send = Callable[[], None]


@dataclass(eq=False, slots=True)
class _Entry:
    # Order among the user's entries: (first pts, seq) for a push of pts events;
    # (position after what was in hand when it was begun, seq) for state events only.
    key: tuple[int, int]
    pts: bool  # whether it carries pts events (and so waits for expected pts)
    send: Send | None = None  # set once ready
    deadline: float = 0.0  # when a ready entry stops waiting
    forced: bool = False  # its wait ran out, or one above it did: it goes when ready
    gone: bool = False  # sent or dropped


@dataclass(slots=True)
class _User:
    entries: list[_Entry] = field(default_factory=list)  # in key order
    expected: set[int] = field(default_factory=set)

    def idle(self) -> bool:
        return not self.entries and not self.expected


class Slot:
    """One push of one user, begun: ``send`` or ``drop`` it, exactly once."""

    __slots__ = ("_entry", "_owner", "_user_id")

    def __init__(self, owner: PendingPushes, user_id: int, entry: _Entry) -> None:
        self._owner = owner
        self._user_id = user_id
        self._entry = entry

    def send(self, push: Send) -> None:
        """Push now, or once the lower pts it waits for are handled or the wait ends."""
        self._owner._ready(self._user_id, self._entry, push)

    def drop(self) -> None:
        """Nothing to push: what waited for this slot waits no more."""
        self._owner._remove(self._user_id, self._entry)


class PendingPushes:
    def __init__(
        self,
        *,
        wait: float = DEFAULT_WAIT,
        forget_after: float = DEFAULT_FORGET_AFTER,
        max_expected: int = DEFAULT_MAX_EXPECTED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if wait < 0 or forget_after <= 0 or max_expected < 0:
            raise ValueError("wait must be >= 0, forget_after > 0, max_expected >= 0")
        self.wait = wait
        self.forget_after = forget_after
        self.max_expected = max_expected
        self._clock = clock
        self._users: dict[int, _User] = {}
        # (user, pts) -> when it stops counting; oldest first (one constant lifetime)
        self._expected: dict[tuple[int, int], float] = {}
        self._seq = itertools.count()
        # (deadline, seq, user, entry) of ready entries held back; some may be gone
        self._held: list[tuple[float, int, int, _Entry]] = []
        self._closed = False

    # -- what writers say -----------------------------------------------------------------

    def expect(self, user_id: int, first: int, last: int) -> None:
        """A write in progress here took ``first..last`` and will push what it uses."""
        if self._closed or first < 1 or not 0 < last - first + 1 <= MAX_EXPECTED_RANGE:
            return
        self._prune()
        until = self._clock() + self.forget_after
        user = self._users.get(user_id)
        for pts in range(first, last + 1):
            if len(self._expected) >= self.max_expected:
                break
            if user is None:
                user = self._users[user_id] = _User()
            self._expected[user_id, pts] = until
            user.expected.add(pts)

    def settle(self, user_id: int, first: int, last: int) -> None:
        """The write that took ``first..last`` is over: whatever of it was not begun
        (a failure, a duplicate, nothing to write) is not coming."""
        user = self._users.get(user_id)
        if user is None:
            return
        for pts in [p for p in user.expected if first <= p <= last]:
            self._unexpect(user_id, user, pts)
        self._drain(user_id)

    # -- pushes ---------------------------------------------------------------------------

    def begin(
        self,
        user_id: int,
        first: int | None,
        last: int | None = None,
        covers: Collection[int] | None = None,
    ) -> Slot:
        """A push of ``first..last`` (None: state events only) is on its way: before its
        first await, so that what comes after it waits for it. ``covers``: the pts it
        carries, when they are not all of ``first..last`` (a worker's group of rows with
        other writes' pts between them); only those stop being awaited here."""
        seq = next(self._seq)
        if self._closed:
            return Slot(self, user_id, _Entry((0, seq), pts=first is not None))
        self._prune()
        user = self._users.get(user_id)
        if user is None:
            user = self._users[user_id] = _User()
        if first is None:
            after = max((e.key[0] for e in user.entries), default=0)
            entry = _Entry((after, seq), pts=False)
        else:
            if user.expected:
                top = first if last is None else last
                for pts in [p for p in user.expected if first <= p <= top]:
                    if covers is None or pts in covers:
                        self._unexpect(user_id, user, pts)
            entry = _Entry((first, seq), pts=True)
        _insert(user.entries, entry)
        return Slot(self, user_id, entry)

    def expire(self) -> None:
        """Give up the waits that ran out: each such push goes, and the ready ones below
        it go first, in pts order."""
        now = self._clock()
        self._prune()
        late: dict[int, _Entry] = {}  # user -> the highest of their pushes that waited out
        while self._held and self._held[0][0] <= now:
            _, _, user_id, entry = heapq.heappop(self._held)
            if not entry.gone and (user_id not in late or late[user_id].key < entry.key):
                late[user_id] = entry
        for user_id, top in late.items():
            user = self._users[user_id]
            for entry in user.entries:
                if entry.key <= top.key and entry.send is not None:
                    entry.forced = True
            if top.pts:
                for pts in [p for p in user.expected if p < top.key[0]]:
                    self._unexpect(user_id, user, pts)
            self._drain(user_id)

    def next_deadline(self) -> float | None:
        """When ``expire`` has something to do next (None: nothing waits)."""
        while self._held and self._held[0][3].gone:
            heapq.heappop(self._held)
        return self._held[0][0] if self._held else None

    def close(self) -> None:
        """Stopping: everything ready goes now, in order, and from now on every push
        goes as soon as it is sent."""
        self._closed = True
        for user_id, user in list(self._users.items()):
            for entry in user.entries:
                entry.forced = True
            user.expected.clear()
            self._drain(user_id)
        self._users.clear()
        self._expected.clear()
        self._held.clear()

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        """Users with something expected or in hand."""
        return len(self._users)

    def expected_count(self) -> int:
        return len(self._expected)

    def lowest_expected(self, user_id: int) -> int | None:
        """The lowest pts of the user that a write of this process has taken and not
        settled yet (its event may not be committed, or not answered to its sender)."""
        self._prune()
        user = self._users.get(user_id)
        return min(user.expected) if user is not None and user.expected else None

    # -- inside ---------------------------------------------------------------------------

    def _ready(self, user_id: int, entry: _Entry, push: Send) -> None:
        user = self._users.get(user_id)
        if self._closed or user is None or entry not in user.entries:
            _run(push)  # no longer waited on (stopping): goes at once
            return
        entry.send = push
        entry.deadline = self._clock() + self.wait
        self._drain(user_id)
        if not entry.gone:
            heapq.heappush(self._held, (entry.deadline, next(self._seq), user_id, entry))

    def _remove(self, user_id: int, entry: _Entry) -> None:
        user = self._users.get(user_id)
        if user is not None and entry in user.entries:
            user.entries.remove(entry)
            entry.gone = True
            self._drain(user_id)

    def _drain(self, user_id: int) -> None:
        """Send the user's entries that may go, one at a time in key order."""
        user = self._users.get(user_id)
        if user is None:
            return
        while (entry := self._next(user)) is not None:
            user.entries.remove(entry)
            entry.gone = True
            assert entry.send is not None
            _run(entry.send)
        if user.idle():
            del self._users[user_id]

    def _next(self, user: _User) -> _Entry | None:
        entries = user.entries
        if not entries:
            return None
        # The first goes once sent, if forced or if no lower pts of its user is still
        # expected. Above it, only a sent entry that is forced goes: the first, waiting
        # or still in its slot (not sent), holds up the others.
        head = entries[0]
        if head.send is not None and (
            head.forced
            or not (head.pts and user.expected and any(p < head.key[0] for p in user.expected))
        ):
            return head
        for entry in entries[1:]:
            if entry.send is not None and entry.forced:
                return entry
        return None

    def _unexpect(self, user_id: int, user: _User, pts: int) -> None:
        user.expected.discard(pts)
        self._expected.pop((user_id, pts), None)

    def _prune(self) -> None:
        """Forget expected pts past their lifetime (the oldest come first)."""
        if not self._expected:
            return  # the common case of a push: nothing is being written here
        now = self._clock()
        stale: set[int] = set()
        for key, until in self._expected.items():
            if until > now:
                break
            stale.add(key[0])
        for user_id in stale:
            user = self._users[user_id]
            for pts in [p for p in user.expected if self._expected[user_id, p] <= now]:
                self._unexpect(user_id, user, pts)
            self._drain(user_id)


def _insert(entries: list[_Entry], entry: _Entry) -> None:
    index = len(entries)
    while index and entries[index - 1].key > entry.key:
        index -= 1
    entries.insert(index, entry)


def _run(push: Send) -> None:
    # One push that raises must not keep the others from going (the owner's function
    # reports its own failures; this is the last resort).
    try:
        push()
    except Exception:
        log.exception("a push raised")
