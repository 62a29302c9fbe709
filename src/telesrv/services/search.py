"""Text search over private chats."""

from __future__ import annotations

from dataclasses import dataclass

from telesrv.services.errors import SearchQueryEmpty
from telesrv.services.history import MAX_ADD_OFFSET, MAX_ANSWER_BYTES, MAX_HISTORY_LIMIT
from telesrv.services.ids import INT32_MAX
from telesrv.store import messages as messages_store
from telesrv.store import search as search_store
from telesrv.store.db import Db

MAX_QUERY_LENGTH = 512  # characters of a search text that are looked at


SEARCH_COUNT_CAP = 10_000  # a search's total is counted up to this


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
    # Only media of these kinds (the shared-media filters); None: every message.
    media_kinds: tuple[str, ...] | None = None
    pinned: bool = False  # only the pinned messages (inputMessagesFilterPinned)


@dataclass(frozen=True, slots=True)
class SearchPage:
    messages: list[messages_store.BoxMessage]  # newest first
    count: int  # every match, ignoring the offsets (up to SEARCH_COUNT_CAP)


class Search:
    """Text search and filtered listing of the owner's messages."""

    def __init__(self, db: Db, *, answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        self._db = db
        self._answer_bytes = answer_bytes

    async def search(self, q: SearchQuery) -> SearchPage:
        """A page of matches, newest first. Without a text, the chat's (or, with
        from_id, the author's) messages; without either, SEARCH_QUERY_EMPTY."""
        text = q.text.strip()[:MAX_QUERY_LENGTH]
        if not text and q.peer is None and q.out is None and q.media_kinds is None and not q.pinned:
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
            media_kinds=q.media_kinds,
            pinned=q.pinned,
        )

        async def fetch(
            *,
            above: int = 0,
            below: int | None = None,
            limit: int,
            budget: int,
            skip: int = 0,
            ascending: bool = False,
        ) -> messages_store.Page:
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
                    distributed=self._db.distributed,
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
                distributed=self._db.distributed,
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
        messages: list[messages_store.BoxMessage] = []
        cut = False
        older_limit, skip = limit, add_offset
        if add_offset < 0:
            skip = 0
            newer = messages_store.Page([], 0, 0)
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

    async def count(
        self,
        owner: int,
        peer: int | None,
        media_kinds: tuple[str, ...] | None,
        *,
        pinned: bool = False,
    ) -> int:
        """How many of the owner's messages (in one chat, or all) are of these kinds
        (None: every message), and pinned if asked, up to SEARCH_COUNT_CAP."""
        f = search_store.SearchFilter(
            owner_user_id=owner,
            peer_user_id=peer,
            out=None,
            min_id=0,
            min_date=0,
            max_date=0,
            media_kinds=media_kinds,
            pinned=pinned,
        )
        return await self._count(f, None)

    async def _count(
        self, f: search_store.SearchFilter, query: search_store.TextQuery | None
    ) -> int:
        if query is not None:
            return await search_store.count_search(self._db.pool, f, query, SEARCH_COUNT_CAP)
        return await search_store.count_messages(self._db.pool, f, SEARCH_COUNT_CAP)
