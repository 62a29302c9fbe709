"""messages.forwardMessages, readMessageContents, getOutboxReadDate, search and
searchGlobal for private chats (TL <-> domain; the rules are in services)."""

from __future__ import annotations

from typing import Any

from telesrv.rpc.context import RequestContext
from telesrv.rpc.messages import PeerResolver, reject_unsupported_send_options
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, message_tl, message_user_ids, messages_answer, peer_user
from telesrv.services.forwards import ForwardRequest, MessageExtras
from telesrv.services.messages import Origin
from telesrv.services.search import SearchPage, SearchQuery
from telesrv.services.updates import UpdatesService
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import (
    FolderIdInvalid,
    ReplyMessageIdInvalid,
    ReplyToMonoforumPeerInvalid,
    StoryIdInvalid,
    TopicIdInvalid,
)


def fwd_header(author: int, date: int) -> bytes:
    """The header a copy carries when its source had none: the source's author and date."""
    return bytes(types.MessageFwdHeader(from_id=peer_user(author), date=date).to_bytes())


class MessageExtrasHandlers:
    def __init__(
        self,
        extras: MessageExtras,
        updates: UpdatesService,
        resolve_peer: PeerResolver,
        users_for: UsersFor,
    ) -> None:
        self._extras = extras
        self._updates = updates
        self._resolve_peer = resolve_peer
        self._users_for = users_for

    @method(functions.messages.ForwardMessages)
    async def forward_messages(self, ctx: RequestContext, req: Any) -> TLObject:
        assert ctx.user_id is not None
        reject_unsupported_send_options(req)
        if req.top_msg_id is not None:
            raise TopicIdInvalid()
        if req.reply_to is not None:
            if isinstance(req.reply_to, types.InputReplyToStory):
                raise StoryIdInvalid()
            if isinstance(req.reply_to, types.InputReplyToMonoForum):
                raise ReplyToMonoforumPeerInvalid()
            raise ReplyMessageIdInvalid()
        from_peer = await self._resolve_peer(ctx, req.from_peer)
        to_peer = await self._resolve_peer(ctx, req.to_peer)
        sent = await self._extras.forward(
            ForwardRequest(
                owner=ctx.user_id,
                from_peer=from_peer,
                to_peer=to_peer,
                ids=list(req.id),
                random_ids=list(req.random_id),
                drop_author=req.drop_author,
                silent=req.silent,
                noforwards=req.noforwards,
            ),
            fwd_header,
            Origin(ctx.auth_key_id, ctx.session_id),
            int(ctx.now),
        )
        updates: list[types.TypeUpdate] = []
        user_ids: set[int] = set()
        for random_id, copy in sent:
            updates.append(types.UpdateMessageID(id=copy.message.box_id, random_id=random_id))
            updates.append(
                types.UpdateNewMessage(message=message_tl(copy.message), pts=copy.pts, pts_count=1)
            )
            user_ids |= message_user_ids(copy.message)
        users = await self._users_for(ctx.user_id, user_ids) if user_ids else []
        return types.Updates(updates=updates, users=users, chats=[], date=int(ctx.now), seq=0)

    @method(functions.messages.ReadMessageContents)
    async def read_message_contents(self, ctx: RequestContext, req: Any) -> TLObject:
        assert ctx.user_id is not None
        outcome = await self._extras.read_contents(
            ctx.user_id, list(req.id), Origin(ctx.auth_key_id, ctx.session_id), int(ctx.now)
        )
        if outcome is None:
            # Nothing was unread: no pts is spent (a repeated call gets pts_count 0).
            state = await self._updates.state(ctx.user_id, int(ctx.now))
            return types.messages.AffectedMessages(pts=state.pts, pts_count=0)
        return types.messages.AffectedMessages(pts=outcome.pts, pts_count=outcome.pts_count)

    @method(functions.messages.GetOutboxReadDate)
    async def get_outbox_read_date(self, ctx: RequestContext, req: Any) -> TLObject:
        assert ctx.user_id is not None
        peer = await self._resolve_peer(ctx, req.peer)
        date = await self._extras.outbox_read_date(ctx.user_id, peer, req.msg_id)
        return types.OutboxReadDate(date=date)

    @method(functions.messages.Search)
    async def search(self, ctx: RequestContext, req: Any) -> TLObject:
        assert ctx.user_id is not None
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
    async def search_global(self, ctx: RequestContext, req: Any) -> TLObject:
        assert ctx.user_id is not None
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
