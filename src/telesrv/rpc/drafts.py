"""Drafts (TL <-> domain; the rules are in services/drafts.py)."""

from __future__ import annotations

from telesrv.rpc.account_common import origin
from telesrv.rpc.context import AuthedContext
from telesrv.rpc.dialogs_tl import draft_tl
from telesrv.rpc.messages import check_entities
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, encode_entities, peer_user
from telesrv.services.drafts import DraftRow, Drafts
from telesrv.services.ids import INT32_MAX
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import MediaInvalid, ReplyMessageIdInvalid


class DraftHandlers:
    """messages.saveDraft, getAllDrafts, clearAllDrafts."""

    def __init__(self, drafts: Drafts, resolve_peer: PeerResolver, users_for: UsersFor) -> None:
        self._drafts = drafts
        self._resolve_peer = resolve_peer
        self._users_for = users_for

    @method(functions.messages.SaveDraft)
    async def save_draft(self, ctx: AuthedContext, req: functions.messages.SaveDraft) -> bool:
        if req.media is not None:
            raise MediaInvalid()
        peer = await self._resolve_peer(ctx, req.peer)
        reply_to = None
        if isinstance(req.reply_to, types.InputReplyToMessage):
            if not 0 < req.reply_to.reply_to_msg_id <= INT32_MAX:
                raise ReplyMessageIdInvalid()
            reply_to = req.reply_to.reply_to_msg_id
        elif req.reply_to is not None:
            raise ReplyMessageIdInvalid()
        check_entities(req.entities, req.message)
        draft = DraftRow(
            peer_user_id=peer,
            message=req.message.replace("\x00", ""),
            entities=encode_entities(req.entities),
            reply_to_msg_id=reply_to,
            no_webpage=bool(req.no_webpage),
            invert_media=bool(req.invert_media),
            date=int(ctx.now),
        )
        await self._drafts.save_draft(ctx.user_id, draft, origin(ctx), int(ctx.now))
        return True

    @method(functions.messages.GetAllDrafts)
    async def get_all_drafts(
        self, ctx: AuthedContext, req: functions.messages.GetAllDrafts
    ) -> TLObject:
        """The drafts as updateDraftMessage in an updates (nothing is logged)."""
        drafts = await self._drafts.all_drafts(ctx.user_id)
        updates: list[types.TypeUpdate] = [
            types.UpdateDraftMessage(peer=peer_user(d.peer_user_id), draft=draft_tl(d))
            for d in drafts
        ]
        peers = {d.peer_user_id for d in drafts}
        users = await self._users_for(ctx.user_id, peers) if peers else []
        return types.Updates(updates=updates, users=users, chats=[], date=int(ctx.now), seq=0)

    @method(functions.messages.ClearAllDrafts)
    async def clear_all_drafts(
        self, ctx: AuthedContext, req: functions.messages.ClearAllDrafts
    ) -> bool:
        await self._drafts.clear_drafts(ctx.user_id, None, origin(ctx), int(ctx.now))
        return True
