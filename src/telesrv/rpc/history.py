"""messages.getHistory, getMessages and getSplitRanges (TL <-> domain)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import (
    UsersFor,
    messages_answer,
)
from telesrv.services.history import History
from telesrv.services.messages import BoxMessage
from telesrv.tl import TLObject, functions, types


class HistoryPaging(Protocol):
    """The paging fields a history request has (getHistory, getSavedHistory)."""

    @property
    def offset_id(self) -> int: ...
    @property
    def offset_date(self) -> int: ...
    @property
    def add_offset(self) -> int: ...
    @property
    def limit(self) -> int: ...
    @property
    def max_id(self) -> int: ...
    @property
    def min_id(self) -> int: ...


async def history_page(
    history: History, owner: int, peer: int, req: HistoryPaging
) -> tuple[list[BoxMessage], int]:
    """The page of the chat with ``peer`` that ``req`` asks for, and the chat's count."""
    return await history.history(
        owner,
        peer,
        offset_id=req.offset_id,
        offset_date=req.offset_date,
        add_offset=req.add_offset,
        limit=req.limit,
        max_id=req.max_id,
        min_id=req.min_id,
    )


class HistoryHandlers:
    """messages.getHistory, getMessages and getSplitRanges."""

    def __init__(self, history: History, resolve_peer: PeerResolver, users_for: UsersFor) -> None:
        self._history = history
        self._resolve_peer = resolve_peer
        self._users_for = users_for

    @method(functions.messages.GetHistory)
    async def get_history(self, ctx: AuthedContext, req: functions.messages.GetHistory) -> TLObject:
        peer = await self._resolve_peer(ctx, req.peer)
        messages, count = await history_page(self._history, ctx.user_id, peer, req)
        return await self._messages_answer(ctx.user_id, messages, count)

    async def _messages_answer(
        self, viewer: int, messages: Sequence[BoxMessage | types.MessageEmpty], count: int | None
    ) -> TLObject:
        return await messages_answer(viewer, messages, count, self._users_for)

    @method(functions.messages.GetMessages)
    async def get_messages(
        self, ctx: AuthedContext, req: functions.messages.GetMessages
    ) -> TLObject:
        # inputMessageReplyTo(id) asks for the message that message `id` replies to.
        replying = [
            i.id for i in req.id[:200] if isinstance(i, types.InputMessageReplyTo) and i.id > 0
        ]
        reply_of: dict[int, int] = {}
        if replying:
            for m in await self._history.messages_by_id(ctx.user_id, replying):
                if m.reply_to_msg_id is not None:
                    reply_of[m.box_id] = m.reply_to_msg_id
        ids = []
        for item in req.id[:200]:
            if isinstance(item, types.InputMessageID):
                ids.append(item.id)
            elif isinstance(item, types.InputMessageReplyTo) and item.id in reply_of:
                ids.append(reply_of[item.id])
        found = {m.box_id: m for m in await self._history.messages_by_id(ctx.user_id, ids)}
        # One answer per id asked, as Telegram does: messageEmpty where there is none
        # (clients such as Telethon's get_messages(ids=...) rely on the positions).
        return await self._messages_answer(
            ctx.user_id, [found.get(i, types.MessageEmpty(id=i)) for i in ids], None
        )

    @method(functions.messages.GetSplitRanges)
    async def get_split_ranges(
        self, ctx: RequestContext, req: functions.messages.GetSplitRanges
    ) -> list[TLObject]:
        return []  # history is one range
