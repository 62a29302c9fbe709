"""The send pipeline: a text, an album and the copies of a forward are its inputs.

Each input is a batch of messages from one sender to one recipient, stored all or
none. What differs between them is settled before the pipeline (how a retry is told
apart, what is checked of the request); from the rate check on, every send goes the
same way:

    check the rate -> take pts and box ids on both sides -> one statement through the
    send function -> wake the outbox, or push it from here -> count it -> the chat
    list's reactions -> the answers, an earlier send's for each duplicate
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from telesrv.services.chat_hooks import AfterSend
from telesrv.services.errors import FloodWait, ReplyMessageIdInvalid
from telesrv.services.held_pushes import HeldPushes, expecting, push_sent
from telesrv.services.message_media import URL_KIND, MessageMedia
from telesrv.services.metrics import MESSAGE_BYTES, RATE_LIMITED, messages_sent
from telesrv.services.origin import Origin
from telesrv.store import messages as messages_store
from telesrv.store import send_halves
from telesrv.store import update_log as update_log_store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db
from telesrv.store.frozen_slots import quick_init
from telesrv.store.log_writes import LogWrites, filled_on_failure
from telesrv.store.rate_limits import RateLimits
from telesrv.store.send_groups import SendGroups

BoxMessage = messages_store.BoxMessage  # a message as one owner sees it


@quick_init
@dataclass(frozen=True, slots=True)
class OutgoingText:
    """One message to send: a text, an album's item, or a forwarded copy."""

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
    media: MessageMedia | None = None  # then ``text`` is its caption, and may be empty
    grouped_id: int | None = None  # the album the message belongs to
    has_link: bool = False  # the text holds a link (the search's link filter finds it)


@quick_init
@dataclass(frozen=True, slots=True)
class Sent:
    message: BoxMessage  # in the sender's view
    pts: int
    duplicate: bool


class SendKind(enum.Enum):
    """What a batch is; its value names the send's transaction."""

    TEXT = "send_message"
    ALBUM = "send_album"
    FORWARD = "forward_messages"


@quick_init
@dataclass(frozen=True, slots=True)
class SendBatch:
    """Messages of one sender to one recipient, stored together, all or none."""

    kind: SendKind
    items: Sequence[OutgoingText]

    @property
    def sender(self) -> int:
        return self.items[0].sender

    @property
    def recipient(self) -> int:
        return self.items[0].recipient

    def label(self, item: OutgoingText) -> str:
        """The kind an item is counted under in the sent-messages metric."""
        if self.kind is SendKind.FORWARD:
            return "forward"
        return "media" if item.media is not None else "text"


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
    media: dict[str, Any] | None = None,
    grouped_id: int | None = None,
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
        media=media,
        grouped_id=grouped_id,
    )


async def check_send_rate(rate_limits: RateLimits, sender: int, per_minute: int, n: int) -> None:
    """FLOOD_WAIT when ``n`` more messages would pass the sender's rate (0: no limit)."""
    wait = await rate_limits.send_rate_wait(sender, per_minute, n)
    if wait:
        RATE_LIMITED.inc()
        raise FloodWait(wait)


def _in_hand(items: Sequence[OutgoingText]) -> bool:
    """Whether a send's pushes are built from what the send has in hand: a lone
    message without a reply (a reply's box in the recipient's ids is looked up inside
    the send function)."""
    return len(items) == 1 and not items[0].reply_to


