"""messages.forwardMessages (TL <-> domain); content reads are in read_receipts.py, search
in search.py."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.messages import reject_unsupported_send_options
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, message_tl, message_user_ids, peer_user
from telesrv.services.forwards import ForwardRequest, Forwards, FwdHeaderBuilder
from telesrv.services.messages import Origin
from telesrv.services.privacy import PrivacyService
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import (
    ReplyMessageIdInvalid,
    ReplyToMonoforumPeerInvalid,
    StoryIdInvalid,
    TopicIdInvalid,
)


def fwd_header(author: int, date: int) -> bytes:
    """The header a copy carries when its source had none: the source's author and date."""
    return bytes(types.MessageFwdHeader(from_id=peer_user(author), date=date).to_bytes())


def fwd_header_hiding(hidden: dict[int, str]) -> FwdHeaderBuilder:
    """``fwd_header``, except for the authors in ``hidden`` (author -> name), who do not
    let the forwarder link to them: their copies carry the name only."""
    if not hidden:
        return fwd_header

    def header(author: int, date: int) -> bytes:
        name = hidden.get(author)
        if name is None:
            return fwd_header(author, date)
        return bytes(types.MessageFwdHeader(from_name=name, date=date).to_bytes())

    return header


class ForwardHandlers:
    """messages.forwardMessages."""

    def __init__(
        self,
        forwards: Forwards,
        resolve_peer: PeerResolver,
        users_for: UsersFor,
        privacy: PrivacyService,
    ) -> None:
        self._forwards = forwards
        self._resolve_peer = resolve_peer
        self._users_for = users_for
        # Required: a handler built without it must fail, not link hidden authors.
        self._privacy = privacy

    async def _header_for(self, forwarder: int, from_peer: int) -> FwdHeaderBuilder:
        # A copy whose source has no header of its own was written in the chat it is
        # taken from: by the forwarder (who may always link to themself) or by that
        # chat's other user, whose Forwards rules decide for this forwarder.
        if from_peer == forwarder:
            return fwd_header
        return fwd_header_hiding(await self._privacy.hidden_author_names(forwarder, [from_peer]))

    @method(functions.messages.ForwardMessages)
    async def forward_messages(
        self, ctx: AuthedContext, req: functions.messages.ForwardMessages
    ) -> TLObject:
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
        sent = await self._forwards.forward(
            ForwardRequest(
                owner=ctx.user_id,
                from_peer=from_peer,
                to_peer=to_peer,
                ids=list(req.id),
                random_ids=list(req.random_id),
                drop_author=req.drop_author,
                drop_media_captions=req.drop_media_captions,
                silent=req.silent,
                noforwards=req.noforwards,
            ),
            await self._header_for(ctx.user_id, from_peer),
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
