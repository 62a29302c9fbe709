"""One write to the update log, whoever makes it.

A write that appends pts events takes its pts (and box ids) for the owners it touches
from the counters first, then runs its named transaction with them. The log must stay
dense (a client waits for every pts in order), so whatever the write did not commit
becomes a noop: a failed transaction's pts, and those of a write that is refused or
cancelled after taking them. A write that commits but uses fewer than it took (a
concurrent call did the work first) fills the rest itself, in its transaction.

Writes of state events only (no pts) need none of this and run their transaction
directly.

Given a ``PtsDelivery`` (the held pushes of the process), a write announces the pts
it took before its transaction, holds their outbox rows in it (due to a worker only
after the lease), and has the process push their events right after its commit. A
client checks that pts come in order: a read's push left to a busy worker could reach
the reader's other devices after the push of a message sent just after the read, which
they see as a gap and answer with ``updates.getDifference``. Held, the rows cannot be
claimed by a worker before their writer pushed them; announced until then, they make
a later push of the same users wait (briefly) for theirs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Protocol, TypeVar

import asyncpg

from telesrv.store import counters as counters_store
from telesrv.store import outbox as outbox_store
from telesrv.store import update_log as update_log_store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db
from telesrv.store.metrics import PTS_FILL_FAILURES
from telesrv.store.refusals import YouBlockedUser

log = logging.getLogger(__name__)

T = TypeVar("T")

PtsRange = tuple[int, int, int]  # user id, first pts, last pts (0: none taken)
# (user id, pts, box ids) for each owner a write touches
Takes = Sequence[tuple[int, int, int]]
# A write's transaction: given its connection and the allocations, in the order taken.
LogTxn = Callable[[asyncpg.Connection, list[Allocation]], Awaitable[T]]


class PtsDelivery(Protocol):
    """The pushes of a write's pts events, from the process that writes them."""

    lease: float  # how long the write's rows are held

    @property
    def pushes_held(self) -> bool:
        """Whether writes should hold their rows and push them (the outbox runs)."""
        ...

    def expect_pts(self, ranges: Sequence[PtsRange]) -> None:
        """Before the transaction: a push of a later pts of these users waits."""
        ...

    async def push_written(self, ranges: Sequence[PtsRange]) -> None:
        """After the commit: push the events of these pts whose rows are held, then
        settle them; a cancelled caller does not stop it."""
        ...

    def settle_pts(self, ranges: Sequence[PtsRange]) -> None:
        """The write failed: its pts are not coming."""
        ...


def pts_range(allocation: Allocation) -> PtsRange:
    return (allocation.user_id, allocation.first_pts, allocation.last_pts)


async def fill_unused_pts(db: Db, ranges: Iterable[PtsRange], now: int, reason: str) -> None:
    """Every listed pts becomes a noop. Best effort: should this fail too, the hole is
    filled once stale by whoever next reads the state (see UpdatesService)."""
    for user_id, first, last in ranges:
        if not last:
            continue
        try:
            await update_log_store.fill_pts(db.pool, user_id, range(first, last + 1), now)
        except Exception:
            PTS_FILL_FAILURES.inc(last - first + 1)
            log.exception(
                "could not fill pts %d..%d of user %d after %s", first, last, user_id, reason
            )


def filled_on_failure(db: Db, allocations: Sequence[Allocation], now: int) -> FilledOnFailure:
    """Around work that uses pts taken before it: should it fail, each becomes a noop."""
    return FilledOnFailure(db, allocations, now)


class FilledOnFailure:
    """``filled_on_failure``'s context. A class rather than a generator: a send enters
    one or two, and a generator's context costs several times as much to enter."""

    __slots__ = ("_db", "_allocations", "_now")

    def __init__(self, db: Db, allocations: Sequence[Allocation], now: int) -> None:
        self._db = db
        self._allocations = allocations
        self._now = now

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:  # the failure goes on once the pts are filled
            ranges = [pts_range(a) for a in self._allocations]
            await fill_unused_pts(self._db, ranges, self._now, exc_type.__name__)


