"""messages.search and searchGlobal for private chats (TL <-> domain; the rules are in services)."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, messages_answer
from telesrv.services.search import Search, SearchPage, SearchQuery
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import (
    FolderIdInvalid,
)

# The shared-media filters and the kinds of message (message_search.media_kind) each
# keeps; inputMessagesFilterEmpty keeps every message, and inputMessagesFilterPinned
# (see filter_pinned) the pinned ones of every kind. Other filters (mentions, calls,
# locations, contacts, chat photos) match nothing here: none of those exist.
FILTER_KINDS: dict[type[TLObject], tuple[str, ...]] = {
    types.InputMessagesFilterPhotos: ("photo",),
    types.InputMessagesFilterVideo: ("video",),
    types.InputMessagesFilterPhotoVideo: ("photo", "video"),
    types.InputMessagesFilterDocument: ("document",),
    types.InputMessagesFilterMusic: ("music",),
    types.InputMessagesFilterVoice: ("voice",),
    types.InputMessagesFilterRoundVoice: ("round", "voice"),
    types.InputMessagesFilterRoundVideo: ("round",),
    types.InputMessagesFilterGif: ("gif",),
    types.InputMessagesFilterUrl: ("url",),
}


def filter_pinned(message_filter: TLObject) -> bool:
    return isinstance(message_filter, types.InputMessagesFilterPinned)


def filter_kinds(message_filter: TLObject) -> tuple[str, ...] | None:
    """The kinds a filter keeps; None for every message; () for no message."""
    if isinstance(message_filter, types.InputMessagesFilterEmpty) or filter_pinned(message_filter):
        return None
    return FILTER_KINDS.get(type(message_filter), ())


class SearchHandlers:
    """messages.search, getSearchCounters and searchGlobal."""

    def __init__(self, search: Search, resolve_peer: PeerResolver, users_for: UsersFor) -> None:
        self._search = search
        self._resolve_peer = resolve_peer
        self._users_for = users_for

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
        kinds = filter_kinds(req.filter)
        if (
            kinds == ()
            or not await self._own_notes(ctx, peer, req.saved_peer_id)
            or req.saved_reaction
            or req.top_msg_id  # 0, as Web K sends it, is no topic
        ):
            # No mentions, other saved sub-chats, reactions or topics here.
            return await self._answer(owner, SearchPage([], 0))
        page = await self._search.search(
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
                media_kinds=kinds,
                pinned=filter_pinned(req.filter),
            )
        )
        return await self._answer(owner, page)

    async def _own_notes(
        self, ctx: AuthedContext, peer: int | None, saved_peer: types.TypeInputPeer | None
    ) -> bool:
        """Whether a search's saved sub-chat (none, or its user's own notes in their own
        chat) is one this server has: saved messages are not sorted by origin here, so
        every one of them is in the notes' sub-chat and no other."""
        if saved_peer is None:
            return True
        return peer == ctx.user_id and await self._resolve_peer(ctx, saved_peer) == ctx.user_id

    @method(functions.messages.GetSearchCounters)
    async def get_search_counters(
        self, ctx: AuthedContext, req: functions.messages.GetSearchCounters
    ) -> list[types.messages.SearchCounter]:
        """Per filter, how many of the chat's messages it keeps (the counts of a chat's
        shared-media tabs)."""
        peer = await self._resolve_peer(ctx, req.peer)
        out = []
        # Counted once per distinct filter: a request repeating filters costs no more.
        counts: dict[tuple[tuple[str, ...] | None, bool], int] = {((), False): 0}
        own_notes = await self._own_notes(ctx, peer, req.saved_peer_id)
        for message_filter in req.filters:
            kinds = filter_kinds(message_filter)
            pinned = filter_pinned(message_filter)
            if not own_notes or req.top_msg_id:
                # no other saved sub-chats or topics here (topic 0 is none)
                kinds, pinned = (), False
            key = (kinds, pinned)
            if key not in counts:
                counts[key] = await self._search.count(ctx.user_id, peer, kinds, pinned=pinned)
            out.append(types.messages.SearchCounter(filter=message_filter, count=counts[key]))
        return out

    @method(functions.messages.SearchGlobal)
    async def search_global(
        self, ctx: AuthedContext, req: functions.messages.SearchGlobal
    ) -> TLObject:
        owner = ctx.user_id
        if req.folder_id is not None and req.folder_id not in (0, 1):
            raise FolderIdInvalid()
        kinds = filter_kinds(req.filter)
        if kinds == ():
            return await self._answer(owner, SearchPage([], 0), global_search=True)
        if req.broadcasts_only or req.groups_only or req.community is not None:
            return await self._answer(owner, SearchPage([], 0), global_search=True)
        # Box ids grow with time in an owner's view, so the last id alone is the cursor
        # (offset_rate/offset_peer are redundant with it).
        page = await self._search.search(
            SearchQuery(
                owner=owner,
                peer=None,
                text=req.q,
                offset_id=req.offset_id,
                limit=req.limit,
                min_date=req.min_date or 0,
                max_date=req.max_date or 0,
                media_kinds=kinds,
                pinned=filter_pinned(req.filter),
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
