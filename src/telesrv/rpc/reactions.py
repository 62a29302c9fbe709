"""Reactions on private messages (TL <-> domain; the rules are in services/reactions.py)."""

from __future__ import annotations

import zlib

from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.media import document_tl
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.reactions_tl import message_reactions
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, messages_answer, peer_user
from telesrv.services.messages import Origin
from telesrv.services.reaction_icons import ICON_SIZE, ReactionIcons
from telesrv.services.reactions import (
    AVAILABLE_REACTIONS,
    MAX_REACTIONS_LIST_LIMIT,
    ReactionService,
    ReactionState,
)
from telesrv.services.updates import UpdatesService
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import LimitInvalid, ReactionInvalid

MAX_MESSAGES_REACTIONS = 100  # ids per messages.getMessagesReactions
# Changes with the list and with what each entry carries (v2: icons), so that apps that
# cached an older answer ask again.
_AVAILABLE_HASH = zlib.crc32(("v2:" + "".join(AVAILABLE_REACTIONS)).encode()) & 0x7FFFFFFF
_REACTIONS_HASH = _AVAILABLE_HASH  # for messages.getTopReactions


def _emoticon(reaction: types.TypeReaction) -> str | None:
    """The emoticon of a TL Reaction; None for reactionEmpty. Custom emoji and paid
    reactions are not offered here: REACTION_INVALID."""
    if isinstance(reaction, types.ReactionEmpty):
        return None
    if isinstance(reaction, types.ReactionEmoji):
        return str(reaction.emoticon)
    raise ReactionInvalid()


def _available(emoticon: str, icon: types.Document) -> types.AvailableReaction:
    # Apps animate reactions with stickers; the server has only its still icon, so it
    # stands in every required slot (an app shows it without motion). The optional
    # effect around a new reaction is left out: a still image there would stay.
    return types.AvailableReaction(
        reaction=emoticon,
        title=emoticon,
        static_icon=icon,
        appear_animation=icon,
        select_animation=icon,
        activate_animation=icon,
        effect_animation=icon,
    )


def icon_attributes(emoticon: str) -> list[bytes]:
    """The attributes of a reaction's icon document: a still sticker of its emoji."""
    attributes: list[TLObject] = [
        types.DocumentAttributeImageSize(w=ICON_SIZE, h=ICON_SIZE),
        types.DocumentAttributeSticker(
            alt=emoticon, stickerset=types.InputStickerSetEmpty(), mask=False
        ),
        types.DocumentAttributeFilename(file_name="reaction.webp"),
    ]
    return [bytes(a.to_bytes()) for a in attributes]


