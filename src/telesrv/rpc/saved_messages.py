"""Saved messages as apps list them: messages.getSavedHistory, getSavedDialogs and
getPinnedSavedDialogs (TL <-> domain).

Telegram sorts a user's saved messages by where each came from (a message forwarded from
Bob into Saved Messages is saved under Bob). This server keeps no such origin: every
saved message is a note of the user's own. So there is at most one saved dialog, the
user's own peer, holding all of them, and any other peer has none.
"""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.hashes import list_hash, not_modified
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, message_tl, message_user_ids, messages_answer, peer_user
from telesrv.services.messages import MessageService
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import PeerIdInvalid


class SavedMessagesHandlers:
    def __init__(
        self, messages: MessageService, resolve_peer: PeerResolver, users_for: UsersFor
    ) -> None:
        self._messages = messages
        self._peer = resolve_peer
        self._users_for = users_for

    @method(functions.messages.GetSavedHistory)
    async def get_saved_history(
        self, ctx: AuthedContext, req: functions.messages.GetSavedHistory
    ) -> TLObject:
        # A parent peer names a channel's direct-message topics, which a server
        # without channels does not have.
        if req.parent_peer is not None:
            raise PeerIdInvalid()
        peer = await self._peer(ctx, req.peer)
        if peer != ctx.user_id:
            return types.messages.Messages(messages=[], topics=[], chats=[], users=[])
        messages, count = await self._messages.history(
            ctx.user_id,
            peer,
            offset_id=req.offset_id,
            offset_date=req.offset_date,
            add_offset=req.add_offset,
            limit=req.limit,
            max_id=req.max_id,
            min_id=req.min_id,
        )
        return await messages_answer(ctx.user_id, messages, count, self._users_for)

    @method(functions.messages.GetSavedDialogs)
    async def get_saved_dialogs(
        self, ctx: AuthedContext, req: functions.messages.GetSavedDialogs
    ) -> TLObject:
        if req.parent_peer is not None:
            raise PeerIdInvalid()
        # The one dialog is on the first page only (an offset means a later page).
        first_page = req.offset_id == 0 and req.offset_date == 0 and req.limit > 0
        return await self._dialogs(ctx.user_id, req.hash if first_page else None, first_page)

    @method(functions.messages.GetPinnedSavedDialogs)
    async def get_pinned_saved_dialogs(
        self, ctx: AuthedContext, req: functions.messages.GetPinnedSavedDialogs
    ) -> TLObject:
        # Saved dialogs cannot be pinned here: there is only the one.
        return types.messages.SavedDialogs(dialogs=[], messages=[], chats=[], users=[])

    async def _dialogs(self, user_id: int, client_hash: int | None, listed: bool) -> TLObject:
        last, _ = await self._messages.history(
            user_id,
            user_id,
            offset_id=0,
            offset_date=0,
            add_offset=0,
            limit=1,
            max_id=0,
            min_id=0,
        )
        top = next((m for m in last if not isinstance(m, types.MessageEmpty)), None)
        if top is None or not listed:
            return types.messages.SavedDialogs(dialogs=[], messages=[], chats=[], users=[])
        ours = list_hash([user_id, top.box_id])
        if client_hash is not None and not_modified(client_hash, ours):
            return types.messages.SavedDialogsNotModified(count=1)
        return types.messages.SavedDialogs(
            dialogs=[types.SavedDialog(peer=peer_user(user_id), top_message=top.box_id)],
            messages=[message_tl(top)],
            chats=[],
            users=await self._users_for(user_id, message_user_ids(top) | {user_id}),
        )
