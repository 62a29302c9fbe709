"""What the reaction and effect pickers offer beyond the reactions themselves: message
effects, saved-message tags and the default tag reactions. None exist here, so each is
Telegram's empty form (reactions proper are in rpc/reactions.py)."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.hashes import not_modified
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.tl import TLObject, functions, types


class ReactionCatalogHandlers:
    def __init__(self, resolve_peer: PeerResolver) -> None:
        self._resolve_peer = resolve_peer

    @method(functions.messages.GetAvailableEffects)
    async def get_available_effects(
        self, ctx: AuthedContext, req: functions.messages.GetAvailableEffects
    ) -> TLObject:
        if not_modified(req.hash, 0):
            return types.messages.AvailableEffectsNotModified()
        return types.messages.AvailableEffects(hash=0, effects=[], documents=[])

    @method(functions.messages.GetSavedReactionTags)
    async def get_saved_reaction_tags(
        self, ctx: AuthedContext, req: functions.messages.GetSavedReactionTags
    ) -> TLObject:
        if req.peer is not None:
            # The tags of one saved-messages chat: the peer must still be one the
            # caller may name, as everywhere else.
            await self._resolve_peer(ctx, req.peer)
        if not_modified(req.hash, 0):
            return types.messages.SavedReactionTagsNotModified()
        return types.messages.SavedReactionTags(tags=[], hash=0)

    @method(functions.messages.GetDefaultTagReactions)
    async def get_default_tag_reactions(
        self, ctx: AuthedContext, req: functions.messages.GetDefaultTagReactions
    ) -> TLObject:
        if not_modified(req.hash, 0):
            return types.messages.ReactionsNotModified()
        return types.messages.Reactions(hash=0, reactions=[])
