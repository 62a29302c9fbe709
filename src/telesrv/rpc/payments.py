"""Stars and gifts: no account holds any here, so balances are zero and lists are empty.

Only the caller's own balance may be asked for (Telegram also lets bot and channel owners
ask for theirs; neither exists here)."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.hashes import not_modified
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import PeerIdInvalid


def zero_balance(ton: bool) -> types.payments.StarsStatus:
    balance: types.TypeStarsAmount = (
        types.StarsTonAmount(amount=0) if ton else types.StarsAmount(amount=0, nanos=0)
    )
    return types.payments.StarsStatus(balance=balance, chats=[], users=[])


class PaymentsHandlers:
    def __init__(self, resolve_peer: PeerResolver) -> None:
        self._resolve_peer = resolve_peer

    async def _own(self, ctx: AuthedContext, peer: types.TypeInputPeer) -> None:
        if await self._resolve_peer(ctx, peer) != ctx.user_id:
            raise PeerIdInvalid()  # another user's balance is not the caller's to see

    @method(functions.payments.GetStarsStatus)
    async def get_stars_status(
        self, ctx: AuthedContext, req: functions.payments.GetStarsStatus
    ) -> TLObject:
        await self._own(ctx, req.peer)
        return zero_balance(bool(req.ton))

    @method(functions.payments.GetStarsTransactions)
    async def get_stars_transactions(
        self, ctx: AuthedContext, req: functions.payments.GetStarsTransactions
    ) -> TLObject:
        await self._own(ctx, req.peer)
        # No transactions: an empty history and no next_offset (the end of the list).
        answer = zero_balance(bool(req.ton))
        answer.history = []
        return answer

    @method(functions.payments.GetStarsSubscriptions)
    async def get_stars_subscriptions(
        self, ctx: AuthedContext, req: functions.payments.GetStarsSubscriptions
    ) -> TLObject:
        await self._own(ctx, req.peer)
        answer = zero_balance(False)
        answer.subscriptions = []
        return answer

    @method(functions.payments.GetStarsTopupOptions)
    async def get_stars_topup_options(
        self, ctx: AuthedContext, req: functions.payments.GetStarsTopupOptions
    ) -> list[TLObject]:
        return []  # stars cannot be bought here

    @method(functions.payments.GetStarGifts)
    async def get_star_gifts(
        self, ctx: AuthedContext, req: functions.payments.GetStarGifts
    ) -> TLObject:
        if not_modified(req.hash, 0):
            return types.payments.StarGiftsNotModified()
        return types.payments.StarGifts(hash=0, gifts=[], chats=[], users=[])
