"""Saved messages as apps list them: messages.getSavedHistory, getSavedDialogs and
getPinnedSavedDialogs (TL <-> domain).

Telegram sorts a user's saved messages by where each came from (a message forwarded from
Bob into Saved Messages is saved under Bob). This server keeps no such origin: every
saved message is a note of the user's own. So there is at most one saved dialog, the
user's own peer, holding all of them, and any other peer has none.
"""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.history import history_page
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, message_tl, message_user_ids, messages_answer, peer_user
from telesrv.services.history import History
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import PeerIdInvalid


class SavedMessagesHandlers:
    def __init__(self, history: History, resolve_peer: PeerResolver, users_for: UsersFor) -> None:
        self._history = history
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
        messages, count = await history_page(self._history, ctx.user_id, peer, req)
        return await messages_answer(ctx.user_id, messages, count, self._users_for)

    @method(functions.messages.GetSavedDialogs)
    async def get_saved_dialogs(
        self, ctx: AuthedContext, req: functions.messages.GetSavedDialogs
    ) -> TLObject:
        if req.parent_peer is not None:
            raise PeerIdInvalid()
        # The one dialog is on the first page only (an offset means a later page). It
        # is always sent whole: at most one dialog is cheaper to send than to hash.
        if req.offset_id or req.offset_date or req.limit <= 0:
            return _NONE
        last, _ = await self._history.history(
            ctx.user_id,
            ctx.user_id,
            offset_id=0,
            offset_date=0,
            add_offset=0,
            limit=1,
            max_id=0,
            min_id=0,
        )
        if not last:
            return _NONE
        top = last[0]
        return types.messages.SavedDialogs(
            dialogs=[types.SavedDialog(peer=peer_user(ctx.user_id), top_message=top.box_id)],
            messages=[message_tl(top)],
            chats=[],
            users=await self._users_for(ctx.user_id, message_user_ids(top) | {ctx.user_id}),
        )

    @method(functions.messages.GetPinnedSavedDialogs)
    async def get_pinned_saved_dialogs(
        self, ctx: AuthedContext, req: functions.messages.GetPinnedSavedDialogs
    ) -> TLObject:
        # Saved dialogs cannot be pinned here: there is only the one.
        return _NONE


_NONE = types.messages.SavedDialogs(dialogs=[], messages=[], chats=[], users=[])
