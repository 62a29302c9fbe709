"""auth.exportLoginToken, auth.acceptLoginToken, auth.importLoginToken: login by QR code."""

from __future__ import annotations

from telesrv.rpc.account import device_to_tl
from telesrv.rpc.audit import audit, audit_refusal, key_hex
from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.registry import method
from telesrv.rpc.users_tl import UsersTl
from telesrv.services.qr_login import LoggedIn, LoginTokenOutcome, QrLoginService
from telesrv.tl import TLObject, functions, types


def login_token_update(date: int) -> bytes:
    """What the waiting device is pushed once its token is accepted (a serialized
    ``updates``): it then calls exportLoginToken again, as Telegram's own apps do."""
    return types.UpdateShort(update=types.UpdateLoginToken(), date=date).to_bytes()


class QrLoginHandlers:
    def __init__(self, qr_login: QrLoginService, users_tl: UsersTl) -> None:
        self._qr_login = qr_login
        self._users_tl = users_tl

    async def _answer(self, ctx: RequestContext, outcome: LoginTokenOutcome) -> TLObject:
        if not isinstance(outcome, LoggedIn):
            return types.auth.LoginToken(expires=outcome.expires, token=outcome.token)
        audit("qr_sign_in", ctx, outcome.user_id)
        # As after auth.signIn: every session of this key is now this account's.
        ctx.sessions.authorization_changed(ctx.perm_auth_key_id, outcome.user_id)
        user = await self._users_tl.one(outcome.user_id, outcome.user_id, ctx.now)
        return types.auth.LoginTokenSuccess(authorization=types.auth.Authorization(user=user))

    # Telegram serves both on keys that are not signed in: that is the point of them.
    @method(functions.auth.ExportLoginToken, requires_auth=False)
    async def export_login_token(
        self, ctx: RequestContext, req: functions.auth.ExportLoginToken
    ) -> TLObject:
        outcome = await self._qr_login.export(ctx.perm_auth_key_id, req.except_ids, ctx.now)
        return await self._answer(ctx, outcome)

    @method(functions.auth.ImportLoginToken, requires_auth=False)
    async def import_login_token(
        self, ctx: RequestContext, req: functions.auth.ImportLoginToken
    ) -> TLObject:
        outcome = await self._qr_login.import_(ctx.perm_auth_key_id, req.token, ctx.now)
        return await self._answer(ctx, outcome)

    @method(functions.auth.AcceptLoginToken)
    async def accept_login_token(
        self, ctx: AuthedContext, req: functions.auth.AcceptLoginToken
    ) -> TLObject:
        with audit_refusal("qr_accept", ctx, ctx.user_id):
            device = await self._qr_login.accept(ctx.user_id, req.token, ctx.now)
        audit("qr_accept", ctx, ctx.user_id, signed_in_key=key_hex(device.auth_key_id))
        return device_to_tl(device, current=False)
