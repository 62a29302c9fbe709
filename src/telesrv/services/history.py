"""A chat's history and messages by id, each answer within its byte budget."""

from __future__ import annotations

from telesrv.services.ids import INT32_MAX
from telesrv.store import history as history_store
from telesrv.store import messages as messages_store
from telesrv.store.db import Db

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


class History:
    """A chat's history and its messages by id (within the answer budgets)."""

    def __init__(
        self,
        db: Db,
        *,
        answer_bytes: int = MAX_ANSWER_BYTES,
        by_id_bytes: int = MAX_MESSAGES_BY_ID_BYTES,
    ) -> None:
        self._db = db
        self._answer_bytes = answer_bytes
        self._by_id_bytes = by_id_bytes

    async def boxes(self, owner: int, box_ids: list[int]) -> list[messages_store.BoxMessage]:
        """The owner's visible messages among ``box_ids`` (what updates render)."""
        return await messages_store.get_boxes(
            self._db.pool, owner, box_ids, distributed=self._db.distributed
        )

    async def boxes_of_owners(self, keys: list[tuple[int, int]]) -> list[messages_store.BoxMessage]:
        """Visible messages by (owner, box id), across owners: one read for a batch."""
        return await messages_store.get_boxes_of_owners(
            self._db.pool, keys, distributed=self._db.distributed
        )

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
    ) -> tuple[list[messages_store.BoxMessage], int]:
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
            before = await history_store.newest_id_before(pool, owner, peer, offset_date)
            boundary = (before or 0) + 1
        older_below = top if boundary is None else min(boundary, top or boundary)
        budget = self._answer_bytes
        messages: list[messages_store.BoxMessage] = []
        older_limit, skip = limit, add_offset
        if add_offset < 0:
            skip = 0
            newer_ids: list[int] = []
            if boundary is not None:
                newer_ids = await history_store.history_ids(
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
                return [], await history_store.count_history(pool, owner, peer)
            window = newer_ids[max(0, len(newer_ids) - take) :]
            older_limit = take - len(window)
            if window:
                # Oldest first, so a cut keeps the messages next to the boundary.
                newer = await history_store.history_page(
                    pool,
                    owner,
                    peer,
                    above=window[0] - 1,
                    below=window[-1] + 1,
                    limit=len(window),
                    budget=budget,
                    ascending=True,
                    distributed=self._db.distributed,
                )
                messages = list(reversed(newer.boxes))
                budget -= newer.size
                if newer.cut:
                    older_limit = 0
        if older_limit > 0 and budget > 0:
            older = await history_store.history_page(
                pool,
                owner,
                peer,
                above=above,
                below=older_below,
                limit=older_limit,
                skip=skip,
                budget=budget,
                distributed=self._db.distributed,
            )
            # Past the budget, only a page's very first message is kept.
            if not (messages and older.size > budget):
                messages += older.boxes
        count = await history_store.count_history(pool, owner, peer)
        return messages, count

    async def messages_by_id(self, owner: int, ids: list[int]) -> list[messages_store.BoxMessage]:
        """The owner's messages among ``ids`` (at most MAX_MESSAGES_BY_ID), in the order
        asked, up to MAX_MESSAGES_BY_ID_BYTES: the caller answers the rest as missing."""
        wanted = list(dict.fromkeys(i for i in ids if 0 < i <= INT32_MAX))[:MAX_MESSAGES_BY_ID]
        if not wanted:
            return []
        page = await messages_store.get_boxes_within(
            self._db.pool, owner, wanted, self._by_id_bytes, distributed=self._db.distributed
        )
        return page.boxes