class SendPipeline:
    def __init__(
        self,
        db: Db,
        counters: Counters,
        rate_limits: RateLimits,
        *,
        send_rate_limit: int,
        after: AfterSend,
        on_commit: Callable[[], None] = lambda: None,
        held_pushes: HeldPushes | None = None,
        groups: SendGroups | None = None,
    ) -> None:
        self._db = db
        # Lone sends written together while one is in flight (None: each alone).
        self._groups = groups
        self._rate_limits = rate_limits
        self._log = LogWrites(db, counters)
        self.send_rate_limit = send_rate_limit
        # The chat list's reactions (their own transactions, after the commit).
        self._after = after
        self._on_commit = on_commit  # wakes the outbox delivery
        # When given and the outbox runs, every send holds its outbox rows and pushes
        # them from here once committed.
        self._held_pushes = held_pushes

    async def check_rate(self, sender: int, n: int) -> None:
        """FLOOD_WAIT when ``n`` more messages would pass the sender's rate."""
        await check_send_rate(self._rate_limits, sender, self.send_rate_limit, n)

    async def send(
        self,
        batch: SendBatch,
        origin: Origin,
        now: int,
        *,
        rate_checked: bool = False,
        guarded: Sequence[Allocation | None] | None = None,
    ) -> list[tuple[int, Sent]]:
        """Store the batch; returns (random_id, sent) per message that has an answer, in
        order. A message the send function finds sent before (a retry racing its
        original) is answered with the original, or left out when the sender has
        deleted it since. ``rate_checked``: the caller counted the batch already.
        ``guarded``: what the chat's guarded allocation gave, taken by the caller with
        the rate check (``Counters.claim_and_allocate``) for a batch without replies."""
        items = batch.items
        n = len(items)
        if guarded is None:
            if not rate_checked:
                await self.check_rate(batch.sender, n)
            await self._check_replies(batch)
        elif not rate_checked or any(m.reply_to is not None for m in items):
            # Pts are taken after the rate check, and after the replies' check.
            async with filled_on_failure(self._db, [a for a in guarded if a], now):
                raise ValueError("pts taken before the rate or the replies were checked")
        mine, theirs = await self._log.take_chat(batch.sender, batch.recipient, n, now, guarded)
        allocations = [mine] + ([theirs] if theirs else [])
        held = self._held_pushes
        if held is not None and not held.pushes_held:
            held = None
        params = [
            _send_params(
                msg,
                origin,
                now,
                mine.first_pts + k,
                mine.first_box + k,
                theirs.first_pts + k if theirs else None,
                theirs.first_box + k if theirs else None,
                outbox_hold=held.lease if held is not None else None,
            )
            for k, msg in enumerate(items)
        ]
        # Pushes of both users' later pts wait for this send's until it is over (it is
        # pushed from here: from what is in hand, or its events read back after the
        # commit), and no state answer includes it before then.
        with expecting(self._held_pushes, allocations) as announced:
            results = await self._write(batch.kind, allocations, params, now)
            fresh = [
                (m, r, p) for m, r, p in zip(items, results, params, strict=True) if not r.duplicate
            ]
            # The sender's copies, built once: pushed from here (a lone send) and answered.
            copies = {msg.random_id: _sent_box_of(msg, result) for msg, result, _ in fresh}
            if held is None:
                self._on_commit()
            elif fresh and _in_hand(items):
                msg, result, _ = fresh[0]
                content_unread = msg.media is not None and msg.media.content_unread
                await push_sent(held, copies[msg.random_id], origin, result,
                                content_unread=content_unread)  # fmt: skip
            elif fresh:  # (a duplicate wrote no event)
                # Read back: a reply's box in the recipient's ids is looked up inside
                # the send function, and an album's are several.
                await announced.push_written()
        for msg, _, _ in fresh:
            messages_sent(batch.label(msg)).inc()
            MESSAGE_BYTES.inc(len(msg.text.encode()))
        await self._after(
            batch.sender, batch.recipient, results, clear_draft=items[0].clear_draft, now=now
        )
        duplicates = [
            (m.random_id, messages_store.EarlierSend(r.sender_box, r.sender_pts or p.sender_pts))
            for m, r, p in zip(items, results, params, strict=True)
            if r.duplicate
        ]
        answers = await self.earlier(batch.sender, duplicates) if duplicates else {}
        for msg, result, p in fresh:
            pts = result.sender_pts or p.sender_pts
            answers[msg.random_id] = Sent(copies[msg.random_id], pts, False)
        return [(m.random_id, answers[m.random_id]) for m in items if m.random_id in answers]

    async def _check_replies(self, batch: SendBatch) -> None:
        """A reply to a message that is not in the chat is refused before any pts is
        taken: a refusal after the allocation would leave a noop in both logs. (The send
        function checks again, for a message deleted in between.)"""
        replies = {m.reply_to for m in batch.items if m.reply_to is not None}
        if not replies:
            return
        present = await messages_store.chat_boxes_present(
            self._db.pool, batch.sender, batch.recipient, list(replies)
        )
        if len(present) < len(replies):
            raise ReplyMessageIdInvalid()

    async def _write(
        self,
        kind: SendKind,
        allocations: list[Allocation],
        params: list[messages_store.SendParams],
        now: int,
    ) -> list[messages_store.SendResult]:
        if self._groups is not None:
            # Alone when nothing is in flight, else with the sends that queued behind
            # it (an album or a forward's copies as one unit, all or none); its pts
            # become noops if it fails.
            async with filled_on_failure(self._db, allocations, now):
                return await self._groups.write_unit(kind.value, params)
        if self._db.distributed:
            # On Citus: each send's halves (the sender's and the recipient's), each run
            # whole on its user's shard, all in one transaction (store/send_halves.py).
            return await self._log.write_taken(
                kind.value,
                allocations,
                send_halves.send_private_messages_halves_txn,
                params,
                now=now,
            )
        if len(params) == 1:
            # The lone send's own statement, which may hold its outbox rows for this
            # process to push.
            result = await self._log.write_taken(
                kind.value,
                allocations,
                messages_store.send_private_message_txn,
                params[0],
                now=now,
                single_statement=True,
            )
            return [result]
        return await self._log.write_taken(
            kind.value,
            allocations,
            messages_store.send_private_messages_txn,
            params,
            now=now,
            single_statement=True,
        )

    async def earlier(
        self, sender: int, earlier: Sequence[tuple[int, messages_store.EarlierSend]]
    ) -> dict[int, Sent]:
        """The answers to retries: each original as the sender sees it now. One the
        sender has deleted since has nothing to show and is left out; one whose event is
        gone from the log is answered with the sender's current pts."""
        wanted = [e.sender_box for _, e in earlier if e.sender_box is not None]
        if not wanted:
            return {}
        boxes = {
            b.box_id: b
            for b in await messages_store.get_boxes(
                self._db.pool, sender, wanted, distributed=self._db.distributed
            )
        }
        top: int | None = None
        answers: dict[int, Sent] = {}
        for random_id, e in earlier:
            box = boxes.get(e.sender_box) if e.sender_box is not None else None
            if box is None:
                continue
            pts = e.sender_pts
            if pts is None:
                if top is None:
                    rows = await update_log_store.top_pts(self._db.pool, sender, 1)
                    top = (rows or [(0, 0)])[0][0]
                pts = top
            answers[random_id] = Sent(box, pts, True)
        return answers


