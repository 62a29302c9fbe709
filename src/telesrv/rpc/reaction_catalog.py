"""Saved-message tags, which the reaction picker offers beyond the reactions themselves.
None exist here, so the answer is Telegram's empty form (reactions proper are in
rpc/reactions.py; message effects and tag reactions in empty_lists.py)."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.hashes import not_modified
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.tl import TLObject, functions, types


class ReactionCatalogHandlers:
    def __init__(self, resolve_peer: PeerResolver) -> None:
        self._resolve_peer = resolve_peer

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

    @method(functions.messages.GetPaidReactionPrivacy)
    async def get_paid_reaction_privacy(
        self, ctx: AuthedContext, req: functions.messages.GetPaidReactionPrivacy
    ) -> TLObject:
        # Paid reactions do not exist here: the setting is the default, told the way
        # Telegram tells it (an update in an Updates answer).
        return types.Updates(
            updates=[types.UpdatePaidReactionPrivacy(private=types.PaidReactionPrivacyDefault())],
            users=[],
            chats=[],
            date=int(ctx.now),
            seq=0,
        )
