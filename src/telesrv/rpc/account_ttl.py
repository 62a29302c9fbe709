"""account.getAccountTTL and account.setAccountTTL: the account's time to live in days."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.registry import method
from telesrv.services.account_ttl import AccountTtl
from telesrv.tl import functions, types


class AccountTtlHandlers:
    def __init__(self, account_ttl: AccountTtl) -> None:
        self._account_ttl = account_ttl

    @method(functions.account.GetAccountTTL)
    async def get_account_ttl(
        self, ctx: AuthedContext, req: functions.account.GetAccountTTL
    ) -> types.AccountDaysTTL:
        return types.AccountDaysTTL(days=await self._account_ttl.days(ctx.user_id))

    @method(functions.account.SetAccountTTL)
    async def set_account_ttl(
        self, ctx: AuthedContext, req: functions.account.SetAccountTTL
    ) -> bool:
        await self._account_ttl.set_days(ctx.user_id, req.ttl.days)
        return True