def _send_params(
    msg: OutgoingText,
    origin: Origin,
    now: int,
    sender_pts: int,
    sender_box: int,
    recipient_pts: int | None,
    recipient_box: int | None,
    outbox_hold: float | None = None,
) -> messages_store.SendParams:
    return messages_store.SendParams(
        sender=msg.sender,
        recipient=msg.recipient,
        random_id=msg.random_id,
        date=now,
        message=msg.text,
        entities=msg.entities,
        fwd_from=msg.fwd_from,
        silent=msg.silent,
        noforwards=msg.noforwards,
        # A voice note or round video stays unopened for the recipient until read.
        media_unread=msg.media is not None and msg.media.content_unread,
        reply_to=msg.reply_to,
        quote_text=msg.quote_text,
        quote_entities=msg.quote_entities,
        quote_offset=msg.quote_offset,
        sender_pts=sender_pts,
        sender_box=sender_box,
        recipient_pts=recipient_pts,
        recipient_box=recipient_box,
        exclude_auth_key_id=origin.auth_key_id,
        exclude_session_id=origin.session_id,
        media=msg.media.snapshot if msg.media else None,
        media_id=msg.media.media_id if msg.media else None,
        media_kind=msg.media.kind if msg.media else (URL_KIND if msg.has_link else None),
        grouped_id=msg.grouped_id,
        outbox_hold=outbox_hold,
    )


def _sent_box_of(msg: OutgoingText, result: messages_store.SendResult) -> BoxMessage:
    return sent_box(
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
        media=msg.media.snapshot if msg.media else None,
        grouped_id=msg.grouped_id,
    )
