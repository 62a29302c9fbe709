"""Private text messages: send, read receipts, history and dialogs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from telesrv.services.errors import (
    FloodWait,
    MessageEmpty,
    MessageTooLong,
    RandomIdDuplicate,
    ReplyMessageIdInvalid,
    YouBlockedUser,
)
from telesrv.services.metrics import (
    MESSAGE_BYTES,
    MESSAGES_SENT,
    PTS_FILL_FAILURES,
    RATE_LIMITED,
)
from telesrv.services.origin import Origin as Origin
from telesrv.store import messages as store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db

log = logging.getLogger(__name__)

# The store's rows are the domain's records: rpc renders them as they are.
BoxMessage = store.BoxMessage  # a message as one owner sees it
DialogRow = store.DialogRow

INT32_MAX = 2**31 - 1  # message (box) ids are int32 on the wire


def valid_ids(ids: Iterable[int]) -> list[int]:
    """ids that can be box ids (1..int32), each once, in the given order."""
    return list(dict.fromkeys(i for i in ids if 0 < i <= INT32_MAX))


def sent_box(
    owner: int,
    box_id: int,
    peer: int,
    date: int,
    *,
    message: str,
    entities: bytes | None,
    fwd_from: bytes | None,
    silent: bool,
    noforwards: bool,
    reply_to_msg_id: int | None = None,
    quote_text: str | None = None,
    quote_entities: bytes | None = None,
    quote_offset: int | None = None,
) -> BoxMessage:
    """The sender's copy of a message it has just sent, as the store would read it back
    (so the answer needs no second query)."""
    return BoxMessage(
        owner_user_id=owner,
        box_id=box_id,
        peer_user_id=peer,
        sender_user_id=owner,
        out=True,
        date=date,
        message=message,
        entities=entities,
        fwd_from=fwd_from,
        reply_to_msg_id=reply_to_msg_id,
        quote_text=quote_text,
        quote_entities=quote_entities,
        quote_offset=quote_offset,
        silent=silent,
        noforwards=noforwards,
        media_unread=False,
        edit_date=None,
    )


MAX_TEXT_LENGTH = 4096  # code points, Telegram's limit
# How long a send attempt holds its (sender, random_id) claim: a retry racing it waits
# at most this long (milliseconds).
SEND_CLAIM_MS = 30_000
MAX_QUOTE_LENGTH = 1024
# The archive's folder id: a message into an archived chat may bring it back.
ARCHIVE_FOLDER = 1
MAX_HISTORY_LIMIT = 100
MAX_ADD_OFFSET = 100
# Estimated bytes of messages in one answer of getHistory, search or getDialogs: a page
# that would be larger is cut short (a messagesSlice whose count lets the client page
# on), so oversized messages can neither make an answer the server cannot send nor
# hold much memory. A page always keeps its first message.
MAX_ANSWER_BYTES = 1 << 20
# messages.getMessages answers one item per id asked (positions matter to clients), so
# it cannot page; its bound is wide enough for 200 messages of 4096 four-byte
# characters, and what lies past it is answered as messageEmpty.
MAX_MESSAGES_BY_ID_BYTES = 4 << 20
MAX_MESSAGES_BY_ID = 200


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
    clear_draft: bool = False  # the sender's draft in this chat goes with the send


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
# (owner, peer, now) -> None: what the chat list does after a read or a delivery
ChatHook = Callable[[int, int, int], Awaitable[None]]


def pts_range(allocation: Allocation) -> PtsRange:
    return (allocation.user_id, allocation.first_pts, allocation.last_pts)


async def fill_unused_pts(db: Db, ranges: Iterable[PtsRange], now: int, reason: str) -> None:
    """Keep pts dense after a failed or partly unused write (a client waits for every pts
    in order, so none may stay empty): every listed pts becomes a noop. Best effort:
    should this fail too, the hole is filled once stale by UpdatesService."""
    for user_id, first, last in ranges:
        if not last:
            continue
        try:
            await store.fill_pts(db.pool, user_id, range(first, last + 1), now)
        except Exception:
            PTS_FILL_FAILURES.inc(last - first + 1)
            log.exception(
                "could not fill pts %d..%d of user %d after %s", first, last, user_id, reason
            )


@contextlib.asynccontextmanager
async def pts_filled_on_failure(
    db: Db, allocations: Sequence[Allocation], now: int
) -> AsyncIterator[None]:
    """Around a write that uses pts allocated before it: should the write fail, every one
    of them becomes a noop, so the log stays dense."""
    try:
        yield
    except BaseException as e:
        await fill_unused_pts(db, [pts_range(a) for a in allocations], now, type(e).__name__)
        raise


async def run_hook(hook: ChatHook | None, owner: int, peer: int, now: int) -> None:
    """A chat-list hook runs after the message's own commit: should it fail, the message
    stays sent (the client must not retry it) and the failure is logged."""
    if hook is None:
        return
    try:
        await hook(owner, peer, now)
    except Exception:
        log.exception("chat list hook %s failed for %d/%d", hook, owner, peer)


class MessageService:
    def __init__(
        self,
        db: Db,
        counters: Counters,
        *,
        send_rate_limit: int,
        on_commit: Callable[[], None] = lambda: None,
        answer_bytes: int = MAX_ANSWER_BYTES,
        by_id_bytes: int = MAX_MESSAGES_BY_ID_BYTES,
        after_read: ChatHook | None = None,
        after_delivery: ChatHook | None = None,
        after_clear_draft_send: ChatHook | None = None,
    ) -> None:
        self._db = db
        # The chat list's reactions (its own transactions, after the commit): reading a
        # chat clears its unread mark; a message delivered into the archive may bring
        # the chat back to the main list.
        self._after_read = after_read
        self._after_delivery = after_delivery
        self._after_clear_draft_send = after_clear_draft_send
        self._counters = counters
        self._send_rate_limit = send_rate_limit
        self._on_commit = on_commit  # wakes the outbox dispatcher
        self._answer_bytes = answer_bytes
        self._by_id_bytes = by_id_bytes

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
            RATE_LIMITED.inc()
            raise FloodWait(wait)
        # A retry is answered before any pts is taken: a pts allocated for it would
        # have to become a noop in the recipient's log, so every retry would move the
        # recipient's pts (and wake their devices) for nothing. A retry of a send that
        # committed is found in the table; one racing a send still in flight (a client
        # re-sending after a reconnect) waits for it through a short Redis claim. Should
        # Redis lose the claim, the send function still detects the duplicate (then at
        # the cost of a noop).
        while True:
            earlier = await store.find_send(self._db.pool, msg.sender, msg.random_id)
            if earlier is not None:
                return await self._earlier_send(msg.sender, earlier)
            if await self._counters.claim_send(msg.sender, msg.random_id, SEND_CLAIM_MS):
                break
            if not await self._wait_for_claim(msg.sender, msg.random_id):
                break  # held too long: go on, the send function settles it
        try:
            return await self._send_claimed(msg, origin, now)
        except BaseException:
            # Failed: a waiting retry may go ahead. (After success the claim just
            # expires; a waiting retry finds the committed send.)
            with contextlib.suppress(Exception):
                await self._counters.release_send(msg.sender, msg.random_id)
            raise

    async def _wait_for_claim(self, sender: int, random_id: int) -> bool:
        """Wait while another attempt of this send is in flight, until it commits or
        gives up its claim; False when the claim outlived SEND_CLAIM_MS."""
        delay = 0.005
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SEND_CLAIM_MS / 1000
        while loop.time() < deadline:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)
            if await store.find_send(self._db.pool, sender, random_id) is not None:
                return True
            if not await self._counters.send_claimed(sender, random_id):
                return True
        return False

    async def _send_claimed(self, msg: OutgoingText, origin: Origin, now: int) -> Sent:
        # A recipient who blocked the sender gets nothing, not even a pts; a sender
        # who blocked the recipient may not write to them at all (YOU_BLOCKED_USER).
        # Most people block nobody: Redis keeps a short-lived "blocks nobody" mark per
        # user, and each side's allocation is made only under its mark, both in one
        # round trip. Without a mark, contact_blocks is read first. The send function
        # checks the recipient's block again inside its transaction either way.
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
        if not result.duplicate:
            MESSAGES_SENT.labels("text").inc()
            MESSAGE_BYTES.inc(len(msg.text.encode()))
            if result.recipient_box and result.recipient_folder_id == ARCHIVE_FOLDER:
                await run_hook(self._after_delivery, msg.recipient, msg.sender, now)
            if msg.clear_draft:
                await run_hook(self._after_clear_draft_send, msg.sender, msg.recipient, now)
        if result.duplicate:
            return await self._earlier_send(
                msg.sender,
                store.EarlierSend(result.sender_box, result.sender_pts or sender_alloc.first_pts),
            )
        box = sent_box(
            msg.sender,
            result.sender_box,
            msg.recipient,
            result.date,
            message=msg.text,
            entities=msg.entities,
            fwd_from=msg.fwd_from,
            silent=msg.silent,
            noforwards=msg.noforwards,
            reply_to_msg_id=msg.reply_to,
            quote_text=msg.quote_text,
            quote_entities=msg.quote_entities,
            quote_offset=msg.quote_offset,
        )
        return Sent(box, result.sender_pts or sender_alloc.first_pts, False)

    async def _earlier_send(self, sender: int, earlier: store.EarlierSend) -> Sent:
        """The answer to a retry: the original message, or RANDOM_ID_DUPLICATE when the
        sender has deleted it since (the id is spent; the message cannot come back)."""
        boxes = (
            await store.get_boxes(self._db.pool, sender, [earlier.sender_box])
            if earlier.sender_box is not None
            else []
        )
        if not boxes:
            raise RandomIdDuplicate()
        pts = earlier.sender_pts
        if pts is None:  # its event is gone from the log: answer with the current pts
            pts = (await store.top_pts(self._db.pool, sender, 1) or [(0, 0)])[0][0]
        return Sent(boxes[0], pts, True)

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
        # Opening the chat clears a manual unread mark, even with nothing to read.
        await run_hook(self._after_read, reader, peer, now)
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

        As in Telegram, the page is the window [p + add_offset, p + add_offset + limit) of
        the chat's messages newest first (those with min_id < id < max_id), where p counts
        the messages at or above offset_id, or else those sent at or after offset_date,
        or else is 0; the part of the window above the newest message is empty. A
        non-zero offset_id alone is the position: messages sharing a second with it are
        not lost. add_offset is clamped to [-100, 100] so that no client can turn it into
        a large skip. The page is cut to MAX_ANSWER_BYTES.
        """
        limit = max(1, min(limit, MAX_HISTORY_LIMIT)) if limit > 0 else 20
        add_offset = max(-MAX_ADD_OFFSET, min(add_offset, MAX_ADD_OFFSET))
        pool = self._db.pool
        above = max(0, min_id)
        top = max_id if 0 < max_id <= INT32_MAX else None
        boundary: int | None = None  # messages with box_id >= boundary are "newer"
        if 0 < offset_id <= INT32_MAX:
            boundary = offset_id
        elif offset_id > INT32_MAX:
            boundary = INT32_MAX
        elif offset_date > 0:
            before = await store.newest_id_before(pool, owner, peer, offset_date)
            boundary = (before or 0) + 1
        older_below = top if boundary is None else min(boundary, top or boundary)
        budget = self._answer_bytes
        messages: list[store.BoxMessage] = []
        older_limit, skip = limit, add_offset
        if add_offset < 0:
            skip = 0
            newer_ids: list[int] = []
            if boundary is not None:
                newer_ids = await store.history_ids(
                    pool,
                    owner,
                    peer,
                    above=max(above, boundary - 1),
                    below=top,
                    limit=-add_offset,
                    ascending=True,
                )
            # The window starts -add_offset above the boundary, or at the newest message.
            take = len(newer_ids) + add_offset + limit
            if take <= 0:
                return [], await store.count_history(pool, owner, peer)
            window = newer_ids[max(0, len(newer_ids) - take) :]
            older_limit = take - len(window)
            if window:
                # Oldest first, so a cut keeps the messages next to the boundary.
                newer = await store.history_page(
                    pool,
                    owner,
                    peer,
                    above=window[0] - 1,
                    below=window[-1] + 1,
                    limit=len(window),
                    budget=budget,
                    ascending=True,
                )
                messages = list(reversed(newer.boxes))
                budget -= newer.size
                if newer.cut:
                    older_limit = 0
        if older_limit > 0 and budget > 0:
            older = await store.history_page(
                pool,
                owner,
                peer,
                above=above,
                below=older_below,
                limit=older_limit,
                skip=skip,
                budget=budget,
            )
            # Past the budget, only a page's very first message is kept.
            if not (messages and older.size > budget):
                messages += older.boxes
        count = await store.count_history(pool, owner, peer)
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
        """The owner's messages among ``ids`` (at most MAX_MESSAGES_BY_ID), in the order
        asked, up to MAX_MESSAGES_BY_ID_BYTES: the caller answers the rest as missing."""
        wanted = list(dict.fromkeys(i for i in ids if 0 < i <= INT32_MAX))[:MAX_MESSAGES_BY_ID]
        if not wanted:
            return []
        page = await store.get_boxes_within(self._db.pool, owner, wanted, self._by_id_bytes)
        return page.boxes

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
        """The dialogs' top messages, in the dialogs' order, up to MAX_ANSWER_BYTES: past
        it a dialog is listed without its message (clients page on by the dialogs)."""
        ids = [d.top_message for d in rows if d.top_message > 0]
        if not ids:
            return []
        return (await store.get_boxes_within(self._db.pool, owner, ids, self._answer_bytes)).boxes