class LogWrites:
    def __init__(self, db: Db, counters: Counters, delivery: PtsDelivery | None = None) -> None:
        self._db = db
        self._counters = counters
        self._delivery = delivery

    async def write(
        self,
        name: str,
        takes: Takes,
        txn: LogTxn[T],
        *,
        now: int,
        single_statement: bool = False,
    ) -> tuple[T, list[Allocation]]:
        """Take what ``takes`` asks for, run ``txn`` with it as the transaction ``name``,
        and return its result with the allocations."""
        allocations = await self._counters.allocate(takes)
        delivery = self._delivery
        ranges = [pts_range(a) for a in allocations if a.last_pts]
        if delivery is None or not ranges or not delivery.pushes_held:
            result = await self.write_taken(
                name,
                allocations,
                _with_allocations,
                txn,
                allocations,
                now=now,
                single_statement=single_statement,
            )
            return result, allocations
        delivery.expect_pts(ranges)
        try:
            # A transaction, no longer one statement: the hold is set first.
            result = await self.write_taken(
                name, allocations, _held, txn, allocations, delivery.lease, now=now
            )
        except BaseException:
            delivery.settle_pts(ranges)
            raise
        await delivery.push_written(ranges)
        return result, allocations

    async def take_chat(
        self,
        sender: int,
        recipient: int,
        n: int,
        now: int,
        guarded: Sequence[Allocation | None] | None = None,
    ) -> tuple[Allocation, Allocation | None]:
        """n pts and box ids on each side of a chat, for a send (None for a recipient
        who gets nothing). ``guarded``: what the guarded allocation of both sides gave
        already (taken with the send's claim), else it is made here."""
        # A recipient who blocked the sender gets nothing, not even a pts; a sender
        # who blocked the recipient may not write to them at all (YOU_BLOCKED_USER).
        # Most people block nobody: Redis keeps a short-lived "blocks nobody" mark per
        # user, and each side's allocation is made only under its mark, both in one
        # round trip. Without a mark, contact_blocks is read first. The send function
        # checks the recipient's block again inside its transaction either way.
        to_other = recipient != sender
        if guarded is None:
            requests = [(sender, n, n, to_other)]
            if to_other:
                requests.append((recipient, n, n, True))
            guarded = await self._counters.allocate_guarded(requests)
        sender_alloc = guarded[0]
        recipient_alloc = guarded[1] if to_other else None
        if sender_alloc is not None and (recipient_alloc is not None or not to_other):
            return sender_alloc, recipient_alloc
        # A side without its mark (a new account, or the mark ran out): one query reads
        # both sides' blocks and counter floors, and one round trip allocates and sets
        # the marks, instead of a query and round trip per fact and side.
        taken = [a for a in (sender_alloc, recipient_alloc) if a is not None]
        async with filled_on_failure(self._db, taken, now):
            unguarded = [sender] if sender_alloc is None else []
            if to_other and recipient_alloc is None:
                unguarded.append(recipient)
            first = unguarded[0]
            facts = await counters_store.unguarded_facts(
                self._db.pool,
                first,
                recipient if first == sender else sender,
                of_other=len(unguarded) == 2,
            )
            if sender_alloc is None and facts[sender].blocks_other:
                raise YouBlockedUser()
            wanted = [
                (facts[user], n, not facts[user].has_blocks)
                for user in unguarded
                # a recipient who blocked the sender gets nothing
                if user == sender or not facts[user].blocks_other
            ]
            made = {a.user_id: a for a in await self._counters.allocate_floored(wanted)}
        if sender_alloc is None:
            sender_alloc = made[sender]
        if to_other and recipient_alloc is None:
            recipient_alloc = made.get(recipient)
        return sender_alloc, recipient_alloc

    async def write_taken(
        self,
        name: str,
        allocations: list[Allocation],
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        now: int,
        single_statement: bool = False,
    ) -> T:
        """Run ``fn(conn, *args)`` as the transaction ``name``, with pts a caller took
        before and built ``args`` from (a send's, in ``take_chat``): should it fail, they
        become noops."""
        async with filled_on_failure(self._db, allocations, now):
            return await self._db.run_txn(name, fn, *args, single_statement=single_statement)


async def _with_allocations(
    conn: asyncpg.Connection, txn: LogTxn[Any], allocations: list[Allocation]
) -> Any:
    return await txn(conn, allocations)


async def _held(
    conn: asyncpg.Connection, txn: LogTxn[Any], allocations: list[Allocation], hold: float
) -> Any:
    await outbox_store.hold_rows_txn(conn, hold)
    return await txn(conn, allocations)
