"""Private text messages: send, read receipts, history and dialogs (seed: Send/Read Flow)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass

from telesrv.store import messages as store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db
from telesrv.tl.errors import (
    FloodWait,
    MessageEmpty,
    MessageTooLong,
    ReplyMessageIdInvalid,
    YouBlockedUser,
)

log = logging.getLogger(__name__)

MAX_TEXT_LENGTH = 4096  # code points (seed: Current Limits)
MAX_QUOTE_LENGTH = 1024
MAX_HISTORY_LIMIT = 100
MAX_ADD_OFFSET = 100


@dataclass(frozen=True, slots=True)
class OutgoingText:
    sender: int
    recipient: int
    random_id: int
    text: str
    entities: bytes | None = None  # serialized Vector<MessageEntity>
    silent: bool = False
    noforwards: bool = False
    reply_to: int | None = None  # in the sender's ids
    quote_text: str | None = None
    quote_entities: bytes | None = None
    quote_offset: int | None = None
    fwd_from: bytes | None = None


@dataclass(frozen=True, slots=True)
class Origin:
    """The device that caused a change; it gets the answer, not a push."""

    auth_key_id: int
    session_id: int


@dataclass(frozen=True, slots=True)
class Sent:
    message: store.BoxMessage  # in the sender's view
    pts: int
    duplicate: bool


@dataclass(frozen=True, slots=True)
class ReadOutcome:
    pts: int  # the reader's pts after the call
    pts_count: int  # 1 when the watermark moved, else 0


PtsRange = tuple[int, int, int]  # user id, first pts, last pts


def pts_range(allocation: Allocation) -> PtsRange:
    return (allocation.user_id, allocation.first_pts, allocation.last_pts)


async def fill_unused_pts(db: Db, ranges: Iterable[PtsRange], now: int, reason: str) -> None:
    """Keep pts dense after a failed or partly unused write (DESIGN invariant 1): every
    listed pts becomes a noop. Best effort: should this fail too, the hole is filled
    once stale by UpdatesService."""
    for user_id, first, last in ranges:
        if not last:
            continue
        try:
            await store.fill_pts(db.pool, user_id, range(first, last + 1), now)
        except Exception:
            log.exception(
                "could not fill pts %d..%d of user %d after %s", first, last, user_id, reason
            )


@contextlib.asynccontextmanager
async def pts_filled_on_failure(
    db: Db, allocations: Sequence[Allocation], now: int
) -> AsyncIterator[None]:
    """Around a write that uses pts allocated before it: should the write fail, every one
    of them becomes a noop, so the log stays dense (DESIGN invariant 1)."""
    try:
        yield
    except BaseException as e:
        await fill_unused_pts(db, [pts_range(a) for a in allocations], now, type(e).__name__)
        raise


class MessageService:
    def __init__(
        self,
        db: Db,
        counters: Counters,
        *,
        send_rate_limit: int,
        on_commit: Callable[[], None] = lambda: None,
    ) -> None:
        self._db = db
        self._counters = counters
        self._send_rate_limit = send_rate_limit
        self._on_commit = on_commit  # wakes the outbox dispatcher

    @staticmethod
    def check_text(text: str) -> None:
        if not text.strip():
            raise MessageEmpty()
        if len(text) > MAX_TEXT_LENGTH:
            raise MessageTooLong()

    async def send_text(self, msg: OutgoingText, origin: Origin, now: int) -> Sent:
        self.check_text(msg.text)
        wait = await self._counters.send_rate_wait(msg.sender, self._send_rate_limit)
        if wait:
            raise FloodWait(wait)
        # A recipient who blocked the sender gets nothing, not even a pts (seed: Send
        # Flow); a sender who blocked the recipient may not write to them at all
        # (YOU_BLOCKED_USER). Most people block nobody: Redis keeps a short-lived
        # "blocks nobody" mark per user, and each side's allocation is made only under
        # its mark, both in one round trip. Without a mark, contact_blocks is read
        # first. The send function checks the recipient's block again inside its
        # transaction either way.
        to_other = msg.recipient != msg.sender
        requests = [(msg.sender, 1, 1, to_other)]
        if to_other:
            requests.append((msg.recipient, 1, 1, True))
        guarded = await self._counters.allocate_guarded(requests)
        sender_alloc = guarded[0]
        recipient_alloc = guarded[1] if to_other else None
        if sender_alloc is None:
            taken = [recipient_alloc] if recipient_alloc else []
            async with pts_filled_on_failure(self._db, taken, now):
                sender_alloc = await self._sender_allocation(msg.sender, msg.recipient)
        if to_other and recipient_alloc is None:
            async with pts_filled_on_failure(self._db, [sender_alloc], now):
                recipient_alloc = await self._recipient_allocation(msg.recipient, msg.sender)
        allocations = [sender_alloc] + ([recipient_alloc] if recipient_alloc else [])
        params = store.SendParams(
            sender=msg.sender,
            recipient=msg.recipient,
            random_id=msg.random_id,
            date=now,
            message=msg.text,
            entities=msg.entities,
            fwd_from=msg.fwd_from,
            silent=msg.silent,
            noforwards=msg.noforwards,
            media_unread=False,  # text only: nothing to open
            reply_to=msg.reply_to,
            quote_text=msg.quote_text,
            quote_entities=msg.quote_entities,
            quote_offset=msg.quote_offset,
            sender_pts=sender_alloc.first_pts,
            sender_box=sender_alloc.first_box,
            recipient_pts=recipient_alloc.first_pts if recipient_alloc else None,
            recipient_box=recipient_alloc.first_box if recipient_alloc else None,
            exclude_auth_key_id=origin.auth_key_id,
            exclude_session_id=origin.session_id,
        )
        try:
            async with pts_filled_on_failure(self._db, allocations, now):
                result = await self._db.run_txn(
                    "send_message", store.send_private_message_txn, params, single_statement=True
                )
        except store.ReplyMessageIdInvalid:
            raise ReplyMessageIdInvalid() from None
        self._on_commit()
        if result.duplicate:
            boxes = await store.get_boxes(self._db.pool, msg.sender, [result.sender_box])
            if not boxes:
                raise ReplyMessageIdInvalid()  # the original was deleted meanwhile
            return Sent(boxes[0], result.sender_pts or sender_alloc.first_pts, True)
        box = store.BoxMessage(
            owner_user_id=msg.sender,
            box_id=result.sender_box,
            peer_user_id=msg.recipient,
            sender_user_id=msg.sender,
            out=True,
            date=result.date,
            message=msg.text,
            entities=msg.entities,
            fwd_from=msg.fwd_from,
            reply_to_msg_id=msg.reply_to,
            quote_text=msg.quote_text,
            quote_entities=msg.quote_entities,
            quote_offset=msg.quote_offset,
            silent=msg.silent,
            noforwards=msg.noforwards,
            media_unread=False,
            edit_date=None,
        )
        return Sent(box, result.sender_pts or sender_alloc.first_pts, False)

    async def _sender_allocation(self, sender: int, recipient: int) -> Allocation:
        """The sender's pts and box id, unless they blocked the recipient."""
        if not await store.has_blocks(self._db.pool, sender):
            await self._counters.mark_no_blocks(sender)
        elif await store.is_blocked(self._db.pool, sender, recipient):
            raise YouBlockedUser()
        return await self._counters.allocate_one(sender, 1, 1)

    async def _recipient_allocation(self, recipient: int, sender: int) -> Allocation | None:
        """The recipient's pts and box id, unless they blocked the sender (then None)."""
        if not await store.has_blocks(self._db.pool, recipient):
            await self._counters.mark_no_blocks(recipient)
        elif await store.is_blocked(self._db.pool, recipient, sender):
            return None
        return await self._counters.allocate_one(recipient, 1, 1)

    async def read_history(
        self, reader: int, peer: int, max_id: int, origin: Origin, now: int
    ) -> ReadOutcome | None:
        """None when nothing was unread up to max_id (the caller answers with the current pts)."""
        plan = await store.plan_read_history(self._db.pool, reader, peer, max_id)
        if not plan.new_inbox_max:
            return None
        requests = [(reader, 1, 0)]
        if peer != reader:
            requests.append((peer, 1, 0))
        allocations = await self._counters.allocate(requests)
        reader_pts = allocations[0].first_pts
        sender_pts = allocations[1].first_pts if peer != reader else None
        async with pts_filled_on_failure(self._db, allocations, now):
            result = await self._db.run_txn(
                "read_history",
                store.read_history_txn,
                reader,
                peer,
                max_id,
                now,
                reader_pts,
                sender_pts,
                origin.auth_key_id,
                origin.session_id,
            )
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

    async def history(
        self,
        owner: int,
        peer: int,
        *,
        offset_id: int,
        offset_date: int,
        add_offset: int,
        limit: int,
        max_id: int,
        min_id: int,
    ) -> tuple[list[store.BoxMessage], int]:
        """A page of history, newest first, and the chat's message count.

        offset_id/offset_date/max_id/min_id go into SQL; add_offset is clamped to
        [-100, 100] so no client can turn it into a large skip (seed: Query Path).
        """
        limit = max(1, min(limit, MAX_HISTORY_LIMIT)) if limit > 0 else 20
        add_offset = max(-MAX_ADD_OFFSET, min(add_offset, MAX_ADD_OFFSET))
        below_id = offset_id if offset_id > 0 else None
        if max_id > 0:
            below_id = min(below_id, max_id) if below_id is not None else max_id
        below_date = offset_date if offset_date > 0 else None
        messages: list[store.BoxMessage] = []
        if add_offset < 0:
            # Messages newer than offset_id: take |add_offset| of them, oldest first.
            start = (offset_id if offset_id > 0 else 0) if below_id is None else below_id
            newer = await store.get_history_above(
                self._db.pool,
                owner,
                peer,
                from_id=start,
                max_id=max_id if max_id > 0 else 2**31 - 1,
                limit=-add_offset,
            )
            messages = list(reversed(newer))
            remaining = limit - len(messages)
            if remaining > 0 and below_id is not None:
                messages += await store.get_history(
                    self._db.pool,
                    owner,
                    peer,
                    below_id=below_id,
                    below_date=below_date,
                    min_id=min_id,
                    limit=remaining,
                )
        else:
            page = await store.get_history(
                self._db.pool,
                owner,
                peer,
                below_id=below_id,
                below_date=below_date,
                min_id=min_id,
                limit=limit + add_offset,
            )
            messages = page[add_offset:]
        messages = [m for m in messages if m.box_id > min_id][:limit]
        count = await store.count_history(self._db.pool, owner, peer)
        return messages, count

    async def may_notify(self, sender: int, recipient: int) -> bool:
        """Whether ephemeral signals (typing) from sender may reach recipient: not across
        a block, whoever made it."""
        if sender == recipient:
            return False
        pool = self._db.pool
        return not (
            await store.is_blocked(pool, recipient, sender)
            or await store.is_blocked(pool, sender, recipient)
        )

    async def messages_by_id(self, owner: int, ids: list[int]) -> list[store.BoxMessage]:
        ids = [i for i in ids if 0 < i < 2**31][:200]
        return await store.get_boxes(self._db.pool, owner, ids)

    async def dialogs_summary(self, owner: int, folder_id: int) -> tuple[int, int]:
        return await store.dialogs_summary(self._db.pool, owner, folder_id)

    async def dialogs(
        self,
        owner: int,
        *,
        folder_id: int,
        offset_date: int | None,
        offset_id: int | None,
        offset_peer: int | None,
        limit: int,
    ) -> tuple[list[store.DialogRow], list[store.BoxMessage]]:
        """A page of dialogs (newest first) and their top messages."""
        rows = await store.get_dialogs(
            self._db.pool,
            owner,
            folder_id=folder_id,
            offset_date=offset_date,
            offset_id=offset_id,
            offset_peer=offset_peer,
            limit=limit,
        )
        return rows, await self._top_messages(owner, rows)

    async def peer_dialogs(
        self, owner: int, peers: list[int]
    ) -> tuple[list[store.DialogRow], list[store.BoxMessage]]:
        rows = await store.get_peer_dialogs(self._db.pool, owner, peers)
        return rows, await self._top_messages(owner, rows)

    async def _top_messages(
        self, owner: int, rows: list[store.DialogRow]
    ) -> list[store.BoxMessage]:
        ids = [d.top_message for d in rows if d.top_message > 0]
        return await store.get_boxes(self._db.pool, owner, ids) if ids else []
