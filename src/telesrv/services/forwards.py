"""Forwards: each copy of a message is a send."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from telesrv.services.chat_hooks import AfterSend, ChatHook
from telesrv.services.errors import (
    ChatForwardsRestricted,
    LimitInvalid,
    MessageIdInvalid,
    MessageIdsEmpty,
    RandomIdDuplicate,
    RandomIdInvalid,
    YouBlockedUser,
)
from telesrv.services.ids import valid_ids
from telesrv.services.message_media import media_of
from telesrv.services.messages import Origin, Sent, check_send_rate, sent_box
from telesrv.services.metrics import MESSAGES_SENT
from telesrv.store import contacts as contacts_store
from telesrv.store import forwards as forwards_store
from telesrv.store import messages as messages_store
from telesrv.store.counters import Counters
from telesrv.store.db import Db
from telesrv.store.log_writes import LogWrites, filled_on_failure

MAX_FORWARD_IDS = 100  # per forwardMessages call, as Telegram allows


# (original author, original date) -> a serialized MessageFwdHeader; built by the RPC
# layer, which owns TL.
FwdHeaderBuilder = Callable[[int, int], bytes]


@dataclass(frozen=True, slots=True)
class ForwardRequest:
    owner: int
    from_peer: int
    to_peer: int
    ids: list[int]  # in the owner's ids, in the order the copies are sent
    random_ids: list[int]
    drop_author: bool = False
    silent: bool = False
    noforwards: bool = False


class Forwards:
    """Forwards: each copy is a send, idempotent on its random_id."""

    def __init__(
        self,
        db: Db,
        counters: Counters,
        *,
        send_rate_limit: int,
        on_commit: Callable[[], None] = lambda: None,
        after_delivery: ChatHook | None = None,
        after_send: ChatHook | None = None,
    ) -> None:
        self._db = db
        self._counters = counters
        self._log = LogWrites(db, counters)
        self._after = AfterSend(after_delivery, None, after_send)  # as a send's
        self._send_rate_limit = send_rate_limit
        self._on_commit = on_commit  # wakes the outbox delivery

    async def forward(
        self, req: ForwardRequest, header_for: FwdHeaderBuilder, origin: Origin, now: int
    ) -> list[tuple[int, Sent]]:
        """Copy the owner's messages from one chat to another, in the given order; each
        copy is a send (pts_count 1 per side), idempotent on its random_id. Returns
        (random_id, copy) per copy, in source order."""
        if len(req.ids) != len(req.random_ids):
            raise RandomIdInvalid()
        if not req.ids:
            raise MessageIdsEmpty()
        if len(req.ids) > MAX_FORWARD_IDS:
            raise LimitInvalid()
        if len(set(req.random_ids)) != len(req.random_ids):
            raise RandomIdDuplicate()
        if len(set(req.ids)) != len(req.ids):
            # One message forwarded n times in one call would be n copies for one
            # request; Telegram's clients never repeat an id, so it is refused.
            raise MessageIdInvalid()
        sources = {
            m.box_id: m
            for m in await forwards_store.get_chat_boxes(
                self._db.pool, req.owner, req.from_peer, valid_ids(req.ids)
            )
        }
        pairs = [
            (sources[i], r) for i, r in zip(req.ids, req.random_ids, strict=True) if i in sources
        ]
        if not pairs:
            raise MessageIdInvalid()
        if any(source.noforwards for source, _ in pairs):
            raise ChatForwardsRestricted()
        if req.to_peer != req.owner and await contacts_store.is_blocked(
            self._db.pool, req.owner, req.to_peer
        ):
            raise YouBlockedUser()
        # A retried copy is answered from what was stored before any pts is taken: a pts
        # allocated for it would only become a noop in both logs, waking the recipient's
        # devices for nothing. (A retry racing its original still in flight is caught by
        # the forward function, at the cost of that noop.)
        earlier = await messages_store.find_sends(self._db.pool, req.owner, [r for _, r in pairs])
        answers = await self._earlier_copies(req.owner, earlier)
        fresh = [(source, r) for source, r in pairs if r not in earlier]
        if not fresh:
            return [(r, answers[r]) for _, r in pairs if r in answers]
        sent = await self._forward_fresh(req, fresh, header_for, origin, now)
        answers.update(sent)
        return [(r, answers[r]) for _, r in pairs if r in answers]

    async def _earlier_copies(
        self, owner: int, earlier: dict[int, messages_store.EarlierSend]
    ) -> dict[int, Sent]:
        """The answers to retried copies: each original as the owner sees it now (a copy
        the owner has deleted since has nothing to show and is left out)."""
        wanted = [e.sender_box for e in earlier.values() if e.sender_box is not None]
        if not wanted:
            return {}
        boxes = {b.box_id: b for b in await messages_store.get_boxes(self._db.pool, owner, wanted)}
        answers: dict[int, Sent] = {}
        for random_id, e in earlier.items():
            box = boxes.get(e.sender_box) if e.sender_box is not None else None
            if box is not None and e.sender_pts is not None:
                answers[random_id] = Sent(box, e.sender_pts, True)
        return answers

    async def _forward_fresh(
        self,
        req: ForwardRequest,
        pairs: list[tuple[messages_store.BoxMessage, int]],
        header_for: FwdHeaderBuilder,
        origin: Origin,
        now: int,
    ) -> dict[int, Sent]:
        # Every copy is a message sent: each one counts against the send rate limit.
        n = len(pairs)
        await check_send_rate(self._counters, req.owner, self._send_rate_limit, n)

        # Taken as a send takes them: under both sides' block marks, nothing for a
        # recipient who blocked the forwarder.
        mine, theirs = await self._log.take_chat(req.owner, req.to_peer, n, now)
        taken = [mine] + ([theirs] if theirs else [])
        async with filled_on_failure(self._db, taken, now):
            copies = []
            # Copies of one album form a new album (one new grouped_id per source album).
            albums: dict[int, int] = {}
            for k, (source, random_id) in enumerate(pairs):
                media = media_of(source.media)
                grouped_id = None
                if source.grouped_id is not None:
                    grouped_id = albums.setdefault(source.grouped_id, secrets.randbits(63) or 1)
                header = None
                if not req.drop_author:
                    # An existing header is kept: the copy names the first author.
                    header = source.fwd_from or header_for(source.sender_user_id, source.date)
                copies.append(
                    forwards_store.ForwardCopy(
                        random_id=random_id,
                        message=source.message,
                        entities=source.entities,
                        fwd_from=header,
                        sender_pts=mine.first_pts + k,
                        sender_box=mine.first_box + k,
                        recipient_pts=theirs.first_pts + k if theirs else None,
                        recipient_box=theirs.first_box + k if theirs else None,
                        media=source.media,
                        media_id=media.media_id if media else None,
                        media_kind=media.kind if media else None,
                        media_unread=media is not None and media.content_unread,
                        grouped_id=grouped_id,
                        source_box=source.box_id,
                    )
                )
            batch = forwards_store.ForwardBatch(
                sender=req.owner,
                recipient=req.to_peer,
                date=now,
                silent=req.silent,
                noforwards=req.noforwards,
                copies=copies,
                exclude_auth_key_id=origin.auth_key_id,
                exclude_session_id=origin.session_id,
            )
            results = await self._db.run_txn(
                "forward_messages", forwards_store.forward_txn, batch, single_statement=True
            )
        self._on_commit()
        MESSAGES_SENT.labels("forward").inc(sum(1 for r in results if not r.duplicate))
        await self._after(req.owner, req.to_peer, results, clear_draft=False, now=now)

        originals = {}
        if any(r.duplicate for r in results):
            originals = {
                b.box_id: b
                for b in await messages_store.get_boxes(
                    self._db.pool, req.owner, [r.sender_box for r in results if r.duplicate]
                )
            }
        sent: dict[int, Sent] = {}
        for copy, result in zip(copies, results, strict=True):
            if result.duplicate:
                original = originals.get(result.sender_box)
                if original is not None:  # else deleted since: nothing to show
                    sent[copy.random_id] = Sent(
                        original, result.sender_pts or copy.sender_pts, True
                    )
                continue
            box = sent_box(
                req.owner,
                result.sender_box,
                req.to_peer,
                result.date,
                message=copy.message,
                entities=copy.entities,
                fwd_from=copy.fwd_from,
                silent=req.silent,
                noforwards=req.noforwards,
                media=copy.media,
                grouped_id=copy.grouped_id,
            )
            sent[copy.random_id] = Sent(box, copy.sender_pts, False)
        return sent
