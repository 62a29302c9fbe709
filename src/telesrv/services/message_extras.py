"""Forwards, content reads, outbox read dates and text search over private chats."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from telesrv.services.errors import (
    ChatForwardsRestricted,
    FloodWait,
    LimitInvalid,
    MessageIdInvalid,
    MessageIdsEmpty,
    MessageNotReadYet,
    RandomIdDuplicate,
    RandomIdInvalid,
    SearchQueryEmpty,
    YouBlockedUser,
)
from telesrv.services.messages import (
    ARCHIVE_FOLDER,
    INT32_MAX,
    MAX_ADD_OFFSET,
    MAX_ANSWER_BYTES,
    MAX_HISTORY_LIMIT,
    ChatHook,
    Origin,
    ReadOutcome,
    Sent,
    pts_filled_on_failure,
    run_hook,
    sent_box,
    valid_ids,
)
from telesrv.services.metrics import MESSAGES_SENT, RATE_LIMITED
from telesrv.store import message_search as search_store
from telesrv.store import messages as store
from telesrv.store.counters import Counters
from telesrv.store.db import Db

log = logging.getLogger(__name__)

MAX_FORWARD_IDS = 100  # per forwardMessages call, as Telegram allows
MAX_CONTENT_READ_IDS = 1000
MAX_QUERY_LENGTH = 512  # characters of a search text that are looked at
SEARCH_COUNT_CAP = 10_000  # a search's total is counted up to this

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


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """messages.search / messages.searchGlobal, after TL conversion.

    ``peer`` None: every chat. ``out`` None: both directions (from_id narrows it).
    Offsets and bounds mean what they mean in messages.getHistory.
    """

    owner: int
    peer: int | None
    text: str
    out: bool | None = None
    offset_id: int = 0
    add_offset: int = 0
    limit: int = 20
    max_id: int = 0
    min_id: int = 0
    min_date: int = 0
    max_date: int = 0


@dataclass(frozen=True, slots=True)
class SearchPage:
    messages: list[store.BoxMessage]  # newest first
    count: int  # every match, ignoring the offsets (up to SEARCH_COUNT_CAP)


class MessageExtras:
    def __init__(
        self,
        db: Db,
        counters: Counters,
        *,
        send_rate_limit: int,
        on_commit: Callable[[], None] = lambda: None,
        answer_bytes: int = MAX_ANSWER_BYTES,
        after_delivery: ChatHook | None = None,
    ) -> None:
        self._db = db
        self._counters = counters
        self._after_delivery = after_delivery  # as MessageService's: the chat list reacts
        self._send_rate_limit = send_rate_limit
        self._on_commit = on_commit  # wakes the outbox dispatcher
        self._answer_bytes = answer_bytes

    # -- forwards -----------------------------------------------------------------------

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
            for m in await search_store.get_chat_boxes(
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
        if req.to_peer != req.owner and await store.is_blocked(
            self._db.pool, req.owner, req.to_peer
        ):
            raise YouBlockedUser()
        # A retried copy is answered from what was stored before any pts is taken: a pts
        # allocated for it would only become a noop in both logs, waking the recipient's
        # devices for nothing. (A retry racing its original still in flight is caught by
        # the forward function, at the cost of that noop.)
        earlier = await store.find_sends(self._db.pool, req.owner, [r for _, r in pairs])
        answers = await self._earlier_copies(req.owner, earlier)
        fresh = [(source, r) for source, r in pairs if r not in earlier]
        if not fresh:
            return [(r, answers[r]) for _, r in pairs if r in answers]
        sent = await self._forward_fresh(req, fresh, header_for, origin, now)
        answers.update(sent)
        return [(r, answers[r]) for _, r in pairs if r in answers]

    async def _earlier_copies(
        self, owner: int, earlier: dict[int, store.EarlierSend]
    ) -> dict[int, Sent]:
        """The answers to retried copies: each original as the owner sees it now (a copy
        the owner has deleted since has nothing to show and is left out)."""
        wanted = [e.sender_box for e in earlier.values() if e.sender_box is not None]
        if not wanted:
            return {}
        boxes = {b.box_id: b for b in await store.get_boxes(self._db.pool, owner, wanted)}
        answers: dict[int, Sent] = {}
        for random_id, e in earlier.items():
            box = boxes.get(e.sender_box) if e.sender_box is not None else None
            if box is not None and e.sender_pts is not None:
                answers[random_id] = Sent(box, e.sender_pts, True)
        return answers

    async def _forward_fresh(
        self,
        req: ForwardRequest,
        pairs: list[tuple[store.BoxMessage, int]],
        header_for: FwdHeaderBuilder,
        origin: Origin,
        now: int,
    ) -> dict[int, Sent]:
        # Every copy is a message sent: each one counts against the send rate limit.
        n = len(pairs)
        wait = await self._counters.send_rate_wait(req.owner, self._send_rate_limit, n)
        if wait:
            RATE_LIMITED.inc()
            raise FloodWait(wait)

        to_recipient = req.to_peer != req.owner and not await store.is_blocked(
            self._db.pool, req.to_peer, req.owner
        )
        requests = [(req.owner, n, n)]
        if to_recipient:
            requests.append((req.to_peer, n, n))
        allocations = await self._counters.allocate(requests)
        mine = allocations[0]
        theirs = allocations[1] if to_recipient else None
        copies = []
        for k, (source, random_id) in enumerate(pairs):
            header = None
            if not req.drop_author:
                # An existing header is kept: the copy names the first author.
                header = source.fwd_from or header_for(source.sender_user_id, source.date)
            copies.append(
                search_store.ForwardCopy(
                    random_id=random_id,
                    message=source.message,
                    entities=source.entities,
                    fwd_from=header,
                    sender_pts=mine.first_pts + k,
                    sender_box=mine.first_box + k,
                    recipient_pts=theirs.first_pts + k if theirs else None,
                    recipient_box=theirs.first_box + k if theirs else None,
                )
            )
        batch = search_store.ForwardBatch(
            sender=req.owner,
            recipient=req.to_peer,
            date=now,
            silent=req.silent,
            noforwards=req.noforwards,
            copies=copies,
            exclude_auth_key_id=origin.auth_key_id,
            exclude_session_id=origin.session_id,
        )
        async with pts_filled_on_failure(self._db, allocations, now):
            results = await self._db.run_txn(
                "forward_messages", search_store.forward_txn, batch, single_statement=True
            )
        self._on_commit()
        MESSAGES_SENT.labels("forward").inc(sum(1 for r in results if not r.duplicate))
        if any(
            not r.duplicate and r.recipient_box and r.recipient_folder_id == ARCHIVE_FOLDER
            for r in results
        ):
            await run_hook(self._after_delivery, req.to_peer, req.owner, now)

        originals = {}
        if any(r.duplicate for r in results):
            originals = {
                b.box_id: b
                for b in await store.get_boxes(
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
            )
            sent[copy.random_id] = Sent(box, copy.sender_pts, False)
        return sent

    # -- content read -------------------------------------------------------------------

    async def read_contents(
        self, owner: int, ids: list[int], origin: Origin, now: int
    ) -> ReadOutcome | None:
        """Clear media_unread/reaction_unread on the owner's boxes: one event with
        pts_count 1. None when nothing was unread (no pts is spent)."""
        wanted = valid_ids(ids)[:MAX_CONTENT_READ_IDS]
        if not wanted:
            return None
        if not await search_store.count_unread_contents(self._db.pool, owner, wanted):
            return None
        allocation = (await self._counters.allocate([(owner, 1, 0)]))[0]
        async with pts_filled_on_failure(self._db, [allocation], now):
            cleared = await self._db.run_txn(
                "read_message_contents",
                search_store.read_contents_txn,
                owner,
                wanted,
                allocation.first_pts,
                now,
                origin.auth_key_id,
                origin.session_id,
            )
        self._on_commit()
        if not cleared:
            return None  # a concurrent call cleared them first; our pts became a noop
        return ReadOutcome(pts=allocation.first_pts, pts_count=1)

    # -- outbox read date ---------------------------------------------------------------

    async def outbox_read_date(self, owner: int, peer: int, msg_id: int) -> int:
        if not 0 < msg_id <= INT32_MAX:
            raise MessageIdInvalid()
        read = await search_store.outbox_read_date(self._db.pool, owner, peer, msg_id)
        if not read.is_outgoing:
            raise MessageIdInvalid()
        if read.date is None:
            raise MessageNotReadYet()
        return read.date

    # -- search -------------------------------------------------------------------------

    async def search(self, q: SearchQuery) -> SearchPage:
        """A page of matches, newest first. Without a text, the chat's (or, with
        from_id, the author's) messages; without either, SEARCH_QUERY_EMPTY."""
        text = q.text.strip()[:MAX_QUERY_LENGTH]
        if not text and q.peer is None and q.out is None:
            raise SearchQueryEmpty()
        pool = self._db.pool
        query: search_store.TextQuery | None = None
        if text:
            query = await search_store.text_query(pool, q.owner, text)
            if query is None:
                return SearchPage([], 0)
        f = search_store.SearchFilter(
            owner_user_id=q.owner,
            peer_user_id=q.peer,
            out=q.out,
            min_id=max(0, q.min_id),
            min_date=q.min_date,
            max_date=q.max_date,
        )

        async def fetch(
            *,
            above: int = 0,
            below: int | None = None,
            limit: int,
            budget: int,
            skip: int = 0,
            ascending: bool = False,
        ) -> store.Page:
            if query is not None:
                return await search_store.search(
                    pool,
                    f,
                    query,
                    above=above,
                    below=below,
                    limit=limit,
                    budget=budget,
                    skip=skip,
                    ascending=ascending,
                )
            return await search_store.list_messages(
                pool,
                f,
                above=above,
                below=below,
                limit=limit,
                budget=budget,
                skip=skip,
                ascending=ascending,
            )

        # The window of getHistory: [p + add_offset, p + add_offset + limit) of the matches
        # newest first, p counting the matches at or above offset_id (the id alone is the
        # position, so paging is stable however many messages share a second).
        limit = max(1, min(q.limit, MAX_HISTORY_LIMIT)) if q.limit > 0 else 20
        add_offset = max(-MAX_ADD_OFFSET, min(q.add_offset, MAX_ADD_OFFSET))
        boundary = min(q.offset_id, INT32_MAX) if q.offset_id > 0 else None
        top = q.max_id if 0 < q.max_id <= INT32_MAX else None
        older_below = top if boundary is None else min(boundary, top or boundary)
        budget = self._answer_bytes
        messages: list[store.BoxMessage] = []
        cut = False
        older_limit, skip = limit, add_offset
        if add_offset < 0:
            skip = 0
            newer = store.Page([], 0, 0)
            if boundary is not None:
                # Oldest first from the boundary, so a cut keeps the nearest matches.
                newer = await fetch(
                    above=boundary - 1, below=top, limit=-add_offset, budget=budget, ascending=True
                )
            take = newer.available + add_offset + limit
            if take <= 0:
                return SearchPage([], await self._count(f, query))
            if take < newer.available:
                # The window ends below the farthest newer match: only its top part.
                newer = await fetch(
                    above=(boundary or 1) - 1,
                    below=top,
                    limit=take,
                    skip=newer.available - take,
                    budget=budget,
                    ascending=True,
                )
            messages = list(reversed(newer.boxes))
            budget -= newer.size
            cut = newer.cut
            older_limit = 0 if cut else take - len(messages)
        if older_limit > 0 and budget > 0:
            older = await fetch(below=older_below, limit=older_limit, skip=skip, budget=budget)
            if messages and older.size > budget:
                cut = True  # past the budget only a page's very first message is kept
            else:
                messages += older.boxes
                cut = older.cut

        if len(messages) < limit and q.offset_id <= 0 and add_offset == 0 and not cut:
            count = len(messages)  # the first page holds every match
        else:
            count = await self._count(f, query)
        return SearchPage(messages, max(count, len(messages)))

    async def _count(
        self, f: search_store.SearchFilter, query: search_store.TextQuery | None
    ) -> int:
        if query is not None:
            return await search_store.count_search(self._db.pool, f, query, SEARCH_COUNT_CAP)
        return await search_store.count_messages(self._db.pool, f, SEARCH_COUNT_CAP)
