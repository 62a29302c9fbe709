"""account.getPrivacy / account.setPrivacy: an account's privacy rules per key."""

from __future__ import annotations

from telesrv.rpc.account_common import origin
from telesrv.rpc.context import AuthedContext
from telesrv.rpc.peers import Peers
from telesrv.rpc.privacy_tl import key_from_tl, rule_kind, rules_to_tl
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor
from telesrv.services.privacy import (
    MAX_RULE_USERS,
    MAX_RULES,
    PrivacyService,
    Rule,
    Rules,
    rule_user_ids,
)
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import PrivacyTooLong


class PrivacyRulesHandlers:
    def __init__(self, privacy: PrivacyService, peers: Peers, users_for: UsersFor) -> None:
        self._privacy = privacy
        self._peers = peers
        self._users_for = users_for

    async def _answer(self, ctx: AuthedContext, rules: Rules) -> TLObject:
        users = await self._users_for(ctx.user_id, rule_user_ids(rules))
        return types.account.PrivacyRules(rules=rules_to_tl(rules), chats=[], users=users)

    @method(functions.account.GetPrivacy)
    async def get_privacy(self, ctx: AuthedContext, req: functions.account.GetPrivacy) -> TLObject:
        rules = await self._privacy.rules(ctx.user_id, key_from_tl(req.key))
        return await self._answer(ctx, rules)

    @method(functions.account.SetPrivacy)
    async def set_privacy(self, ctx: AuthedContext, req: functions.account.SetPrivacy) -> TLObject:
        key = key_from_tl(req.key)
        # Bounded before any user is resolved (the service checks the same on what is
        # stored, after repeats are dropped).
        if len(req.rules) > MAX_RULES:
            raise PrivacyTooLong()
        wanted: list[Rule] = []
        named = 0
        for rule in req.rules:
            kind, users = rule_kind(rule)
            named += len(users)
            if named > MAX_RULE_USERS:
                raise PrivacyTooLong()
            ids = [await self._peers.resolve_input_user(ctx, u) for u in users]
            wanted.append(Rule(kind, tuple(ids)))
        stored = await self._privacy.set_rules(ctx.user_id, key, wanted, origin(ctx), int(ctx.now))
        return await self._answer(ctx, stored)
