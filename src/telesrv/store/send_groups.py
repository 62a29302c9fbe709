"""Group commit of lone sends: those that arrive while a send is being written wait for
it, then are written together, in one statement and one commit.

There is no timer. On an idle server a send finds nothing in flight and is written at
once, alone, by its own statement, as it would be without groups; only under load do
sends queue, and then a queue costs one commit (one WAL flush, one round trip) per
group instead of one per send. A group is bounded by its number of sends and by the
bytes they carry.

An album or a forward's copies are one unit, written all or none: in a group with other
units, the lone sends go in one statement and each such unit in a statement of its own
under a savepoint, all in the group's one transaction. On Citus each send is its two
halves, each on its user's shard (store/send_halves.py), and the group is one two-phase
commit.

The unit of failure stays one send (one unit). The lone sends' statement
(telesrv_send_group, a statement per table for the whole group) tells each send's
refusal (a bad reply, media gone) before it writes anything and answers it as a row,
so a refused send fails alone and the others commit; any other failure of a group's
statement writes the group's sends again one by one, so that only the send that
causes it fails. A duplicate random_id in one group is one message: the
lone sends are written in order, then the units of several in order, and the later
finds the earlier (a lone send goes before an album queued ahead of it).

Once queued, a send is written whatever becomes of the request that asked for it: its
caller waits for the outcome even when cancelled, so that the pts it took are settled
by what was written (a message, or noops for a send that failed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from prometheus_client import Histogram

from telesrv.store import messages as messages_store
from telesrv.store import send_halves
from telesrv.store.db import Db
from telesrv.store.messages import SendParams, SendResult

log = logging.getLogger(__name__)

GROUP_SIZES = Histogram(
    "telesrv_send_group_size",
    "Sends written by one commit (1: a lone send that found nothing in flight).",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128),
)

DEFAULT_MAX_SENDS = 64
DEFAULT_MAX_BYTES = 1 << 20  # of texts, entities and media snapshots


def send_bytes(p: SendParams) -> int:
    """What a send carries into its group's statement, roughly: its text, entities,
    quote and media snapshot."""
    size = len(p.message) + len(p.entities or b"") + len(p.fwd_from or b"")
    size += len(p.quote_text or "") + len(p.quote_entities or b"")
    if p.media is not None:
        size += len(str(p.media))
    return size


@dataclass
class _Queued:
    """A unit of a group: one send, or an album's or a forward's several, all or none."""

    name: str  # the transaction's, when the unit is written alone
    params: Sequence[SendParams]
    done: asyncio.Future[list[SendResult]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class SendGroups:
    def __init__(
        self, db: Db, *, max_sends: int = DEFAULT_MAX_SENDS, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self._db = db
        self._max_sends = max(1, max_sends)
        self._max_bytes = max_bytes
        self._queue: list[_Queued] = []
        self._writer: asyncio.Task[None] | None = None

    async def write(self, params: SendParams) -> SendResult:
        """Write one send, alone if nothing is in flight, else in the next group; raises
        its own refusal."""
        [result] = await self.write_unit("send_message", [params])
        return result

    async def write_unit(self, name: str, params: Sequence[SendParams]) -> list[SendResult]:
        """Write sends of one sender to one recipient all or none (an album, a forward's
        copies), alone as the transaction ``name`` if nothing is in flight, else in the
        next group; raises the unit's own refusal."""
        queued = _Queued(name, params)
        self._queue.append(queued)
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_queued())
        cancelled = False
        while True:
            try:
                results = await asyncio.shield(queued.done)
                break
            except asyncio.CancelledError:
                if queued.done.done() and not queued.done.cancelled():
                    raise  # the outcome is in: raised by the send itself, or its own
                # Queued sends are written whatever their caller does: wait for it.
                cancelled = True
        if cancelled:
            raise asyncio.CancelledError
        return results

    async def _write_queued(self) -> None:
        try:
            while self._queue:
                group = self._next_group()
                await self._write_group(group)
        finally:
            self._writer = None
            for queued in self._queue:  # only when this task itself was cancelled
                if not queued.done.done():
                    queued.done.cancel()
            self._queue.clear()

    def _next_group(self) -> list[_Queued]:
        """The units at the head of the queue within the bounds (at least one unit)."""
        group: list[_Queued] = []
        sends = size = 0
        while self._queue:
            unit = self._queue[0].params
            sends += len(unit)
            size += sum(send_bytes(p) for p in unit)
            if group and (sends > self._max_sends or size > self._max_bytes):
                break
            group.append(self._queue.pop(0))
        return group

    async def _write_group(self, group: Sequence[_Queued]) -> None:
        GROUP_SIZES.observe(sum(len(q.params) for q in group))
        if len(group) == 1:
            await self._write_alone(group[0])
            return
        outcomes: list[list[SendResult] | Exception]
        try:
            if self._db.distributed:
                # On Citus: each send's halves, on its users' shards, one commit.
                outcomes = await self._db.run_txn(
                    "send_group", send_halves.send_units_halves_txn, [q.params for q in group]
                )
            elif all(len(q.params) == 1 for q in group):
                outcomes = [
                    o if isinstance(o, Exception) else [o]
                    for o in await self._db.run_txn(
                        "send_group",
                        messages_store.send_group_txn,
                        [q.params[0] for q in group],
                        single_statement=True,
                    )
                ]
            else:
                outcomes = await self._db.run_txn(
                    "send_group", messages_store.send_units_txn, [q.params for q in group]
                )
        except Exception as e:
            # Not a send's refusal (the statement answers those): each unit again,
            # alone, so that only the one that causes it fails.
            log.warning("a group of %d sends failed (%r); writing them one by one", len(group), e)
            for queued in group:
                await self._write_alone(queued)
            return
        for queued, outcome in zip(group, outcomes, strict=True):
            if isinstance(outcome, Exception):
                queued.done.set_exception(outcome)
            else:
                queued.done.set_result(outcome)

    async def _write_alone(self, queued: _Queued) -> None:
        try:
            if self._db.distributed:
                # On Citus: each send's two halves, each on its user's shard.
                results = await self._db.run_txn(
                    queued.name, send_halves.send_private_messages_halves_txn, queued.params
                )
            elif len(queued.params) == 1:
                results = [
                    await self._db.run_txn(
                        queued.name,
                        messages_store.send_private_message_txn,
                        queued.params[0],
                        single_statement=True,
                    )
                ]
            else:
                results = await self._db.run_txn(
                    queued.name,
                    messages_store.send_private_messages_txn,
                    queued.params,
                    single_statement=True,
                )
        except Exception as e:
            queued.done.set_exception(e)
        else:
            queued.done.set_result(results)
