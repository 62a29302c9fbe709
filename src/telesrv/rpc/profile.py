"""What a private chat's header and profile ask about its user, beyond users.getFullUser
and the profile photos (rpc/profile_photos.py): common groups, what writing to them costs.
No account has a group or a price here, so each answer is Telegram's form for one with
none."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.peers import Peers
from telesrv.rpc.registry import method
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import LimitInvalid

# Telegram's bounds: 100 users per users.getRequirementsToContact, 100 chats a page.
MAX_REQUIREMENT_USERS = 100
MAX_PAGE = 100


class ProfileHandlers:
    def __init__(self, peers: Peers) -> None:
        self._peers = peers

    @method(functions.users.GetRequirementsToContact)
    async def get_requirements_to_contact(
        self, ctx: AuthedContext, req: functions.users.GetRequirementsToContact
    ) -> list[TLObject]:
        if len(req.id) > MAX_REQUIREMENT_USERS:
            raise LimitInvalid()
        for user in req.id:
            await self._peers.resolve_input_user(ctx, user)
        # One per user asked, in order: anyone may be written to, for free (a block
        # shows on the send, as in Telegram).
        return [types.RequirementToContactEmpty() for _ in req.id]

    @method(functions.messages.GetCommonChats)
    async def get_common_chats(
        self, ctx: AuthedContext, req: functions.messages.GetCommonChats
    ) -> TLObject:
        if not 0 <= req.limit <= MAX_PAGE:
            raise LimitInvalid()
        await self._peers.resolve_input_user(ctx, req.user_id)
        return types.messages.Chats(chats=[])  # private chats only: no groups to share

    @method(functions.account.GetPaidMessagesRevenue)
    async def get_paid_messages_revenue(
        self, ctx: AuthedContext, req: functions.account.GetPaidMessagesRevenue
    ) -> TLObject:
        await self._peers.resolve_input_user(ctx, req.user_id)
        return types.account.PaidMessagesRevenue(stars_amount=0)  # messages cost nothing
