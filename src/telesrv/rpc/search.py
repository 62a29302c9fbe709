"""messages.search and searchGlobal for private chats (TL <-> domain; the rules are in services)."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, messages_answer
from telesrv.services.forwards import MessageExtras
from telesrv.services.search import SearchPage, SearchQuery
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import (
    FolderIdInvalid,
)


class SearchHandlers:
    """messages.search and searchGlobal.

    A part of the handler class that inherits it, whose constructor sets these fields.
    """

    _extras: MessageExtras
    _resolve_peer: PeerResolver
    _users_for: UsersFor

    @method(functions.messages.Search)
    async def search(self, ctx: AuthedContext, req: functions.messages.Search) -> TLObject:
        owner = ctx.user_id
        peer = None
        if not isinstance(req.peer, types.InputPeerEmpty):  # inputPeerEmpty: every chat
            peer = await self._resolve_peer(ctx, req.peer)
        out = None
        if req.from_id is not None:
            author = await self._resolve_peer(ctx, req.from_id)
            if author == owner:
                out = True
            elif peer is None:
                peer, out = author, False  # another user writes only in the chat with them
            elif author == peer:
                out = False
            else:
                return await self._answer(owner, SearchPage([], 0))
        if (
            not isinstance(req.filter, types.InputMessagesFilterEmpty)
            or req.saved_peer_id is not None
            or req.saved_reaction
            or req.top_msg_id is not None
        ):
            # Only text messages exist here: no media, pins, mentions, saved
            # sub-chats, reactions or topics to match.
            return await self._answer(owner, SearchPage([], 0))
        page = await self._extras.search(
            SearchQuery(
                owner=owner,
                peer=peer,
                text=req.q,
                out=out,
                offset_id=req.offset_id,
                add_offset=req.add_offset,
                limit=req.limit,
                max_id=req.max_id,
                min_id=req.min_id,
                min_date=req.min_date,
                max_date=req.max_date,
            )
        )
        return await self._answer(owner, page)

    @method(functions.messages.SearchGlobal)
    async def search_global(
        self, ctx: AuthedContext, req: functions.messages.SearchGlobal
    ) -> TLObject:
        owner = ctx.user_id
        if req.folder_id is not None and req.folder_id not in (0, 1):
            raise FolderIdInvalid()
        if not isinstance(req.filter, types.InputMessagesFilterEmpty):
            return await self._answer(owner, SearchPage([], 0), global_search=True)
        if req.broadcasts_only or req.groups_only or req.community is not None:
            return await self._answer(owner, SearchPage([], 0), global_search=True)
        # Box ids grow with time in an owner's view, so the last id alone is the cursor
        # (offset_rate/offset_peer are redundant with it).
        page = await self._extras.search(
            SearchQuery(
                owner=owner,
                peer=None,
                text=req.q,
                offset_id=req.offset_id,
                limit=req.limit,
                min_date=req.min_date or 0,
                max_date=req.max_date or 0,
            )
        )
        return await self._answer(owner, page, global_search=True)

    async def _answer(
        self, viewer: int, page: SearchPage, *, global_search: bool = False
    ) -> TLObject:
        last = page.messages[-1] if page.messages else None
        next_rate = last.date if global_search and last is not None else None
        return await messages_answer(
            viewer, page.messages, page.count, self._users_for, next_rate=next_rate
        )
