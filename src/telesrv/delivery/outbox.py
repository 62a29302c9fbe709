"""Outbox workers: claim rows -> push the updates to online sessions -> commit.

Each worker loops over one batch at a time, in one transaction: claim (lock the rows
until the commit), load their events (one query), push one ``updates`` per (user,
excluded session) group, delete the handled rows, commit. A worker that dies before its
commit loses nothing: the transaction rolls back and the rows are due again at once. A
group whose rendering or push raises is put back with exponential backoff and ends
'failed' after ``max_attempts`` claims; the other groups of the batch go on. A batch
that raises as a whole is rolled back and its rows are put back with a backoff (up to
the lease), never 'failed'.

Workers claim in parallel, and a writer pushes its own committed events beside them
(``held_pushes.py``), so pushes for one user may be ready out of pts order. Within this
process they still leave in pts order (``PushOrder``): each push takes its place before
its first await, and one that is ready while a lower pts of the same user is still in
hand here (or taken by a send in progress here) waits for it, a short bounded while at
most. Pushes made by other processes are not ordered with these: a client that gets
pts 6 before pts 5 from two processes holds 6 back until 5 arrives, or asks
getDifference.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import asyncpg

from telesrv.config import MAX_OUTBOX_BATCH
from telesrv.delivery.held_pushes import HELD_REAP_SECONDS, HeldPushes, RenderKnown
from telesrv.delivery.metrics import BATCH_SECONDS, CLAIMED, DELIVERED, FAILED
from telesrv.delivery.pending_pushes import DEFAULT_WAIT, Send, Slot
from telesrv.delivery.placement import Locate, Placement, Push, PushTargets, push_now, reached
from telesrv.delivery.push_order import PushOrder
from telesrv.delivery.row_groups import GroupKey, event_key, group_rows, row_pts, row_span
from telesrv.store import citus, state_log
from telesrv.store import outbox as outbox_store
from telesrv.store import update_log as update_log_store
from telesrv.store.db import Db, after_commit
from telesrv.store.outbox import OutboxRow
from telesrv.store.update_log import UpdateEvent

log = logging.getLogger(__name__)

# (user_id, events in pts order, date) -> the serialized ``updates``, None when none of
# the events has a client-visible form
RenderBatch = Callable[[list[tuple[int, list[UpdateEvent]]], int], Awaitable[list[bytes | None]]]
Render = Callable[[int, list[UpdateEvent], int], Awaitable[bytes | None]]


# Back off 0.5 s, 1 s, 2 s, ... after the first, second, third failed claim.
RETRY_BASE_SECONDS = 0.5
RETRY_CAP_SECONDS = 300.0
# Idle polls that find nothing stretch the wait up to this many poll intervals.
IDLE_BACKOFF = 8
# A worker whose claims keep coming back full (a backlog: after an outage, or rows of
# users who were offline) doubles its next claim, up to this many times the configured
# batch, and goes back to the batch once a claim comes back short. Each batch costs a
# few statements whatever its size (claim, events, boxes, users, delete, commit), and
# at 200 rows they were a good part of the database's time per row: a drain's
# PostgreSQL CPU per row fell from about 53 µs at 200 rows to 41 at 500 and 39 at
# 1,000. Rows come to the outbox workers only when their writer did not push them
# itself, so steady sends never make a batch grow. A grown claim holds at most
# MAX_OUTBOX_BATCH rows, as a configured one does.
BATCH_GROWTH = 8
# Every this many groups of a batch pushed, the event loop runs its other work.
PUSH_YIELD_EVERY = 100


def grown_batch_bound(batch: int) -> int:
    """The most rows a worker claims at once when its claims keep coming back full."""
    return max(batch, min(batch * BATCH_GROWTH, MAX_OUTBOX_BATCH))


# After an unexpected error (the database is away, say), before the next claim.
ERROR_PAUSE_SECONDS = 1.0
_MAX_ERROR_TEXT = 1000


def retry_delay(attempts: int, base: float, cap: float) -> float:
    """Backoff after the ``attempts``-th claim of a row failed (attempts >= 1)."""
    return min(cap, base * 2.0 ** max(0, min(attempts - 1, 30)))


def _batch_push(
    push: Push,
    placement: Placement | None,
    user_id: int,
    body: bytes,
    exclude: tuple[int, int] | None,
    pushed: asyncio.Future[None],
) -> Send:
    """A claimed group's push, telling the worker how it went."""

    def send() -> None:
        try:
            push_now(push, placement, user_id, body, exclude)
        except Exception as exc:
            if not pushed.done():
                pushed.set_exception(exc)
            return
        if not pushed.done():
            pushed.set_result(None)

    return send


