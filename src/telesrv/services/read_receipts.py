"""Read receipts: readHistory, readMessageContents and outbox read dates."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from telesrv.services.chat_hooks import ChatHook, run_hook
from telesrv.services.errors import MessageIdInvalid, MessageNotReadYet
from telesrv.services.ids import INT32_MAX, valid_ids
from telesrv.services.origin import Origin
from telesrv.store import read_receipts as read_receipts_store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db
from telesrv.store.log_writes import LogWrites, PtsDelivery, PtsRange, fill_unused_pts


@dataclass(frozen=True, slots=True)
class ReadOutcome:
    pts: int  # the reader's pts after the call
    pts_count: int  # 1 when the watermark moved, else 0


class ReadReceipts:
    """readHistory: the reader's inbox and the sender's outbox watermarks move."""

    def __init__(
        self,
        db: Db,
        counters: Counters,
        *,
        on_commit: Callable[[], None] = lambda: None,
        after_read: ChatHook | None = None,
        delivery: PtsDelivery | None = None,
    ) -> None:
        self._db = db
        self._log = LogWrites(db, counters, delivery)
        self._on_commit = on_commit  # wakes the outbox delivery
        # The chat list's reaction (its own transaction): reading a chat clears its
        # unread mark.
        self._after_read = after_read

    async def read_history(
        self, reader: int, peer: int, max_id: int, origin: Origin, now: int
    ) -> ReadOutcome | None:
        """None when nothing was unread up to max_id (the caller answers with the current pts)."""
        # Opening the chat clears a manual unread mark, even with nothing to read.
        await run_hook(self._after_read, reader, peer, now)
        plan = await read_receipts_store.plan_read_history(self._db.pool, reader, peer, max_id)
        if not plan.new_inbox_max:
            return None
        requests = [(reader, 1, 0)]
        if peer != reader:
            requests.append((peer, 1, 0))

        async def txn(
            conn: asyncpg.Connection, allocations: list[Allocation]
        ) -> read_receipts_store.ReadResult:
            return await read_receipts_store.read_history_txn(
                conn,
                reader,
                peer,
                max_id,
                now,
                allocations[0].first_pts,
                allocations[1].first_pts if peer != reader else None,
                origin.auth_key_id,
                origin.session_id,
                distributed=self._db.distributed,
            )

        result, allocations = await self._log.write("read_history", requests, txn, now=now)
        reader_pts = allocations[0].first_pts
        sender_pts = allocations[1].first_pts if peer != reader else None
        unused: list[PtsRange] = []
        if result.reader_pts is None:
            unused.append((reader, reader_pts, reader_pts))
        if sender_pts is not None and result.sender_pts is None:
            unused.append((peer, sender_pts, sender_pts))
        if unused:
            await fill_unused_pts(self._db, unused, now, "nothing to read")
        self._on_commit()
        if result.reader_pts is None:
            return None
        return ReadOutcome(pts=result.reader_pts, pts_count=1)


MAX_CONTENT_READ_IDS = 1000


class ContentReads:
    """Content reads and outbox read dates."""

    def __init__(
        self,
        db: Db,
        counters: Counters,
        *,
        on_commit: Callable[[], None] = lambda: None,
        delivery: PtsDelivery | None = None,
    ) -> None:
        self._db = db
        self._log = LogWrites(db, counters, delivery)
        self._on_commit = on_commit  # wakes the outbox delivery

    async def read_contents(
        self, owner: int, ids: list[int], origin: Origin, now: int
    ) -> ReadOutcome | None:
        """Clear media_unread/reaction_unread on the owner's boxes: one event with
        pts_count 1. None when nothing was unread (no pts is spent)."""
        wanted = valid_ids(ids)[:MAX_CONTENT_READ_IDS]
        if not wanted:
            return None
        if not await read_receipts_store.count_unread_contents(self._db.pool, owner, wanted):
            return None

        async def txn(conn: asyncpg.Connection, allocations: list[Allocation]) -> list[int]:
            return await read_receipts_store.read_contents_txn(
                conn,
                owner,
                wanted,
                allocations[0].first_pts,
                now,
                origin.auth_key_id,
                origin.session_id,
            )

        cleared, (allocation,) = await self._log.write(
            "read_message_contents", [(owner, 1, 0)], txn, now=now
        )
        self._on_commit()
        if not cleared:
            return None  # a concurrent call cleared them first; our pts became a noop
        return ReadOutcome(pts=allocation.first_pts, pts_count=1)

    async def outbox_read_date(self, owner: int, peer: int, msg_id: int) -> int:
        if not 0 < msg_id <= INT32_MAX:
            raise MessageIdInvalid()
        read = await read_receipts_store.outbox_read_date(self._db.pool, owner, peer, msg_id)
        if not read.is_outgoing:
            raise MessageIdInvalid()
        if read.date is None:
            raise MessageNotReadYet()
        return read.date
