"""messages.getDialogs and getPeerDialogs: the chat list (TL <-> domain; the rules are
in services)."""

from __future__ import annotations

from typing import Any

from telesrv.rpc.context import RequestContext
from telesrv.rpc.messages import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, dialog_tl, message_tl, message_user_ids
from telesrv.services.messages import MessageService
from telesrv.services.updates import UpdatesService
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import FolderIdInvalid, PeerIdInvalid

MAX_DIALOGS_LIMIT = 100


class DialogsHandlers:
    def __init__(
        self,
        messages: MessageService,
        updates: UpdatesService,
        resolve_peer: PeerResolver,
        users_for: UsersFor,
    ) -> None:
        self._messages = messages
        self._updates = updates
        self._resolve_peer = resolve_peer
        self._users_for = users_for

    async def _peer(self, ctx: RequestContext, peer: Any) -> int:
        return await self._resolve_peer(ctx, peer)

    @method(functions.messages.GetDialogs)
    async def get_dialogs(self, ctx: RequestContext, req: Any) -> TLObject:
        assert ctx.user_id is not None
        folder = req.folder_id or 0
        if folder not in (0, 1):
            raise FolderIdInvalid()
        offset_peer = None
        if req.offset_date > 0 and not isinstance(
            req.offset_peer, types.InputPeerEmpty | types.InputPeerSelf
        ):
            try:
                offset_peer = await self._peer(ctx, req.offset_peer)
            except PeerIdInvalid:
                offset_peer = None
        elif isinstance(req.offset_peer, types.InputPeerSelf):
            offset_peer = ctx.user_id
        limit = max(1, min(req.limit, MAX_DIALOGS_LIMIT)) if req.limit > 0 else MAX_DIALOGS_LIMIT
        count, digest = await self._messages.dialogs_summary(ctx.user_id, folder)
        dialog_hash = digest & 0x7FFFFFFFFFFFFFFF
        if req.hash and req.hash == dialog_hash and req.offset_date == 0:
            return types.messages.DialogsNotModified(count=count)
        rows, tops = await self._messages.dialogs(
            ctx.user_id,
            folder_id=folder,
            offset_date=req.offset_date or None,
            offset_id=req.offset_id or None,
            offset_peer=offset_peer,
            limit=limit,
        )
        user_ids = {d.peer_user_id for d in rows}
        for m in tops:
            user_ids |= message_user_ids(m)
        users = await self._users_for(ctx.user_id, user_ids) if user_ids else []
        dialogs = [dialog_tl(d) for d in rows]
        messages = [message_tl(m) for m in tops]
        if req.offset_date == 0 and len(rows) >= count:
            return types.messages.Dialogs(dialogs=dialogs, messages=messages, chats=[], users=users)
        return types.messages.DialogsSlice(
            count=count, dialogs=dialogs, messages=messages, chats=[], users=users
        )

    @method(functions.messages.GetPeerDialogs)
    async def get_peer_dialogs(self, ctx: RequestContext, req: Any) -> TLObject:
        assert ctx.user_id is not None
        peers = []
        for item in req.peers[:100]:
            if isinstance(item, types.InputDialogPeer):
                peers.append(await self._peer(ctx, item.peer))
        rows, tops = await self._messages.peer_dialogs(ctx.user_id, peers)
        user_ids = {d.peer_user_id for d in rows}
        for m in tops:
            user_ids |= message_user_ids(m)
        users = await self._users_for(ctx.user_id, user_ids) if user_ids else []
        state = await self._updates.state(ctx.user_id, int(ctx.now))
        return types.messages.PeerDialogs(
            dialogs=[dialog_tl(d) for d in rows],
            messages=[message_tl(m) for m in tops],
            chats=[],
            users=users,
            state=types.updates.State(
                pts=state.pts, qts=0, date=int(ctx.now), seq=0, unread_count=state.unread_count
            ),
        )
