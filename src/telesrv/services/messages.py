"""Private text messages: MessageService, the send (history and read receipts are
History in history.py and ReadReceipts in read_receipts.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from telesrv.services.chat_hooks import ARCHIVE_FOLDER as ARCHIVE_FOLDER
from telesrv.services.chat_hooks import AfterSend, ChatHook
from telesrv.services.errors import (
    FloodWait,
    MediaCaptionTooLong,
    MessageEmpty,
    MessageTooLong,
    RandomIdDuplicate,
)
from telesrv.services.held_pushes import HeldPushes, expecting, push_sent
from telesrv.services.message_media import MAX_CAPTION_LENGTH, URL_KIND, MessageMedia
from telesrv.services.metrics import MESSAGE_BYTES, MESSAGES_SENT, RATE_LIMITED
from telesrv.services.origin import Origin as Origin
from telesrv.store import contacts as contacts_store
from telesrv.store import messages as messages_store
from telesrv.store import update_log as update_log_store
from telesrv.store.counters import Counters
from telesrv.store.db import Db
from telesrv.store.log_writes import LogWrites

log = logging.getLogger(__name__)

# The store's rows are the domain's records: rpc renders them as they are.
BoxMessage = messages_store.BoxMessage  # a message as one owner sees it


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


MAX_TEXT_LENGTH = 4096  # code points, Telegram's limit
# How long a send's (sender, random_id) claim lives (milliseconds). It is kept after
# success, so within this window a retry is told apart from a fresh send by Redis alone;
# past it, a retry costs the recipient one noop.
SEND_CLAIM_MS = 600_000
# How long a retry waits for an attempt of the same send still in flight (milliseconds)
# before going ahead anyway (the send function settles it).
SEND_CLAIM_WAIT_MS = 30_000
MAX_QUOTE_LENGTH = 1024


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
    media: MessageMedia | None = None  # then ``text`` is its caption, and may be empty
    grouped_id: int | None = None  # the album the message belongs to
    has_link: bool = False  # the text holds a link (the search's link filter finds it)


@dataclass(frozen=True, slots=True)
class Sent:
    message: messages_store.BoxMessage  # in the sender's view
    pts: int
    duplicate: bool


async def check_send_rate(counters: Counters, sender: int, per_minute: int, n: int) -> None:
    """FLOOD_WAIT when ``n`` more messages would pass the sender's rate (0: no limit)."""
    wait = await counters.send_rate_wait(sender, per_minute, n)
    if wait:
        RATE_LIMITED.inc()
        raise FloodWait(wait)