class OutboxWakeup:
    """The signal from writers to the outbox workers: rows were committed.

    Its own object, built before both sides: the writers (every service that commits
    events) are built before the delivery that pushes them, which needs what renders
    and pushes (and so the services) first.
    """

    def __init__(self) -> None:
        self._wakeups = asyncio.Semaphore(0)
        self._pending = False

    def wake(self) -> None:
        """Something was committed to the outbox: one idle worker claims now (and brings
        in another if its batch comes back full). Waking them all would have every
        worker claim a row or two per commit."""
        if not self._pending:
            self._pending = True
            self._wakeups.release()

    def release(self) -> None:
        """Let one waiting worker go (to see that it is stopping)."""
        self._wakeups.release()

    async def wait(self) -> None:
        await self._wakeups.acquire()
        # Cleared before claiming: a wake() from now on wakes a worker again, and what
        # was committed before it is seen by the coming claim.
        self._pending = False


class OutboxDelivery:
    def __init__(
        self,
        db: Db,
        render: Render,
        push: Push,
        *,
        workers: int = 2,
        batch: int = 100,
        interval: float = 0.05,
        lease: float = 30.0,
        max_attempts: int = 10,
        retry_base: float = RETRY_BASE_SECONDS,
        retry_cap: float = RETRY_CAP_SECONDS,
        online: Callable[[int], bool] | None = None,
        render_batch: RenderBatch | None = None,
        locate: Locate | None = None,
        render_known: RenderKnown | None = None,
        gather: float = 0.02,
        reap_interval: float = HELD_REAP_SECONDS,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        order_wait: float = DEFAULT_WAIT,
        wakeup: OutboxWakeup | None = None,
    ) -> None:
        if workers < 1 or batch < 1 or max_attempts < 1:
            raise ValueError("workers, batch and max_attempts must be >= 1")
        if interval <= 0 or lease <= 0:
            raise ValueError("interval and lease must be > 0")
        self._db = db
        self._render = render
        # When given, a batch's groups are rendered together (a few queries per batch,
        # not per group); should that fail, each group is rendered on its own.
        self._render_batch = render_batch
        # When ``locate`` is given, it decides who is online and pushes (in place of
        # online/push).
        self._targets = PushTargets(push, online, locate)
        self.workers = workers
        self.batch = batch
        self.interval = interval
        self.lease = lease
        self.gather = gather
        self.max_attempts = max_attempts
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self._clock = clock
        self._sleep = sleep
        self._in_flight = 0  # claimed batches being handled (pushed, deleted), in all workers
        self._wakeup = wakeup if wakeup is not None else OutboxWakeup()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        # Per user, the pushes in hand here (the workers' and the held rows'), sent in
        # pts order.
        self._order = PushOrder(wait=order_wait)
        # When ``render_known`` is given, a writer may push the events it committed
        # itself (``held.push_held``).
        self.held = (
            HeldPushes(
                db,
                render_known,
                self._targets,
                self._order,
                lease=lease,
                reap_interval=reap_interval,
                clock=clock,
                sleep=sleep,
            )
            if render_known is not None
            else None
        )

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        if self._tasks:
            raise RuntimeError("outbox delivery already started")
        self._stopping = False
        self._order.open()
        self._tasks = [
            asyncio.create_task(self._work(), name=f"outbox-worker-{n}")
            for n in range(self.workers)
        ]
        if self.held is not None:
            self.held.start()

    async def stop(self) -> None:
        """Stop claiming; a batch in progress is finished first."""
        self._stopping = True
        if self.held is not None:
            self.held.stopping()
        tasks, self._tasks = self._tasks, []
        for _ in tasks:
            self._wakeup.release()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        # What is still held back goes now (the held rows among it are deleted just
        # below).
        self._order.close()
        if self.held is not None:
            await self.held.stop()

    def wake(self) -> None:
        """Something was committed to the outbox (see OutboxWakeup.wake)."""
        self._wakeup.wake()

    def lowest_expected(self, user_id: int) -> int | None:
        """The lowest pts of the user still being written here (see PendingPushes)."""
        return self._order.lowest_expected(user_id)

    # -- the loop -----------------------------------------------------------------------

    async def _work(self) -> None:
        idle = self.interval
        probe = True
        size = self.batch  # this worker's next claim (see BATCH_GROWTH)
        failed = 0  # batches failed in a row: an outage logs its first, then its end
        while not self._stopping:
            try:
                claimed = await self.run_once(probe=probe, limit=size)
            except Exception:
                if not failed:
                    log.exception("outbox batch failed; pausing before the next claim")
                else:
                    log.debug("outbox batch failed again", exc_info=True)
                failed += 1
                # A failed batch's rows are backed off whole: the next claim takes the
                # batch again, not what a backlog had grown it to.
                size = self.batch
                await self._idle(max(self.interval, ERROR_PAUSE_SECONDS))
                probe = True
                continue
            if failed:
                log.warning("outbox batches work again after %d failed in a row", failed)
                failed = 0
            if claimed >= size:
                # A full batch means more is likely waiting: claim again at once, more
                # of it, and let another worker help.
                size = min(size * 2, grown_batch_bound(self.batch))
                self.wake()
                probe = False
                continue
            size = self.batch
            if claimed:
                idle = self.interval
            # A wake means rows were just committed: claim without asking first.
            woken = await self._idle(idle)
            probe = not woken
            if woken:
                idle = self.interval
            else:
                # Nothing committed here meanwhile (a commit here wakes a worker at
                # once): the poll only finds rows written by other processes or held
                # rows whose writer could not push them (due after the lease), so
                # polls that keep finding nothing come further apart, up to a cap.
                idle = min(idle * 2, self.interval * IDLE_BACKOFF)

    async def _idle(self, seconds: float) -> bool:
        """Wait for a wake() or ``seconds``; True when woken."""
        if self._stopping:
            return False
        try:
            async with asyncio.timeout(seconds):
                await self._wakeup.wait()
        except TimeoutError:
            return False
        if self.gather > 0 and not self._stopping and self._in_flight:
            # Under load (another batch is on its way), let the commits of the next few
            # milliseconds join this batch. An idle outbox claims at once: waiting would
            # only add the window to the push latency of a lone message.
            await self._sleep(self.gather)
        return True

    async def run_once(self, *, probe: bool = True, limit: int | None = None) -> int:
        """Claim and handle one batch of up to ``limit`` rows (None: the configured
        batch); returns how many rows were claimed. ``probe``: ask whether any row is
        due first, in one statement, and open the claim's transaction (BEGIN and COMMIT
        are a round trip each) only then: what an idle poll, which mostly finds
        nothing, should do."""
        started = time.perf_counter()
        if probe and not await outbox_store.any_due(self._db.pool):
            return 0
        rows: list[OutboxRow] = []
        try:
            claimed = await self._db.run_txn(
                "outbox_batch", self._batch_txn, rows, self.batch if limit is None else limit
            )
        except Exception as exc:
            if rows:
                await self._back_off(rows, exc)
            raise
        if claimed:
            BATCH_SECONDS.observe(time.perf_counter() - started)
        return claimed

    async def _batch_txn(
        self, conn: asyncpg.Connection, claimed: list[OutboxRow], limit: int
    ) -> int:
        rows = await outbox_store.claim_batch_txn(conn, limit, distributed=self._db.distributed)
        claimed[:] = rows  # for _back_off, should the batch raise
        if not rows:
            return 0
        CLAIMED.inc(len(rows))
        # Only a batch that holds rows counts as on its way: an idle poll that finds
        # nothing must not make a woken worker wait the gather window.
        self._in_flight += 1
        try:
            done = await self._handle(conn, rows)
            delivered = await outbox_store.delete_claimed_txn(
                conn, done, distributed=self._db.distributed
            )
        finally:
            self._in_flight -= 1
        # Counted once the deletes are committed: whoever waits on the counter (the
        # send benchmark) finds the rows gone from the table then.
        after_commit(lambda: DELIVERED.inc(delivered))
        return len(rows)

    async def _handle(self, conn: asyncpg.Connection, rows: list[OutboxRow]) -> list[OutboxRow]:
        """Push the claimed rows' updates and put back the groups that failed; returns
        the rows handled for good."""
        groups = group_rows(rows)
        # Each group takes its place among its user's pushes before the first await.
        slots = {
            key: self._order.begin(key[0], *row_span(group), covers=row_pts(group))
            for key, group in groups
        }
        try:
            return await self._handle_groups(conn, groups, slots)
        finally:
            for slot in slots.values():  # not pushed: what waits for them goes on
                slot.drop()

    async def _handle_groups(
        self,
        conn: asyncpg.Connection,
        groups: list[tuple[GroupKey, list[OutboxRow]]],
        slots: dict[GroupKey, Slot],
    ) -> list[OutboxRow]:
        online, push, placement = await self._targets.resolve([u for (u, _), _ in groups])
        reachable = {key: reached(online, placement, *key) for key, _ in groups}
        done = [r for key, group in groups if not reachable[key] for r in group]
        for key, _ in groups:
            if not reachable[key]:
                slots.pop(key).drop()
        wanted = [r for key, group in groups if reachable[key] for r in group]
        events = await self._load_events(conn, wanted)
        date = int(self._clock())
        live = [
            (
                user_id,
                exclude,
                group,
                [e for r in group if (e := events.get(event_key(r))) is not None],
            )
            for (user_id, exclude), group in groups
            if reachable[user_id, exclude]
        ]
        bodies: list[bytes | None] | None = None
        if self._render_batch is not None and live:
            try:
                bodies = await self._render_batch([(u, evs) for u, _, _, evs in live], date)
            except Exception:
                log.exception("outbox batch render failed; rendering group by group")
        # Groups handed over to be pushed, and what became of each push.
        sent: list[tuple[list[OutboxRow], asyncio.Future[None]]] = []
        for index, (user_id, exclude, group, group_events) in enumerate(live):
            if index and index % PUSH_YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a grown batch lets the loop's other work run
            slot = slots.pop((user_id, exclude))
            try:
                if bodies is not None:
                    body = bodies[index]
                else:
                    body = await self._render(user_id, group_events, date) if group_events else None
            except Exception as exc:
                slot.drop()
                await self._retry(conn, group, exc)
                continue
            if body is None:
                slot.drop()
                done.extend(group)
                continue
            pushed = asyncio.get_running_loop().create_future()
            self._order.send(slot, _batch_push(push, placement, user_id, body, exclude, pushed))
            sent.append((group, pushed))
        held_back = [pushed for _, pushed in sent if not pushed.done()]
        if held_back:
            # A push held back for a lower pts goes within the order wait: the rows
            # are deleted once it went, so that a worker dying before then loses none.
            await asyncio.wait(held_back)
        for group, pushed in sent:
            error = pushed.exception()
            if isinstance(error, Exception):
                await self._retry(conn, group, error)
            else:
                done.extend(group)
        return done

    async def _load_events(
        self, conn: asyncpg.Connection, rows: list[OutboxRow]
    ) -> dict[tuple[str, int, int], UpdateEvent]:
        """The events of the rows: pts events from the pts log, state events from the
        state log (one query each, only when the batch has such rows)."""
        events: dict[tuple[str, int, int], UpdateEvent] = {}
        pts_keys = [(r.target_user_id, r.pts) for r in rows if r.pts is not None]
        state_keys = [(r.target_user_id, r.state_id) for r in rows if r.state_id is not None]
        if self._db.distributed and (pts_keys or state_keys):
            await citus.probe_joins_txn(conn)
        if pts_keys:
            for e in await update_log_store.events_at(
                conn, pts_keys, distributed=self._db.distributed
            ):
                events[("pts", e.user_id, e.pts)] = e
        if state_keys:
            at = await state_log.events_at(conn, state_keys, distributed=self._db.distributed)
            for (user_id, state_id), e in at.items():
                events[("state", user_id, state_id)] = e
        return events

    async def _back_off(self, rows: list[OutboxRow], exc: Exception) -> None:
        """A batch raised and its transaction rolled back, which undid its claim: the
        rows would be due at once, first in line, and a row that makes every batch
        raise would be claimed again and again, with the rows beside it. Count the
        claim and back off, at most the lease (how long a batch that raised used to
        keep its rows)."""
        attempts = max(r.attempts for r in rows)
        delay = retry_delay(attempts, self.retry_base, min(self.retry_cap, self.lease))
        try:
            await outbox_store.back_off_rows(
                self._db.pool,
                rows,
                delay,
                repr(exc)[:_MAX_ERROR_TEXT],
                distributed=self._db.distributed,
            )
        except Exception:
            log.exception("outbox: putting back the rows of a failed batch failed")
        else:
            FAILED.labels("batch").inc(len(rows))

    async def _retry(
        self, conn: asyncpg.Connection, group: list[OutboxRow], exc: Exception
    ) -> None:
        attempts = max(r.attempts for r in group)
        delay = retry_delay(attempts, self.retry_base, self.retry_cap)
        log.warning(
            "outbox push to user %d failed (attempt %d, retry in %.1f s): %r",
            group[0].target_user_id,
            attempts,
            delay,
            exc,
        )
        failed = await outbox_store.retry_claimed_txn(
            conn,
            group,
            delay,
            self.max_attempts,
            repr(exc)[:_MAX_ERROR_TEXT],
        )
        FAILED.labels("retry").inc(len(group) - failed)
        FAILED.labels("terminal").inc(failed)
        if failed:
            log.error(
                "outbox: %d row(s) for user %d failed for good", failed, group[0].target_user_id
            )