class ReactionHandlers:
    def __init__(
        self,
        reactions: ReactionService,
        updates: UpdatesService,
        resolve_peer: PeerResolver,
        users_for: UsersFor,
        reaction_icons: ReactionIcons,
    ) -> None:
        self._reactions = reactions
        self._icons = reaction_icons
        self._updates = updates
        self._resolve_peer = resolve_peer
        self._users_for = users_for

    def _update(self, owner: int, peer: int, state: ReactionState) -> types.UpdateMessageReactions:
        reactions = message_reactions(owner, state.reactions, state.unread)
        return types.UpdateMessageReactions(
            peer=peer_user(peer),
            msg_id=state.box_id,
            reactions=reactions or types.MessageReactions(results=[], recent_reactions=[]),
        )

    async def _updates_answer(
        self, ctx: AuthedContext, peer: int, states: list[ReactionState]
    ) -> TLObject:
        user_ids = {peer} | {int(r[0]) for s in states for r in s.reactions}
        return types.Updates(
            updates=[self._update(ctx.user_id, peer, s) for s in states],
            users=await self._users_for(ctx.user_id, user_ids),
            chats=[],
            date=int(ctx.now),
            seq=0,
        )

    @method(functions.messages.SendReaction)
    async def send_reaction(
        self, ctx: AuthedContext, req: functions.messages.SendReaction
    ) -> TLObject:
        peer = await self._resolve_peer(ctx, req.peer)
        wanted = [e for e in (_emoticon(r) for r in req.reaction or []) if e is not None]
        state = await self._reactions.send_reaction(
            ctx.user_id,
            peer,
            req.msg_id,
            wanted,
            bool(req.big),
            Origin(ctx.auth_key_id, ctx.session_id),
            int(ctx.now),
            add_to_recent=bool(req.add_to_recent),
        )
        return await self._updates_answer(ctx, peer, [state])

    @method(functions.messages.GetMessagesReactions)
    async def get_messages_reactions(
        self, ctx: AuthedContext, req: functions.messages.GetMessagesReactions
    ) -> TLObject:
        if len(req.id) > MAX_MESSAGES_REACTIONS:
            raise LimitInvalid()
        peer = await self._resolve_peer(ctx, req.peer)
        states = await self._reactions.states(ctx.user_id, peer, list(req.id))
        return await self._updates_answer(ctx, peer, states)

    @method(functions.messages.GetMessageReactionsList)
    async def get_message_reactions_list(
        self, ctx: AuthedContext, req: functions.messages.GetMessageReactionsList
    ) -> TLObject:
        if not 0 < req.limit <= MAX_REACTIONS_LIST_LIMIT:
            raise LimitInvalid()
        peer = await self._resolve_peer(ctx, req.peer)
        reaction = _emoticon(req.reaction) if req.reaction is not None else None
        count, rows, next_offset = await self._reactions.reaction_list(
            ctx.user_id, peer, req.id, reaction=reaction, offset=req.offset, limit=req.limit
        )
        return types.messages.MessageReactionsList(
            count=count,
            reactions=[
                types.MessagePeerReaction(
                    big=r.big,
                    my=r.user_id == ctx.user_id,
                    peer_id=peer_user(r.user_id),
                    date=r.date,
                    reaction=types.ReactionEmoji(emoticon=r.reaction),
                )
                for r in rows
            ],
            chats=[],
            users=await self._users_for(ctx.user_id, {r.user_id for r in rows}),
            next_offset=next_offset,
        )

    @method(functions.messages.GetUnreadReactions)
    async def get_unread_reactions(
        self, ctx: AuthedContext, req: functions.messages.GetUnreadReactions
    ) -> TLObject:
        peer = await self._resolve_peer(ctx, req.peer)
        messages, count = await self._reactions.unread_reactions(
            ctx.user_id,
            peer,
            offset_id=req.offset_id,
            add_offset=req.add_offset,
            limit=req.limit,
            max_id=req.max_id,
            min_id=req.min_id,
        )
        return await messages_answer(ctx.user_id, messages, count, self._users_for)

    @method(functions.messages.ReadReactions)
    async def read_reactions(
        self, ctx: AuthedContext, req: functions.messages.ReadReactions
    ) -> TLObject:
        # No pts is taken (updateMessageReactions has none): the answer names the
        # current pts with pts_count 0, so no client sees a gap. A positive offset asks
        # the client to call again for the rest.
        peer = await self._resolve_peer(ctx, req.peer)
        done = await self._reactions.read_reactions(ctx.user_id, peer, int(ctx.now))
        pts = await self._updates.contiguous(ctx.user_id)
        return types.messages.AffectedHistory(pts=pts, pts_count=0, offset=done.remaining)

    @method(functions.messages.GetAvailableReactions)
    async def get_available_reactions(
        self, ctx: RequestContext, req: functions.messages.GetAvailableReactions
    ) -> TLObject:
        if req.hash == _AVAILABLE_HASH:
            return types.messages.AvailableReactionsNotModified()
        return types.messages.AvailableReactions(
            hash=_AVAILABLE_HASH,
            reactions=[
                _available(e, document_tl(await self._icons.document(e)))
                for e in AVAILABLE_REACTIONS
            ],
        )

    @method(functions.messages.GetTopReactions)
    async def get_top_reactions(
        self, ctx: RequestContext, req: functions.messages.GetTopReactions
    ) -> TLObject:
        return self._reaction_list(req.limit, req.hash)

    @method(functions.messages.GetRecentReactions)
    async def get_recent_reactions(
        self, ctx: AuthedContext, req: functions.messages.GetRecentReactions
    ) -> TLObject:
        # The user's own list (sendReaction with add_to_recent), newest first.
        recent = await self._reactions.recent_reactions(ctx.user_id, req.limit)
        hash_ = zlib.crc32("\n".join(recent).encode()) & 0x7FFFFFFF
        if req.hash and req.hash == hash_:
            return types.messages.ReactionsNotModified()
        return types.messages.Reactions(
            hash=hash_, reactions=[types.ReactionEmoji(emoticon=e) for e in recent]
        )

    @method(functions.messages.ClearRecentReactions)
    async def clear_recent_reactions(
        self, ctx: AuthedContext, req: functions.messages.ClearRecentReactions
    ) -> bool:
        await self._reactions.clear_recent_reactions(ctx.user_id)
        return True

    @staticmethod
    def _reaction_list(limit: int, hash_: int) -> TLObject:
        if hash_ == _REACTIONS_HASH:
            return types.messages.ReactionsNotModified()
        count = max(0, min(limit, len(AVAILABLE_REACTIONS)))
        return types.messages.Reactions(
            hash=_REACTIONS_HASH,
            reactions=[types.ReactionEmoji(emoticon=e) for e in AVAILABLE_REACTIONS[:count]],
        )

    @method(functions.messages.SetDefaultReaction)
    async def set_default_reaction(
        self, ctx: AuthedContext, req: functions.messages.SetDefaultReaction
    ) -> bool:
        emoticon = _emoticon(req.reaction)
        if emoticon is None:
            raise ReactionInvalid()
        await self._reactions.set_default_reaction(ctx.user_id, emoticon)
        return True