class MessageService:
    def __init__(
        self,
        db: Db,
        counters: Counters,
        *,
        send_rate_limit: int,
        on_commit: Callable[[], None] = lambda: None,
        after_delivery: ChatHook | None = None,
        after_clear_draft_send: ChatHook | None = None,
        after_send: ChatHook | None = None,
        held_pushes: HeldPushes | None = None,
    ) -> None:
        self._db = db
        self._held_pushes = held_pushes
        # The chat list's reactions (its own transactions, after the commit): a message
        # delivered into the archive may bring the chat back to the main list.
        self._after = AfterSend(after_delivery, after_clear_draft_send, after_send)
        self._counters = counters
        self._log = LogWrites(db, counters)
        self._send_rate_limit = send_rate_limit
        self._on_commit = on_commit  # wakes the outbox delivery

    @staticmethod
    def check_text(text: str, *, caption: bool = False) -> None:
        """A text message needs text (MESSAGE_EMPTY) within MAX_TEXT_LENGTH; a media
        caption may be empty, and is at most MAX_CAPTION_LENGTH."""
        if caption:
            if len(text) > MAX_CAPTION_LENGTH:
                raise MediaCaptionTooLong()
            return
        if not text.strip():
            raise MessageEmpty()
        if len(text) > MAX_TEXT_LENGTH:
            raise MessageTooLong()

    async def send_text(self, msg: OutgoingText, origin: Origin, now: int) -> Sent:
        self.check_text(msg.text, caption=msg.media is not None)
        # The (sender, random_id) claim is taken with the rate check, in one Redis round
        # trip. Taking it means no other attempt of this send began within
        # SEND_CLAIM_MS, so a fresh send goes straight to allocation without looking
        # for an earlier one. Only when the claim is held (a retry) is the earlier send
        # looked for: a retry is answered before any pts is taken, since a pts
        # allocated for it would have to become a noop in the recipient's log, and
        # every retry would move the recipient's pts (and wake their devices) for
        # nothing. A retry of a send that committed is found in the table; one racing
        # a send still in flight (a client re-sending after a reconnect) waits for it.
        # A retry arriving after the claim expired (or after Redis lost it) takes a new
        # claim; the send function's own duplicate check still answers it with the
        # original message, at the cost of one noop that keeps the log dense.
        wait, claimed = await self._counters.send_rate_wait_and_claim(
            msg.sender, self._send_rate_limit, msg.random_id, SEND_CLAIM_MS
        )
        if wait:
            RATE_LIMITED.inc()
            raise FloodWait(wait)
        while not claimed:
            earlier = await messages_store.find_send(self._db.pool, msg.sender, msg.random_id)
            if earlier is not None:
                return await self._earlier_send(msg.sender, earlier)
            if not await self._wait_for_claim(msg.sender, msg.random_id):
                break  # held too long: go on, the send function settles it
            claimed = await self._counters.claim_send(msg.sender, msg.random_id, SEND_CLAIM_MS)
        try:
            return await self._send_claimed(msg, origin, now)
        except BaseException:
            # Failed: a waiting retry may go ahead. (After success the claim stays until
            # it expires, marking later attempts as retries.)
            if claimed:
                with contextlib.suppress(Exception):
                    await self._counters.release_send(msg.sender, msg.random_id)
            raise

    async def _wait_for_claim(self, sender: int, random_id: int) -> bool:
        """Wait while another attempt of this send is in flight, until it commits or
        gives up its claim; False when it is still held after SEND_CLAIM_WAIT_MS."""
        delay = 0.005
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SEND_CLAIM_WAIT_MS / 1000
        while loop.time() < deadline:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)
            if await messages_store.find_send(self._db.pool, sender, random_id) is not None:
                return True
            if not await self._counters.send_claimed(sender, random_id):
                return True
        return False

    async def _send_claimed(self, msg: OutgoingText, origin: Origin, now: int) -> Sent:
        sender_alloc, recipient_alloc = await self._log.take_chat(msg.sender, msg.recipient, 1, now)
        allocations = [sender_alloc] + ([recipient_alloc] if recipient_alloc else [])
        held = self._held_pushes
        # A reply's box in the recipient's ids is looked up inside the send function, so
        # only a send without one is pushed from what is in hand here.
        if held is not None and not (held.pushes_held and msg.reply_to is None):
            held = None
        params = _send_params(
            msg,
            origin,
            now,
            sender_alloc.first_pts,
            sender_alloc.first_box,
            recipient_alloc.first_pts if recipient_alloc else None,
            recipient_alloc.first_box if recipient_alloc else None,
            outbox_hold=held.lease if held is not None else None,
        )
        # Pushes of both users' later pts wait for this send's until it is over (also
        # when a worker pushes it), and no state answer includes it before then.
        with expecting(self._held_pushes, allocations):
            result = await self._log.write_taken(
                "send_message",
                allocations,
                messages_store.send_private_message_txn,
                params,
                now=now,
                single_statement=True,
            )
            box = None if result.duplicate else _sent_box_of(msg, result)
            if held is None:
                self._on_commit()
            elif box is not None:  # a duplicate wrote no event
                # Only a send without a reply is held, so the sender's copy is the whole
                # message in both views but for its owner.
                content_unread = msg.media is not None and msg.media.content_unread
                await push_sent(held, box, origin, result, content_unread=content_unread)
        if not result.duplicate:
            MESSAGES_SENT.labels("media" if msg.media else "text").inc()
            MESSAGE_BYTES.inc(len(msg.text.encode()))
        await self._after(msg.sender, msg.recipient, [result], clear_draft=msg.clear_draft, now=now)
        if box is None:
            return await self._earlier_send(
                msg.sender,
                messages_store.EarlierSend(
                    result.sender_box, result.sender_pts or sender_alloc.first_pts
                ),
            )
        return Sent(box, result.sender_pts or sender_alloc.first_pts, False)

    async def send_album(
        self, album: Sequence[OutgoingText], origin: Origin, now: int
    ) -> list[tuple[int, Sent]]:
        """The messages of an album (one chat, each its own random_id), in order, sent
        all or none: a refusal of any item (its rate, its media gone, its reply) leaves
        nothing sent, and the pts taken for them become noops. Returns (random_id, sent)
        per message. A retry of a sent album is answered with its messages before
        anything is counted or allocated; random ids of which only some were sent
        before are RANDOM_ID_DUPLICATE."""
        for msg in album:
            self.check_text(msg.text, caption=msg.media is not None)
        sender, recipient, n = album[0].sender, album[0].recipient, len(album)
        random_ids = [m.random_id for m in album]
        earlier = await messages_store.find_sends(self._db.pool, sender, random_ids)
        if earlier:
            if len(earlier) < n:
                raise RandomIdDuplicate()
            return await self._earlier_album(sender, [(r, earlier[r]) for r in random_ids])
        # Every message of the album counts against the send rate, all before any is sent.
        await check_send_rate(self._counters, sender, self._send_rate_limit, n)
        mine, theirs = await self._log.take_chat(sender, recipient, n, now)
        allocations = [mine] + ([theirs] if theirs else [])
        params = [
            _send_params(
                msg,
                origin,
                now,
                mine.first_pts + k,
                mine.first_box + k,
                theirs.first_pts + k if theirs else None,
                theirs.first_box + k if theirs else None,
            )
            for k, msg in enumerate(album)
        ]
        results = await self._log.write_taken(
            "send_album",
            allocations,
            messages_store.send_private_messages_txn,
            params,
            now=now,
            single_statement=True,
        )
        self._on_commit()
        fresh = [(m, r) for m, r in zip(album, results, strict=True) if not r.duplicate]
        if fresh:
            MESSAGES_SENT.labels("media").inc(len(fresh))
            MESSAGE_BYTES.inc(sum(len(m.text.encode()) for m, _ in fresh))
        await self._after(sender, recipient, results, clear_draft=album[0].clear_draft, now=now)
        # A retry racing its original still in flight finds it sent in the transaction.
        duplicates = [
            (m.random_id, messages_store.EarlierSend(r.sender_box, r.sender_pts or p.sender_pts))
            for m, r, p in zip(album, results, params, strict=True)
            if r.duplicate
        ]
        answers = dict(await self._earlier_album(sender, duplicates)) if duplicates else {}
        for m, r in fresh:
            answers[m.random_id] = Sent(_sent_box_of(m, r), r.sender_pts or 0, False)
        return [(r, answers[r]) for r in random_ids if r in answers]

    async def _earlier_album(
        self, sender: int, earlier: list[tuple[int, messages_store.EarlierSend]]
    ) -> list[tuple[int, Sent]]:
        """The answer to a retried album: its messages as the sender sees them now (those
        deleted since are left out; RANDOM_ID_DUPLICATE when none is left)."""
        wanted = [e.sender_box for _, e in earlier if e.sender_box is not None]
        boxes = {b.box_id: b for b in await messages_store.get_boxes(self._db.pool, sender, wanted)}
        if not boxes:
            raise RandomIdDuplicate()
        top: int | None = None
        answers = []
        for random_id, e in earlier:
            box = boxes.get(e.sender_box) if e.sender_box is not None else None
            if box is None:
                continue
            pts = e.sender_pts
            if pts is None:  # its event is gone from the log: answer with the current pts
                if top is None:
                    rows = await update_log_store.top_pts(self._db.pool, sender, 1)
                    top = (rows or [(0, 0)])[0][0]
                pts = top
            answers.append((random_id, Sent(box, pts, True)))
        return answers

    async def earlier_send(self, sender: int, random_id: int) -> Sent | None:
        """The answer to a retry of a committed send, or None for a new random id: a
        send whose media is an upload looks first, since its upload was used up by the
        send it retries."""
        earlier = await messages_store.find_send(self._db.pool, sender, random_id)
        return None if earlier is None else await self._earlier_send(sender, earlier)

    async def _earlier_send(self, sender: int, earlier: messages_store.EarlierSend) -> Sent:
        """The answer to a retry: the original message, or RANDOM_ID_DUPLICATE when the
        sender has deleted it since (the id is spent; the message cannot come back)."""
        boxes = (
            await messages_store.get_boxes(self._db.pool, sender, [earlier.sender_box])
            if earlier.sender_box is not None
            else []
        )
        if not boxes:
            raise RandomIdDuplicate()
        pts = earlier.sender_pts
        if pts is None:  # its event is gone from the log: answer with the current pts
            pts = (await update_log_store.top_pts(self._db.pool, sender, 1) or [(0, 0)])[0][0]
        return Sent(boxes[0], pts, True)

    async def may_notify(self, sender: int, recipient: int) -> bool:
        """Whether ephemeral signals (typing) from sender may reach recipient: not across
        a block, whoever made it."""
        if sender == recipient:
            return False
        pool = self._db.pool
        return not (
            await contacts_store.is_blocked(pool, recipient, sender)
            or await contacts_store.is_blocked(pool, sender, recipient)
        )


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
