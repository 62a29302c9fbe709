"""auth.*: login codes, sign-in and sign-up, logging out."""

from __future__ import annotations

from telesrv.rpc.audit import audit, audit_refusal
from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.registry import method
from telesrv.rpc.users_tl import UsersTl
from telesrv.services.accounts import AuthorizationService
from telesrv.services.login import LoginService, SentCode
from telesrv.services.passwords import Passwords
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import AuthKeyUnregistered


def _sent_code(sent: SentCode) -> TLObject:
    return types.auth.SentCode(
        type=types.auth.SentCodeTypeApp(length=sent.code_length),
        phone_code_hash=sent.phone_code_hash,
        timeout=sent.timeout,
    )


class AuthHandlers:
    def __init__(
        self,
        login: LoginService,
        authorizations: AuthorizationService,
        users_tl: UsersTl,
        passwords: Passwords | None = None,
    ) -> None:
        self._login = login
        self._authorizations = authorizations
        self._users_tl = users_tl
        self._passwords = passwords

    async def _logged_in(self, ctx: RequestContext, user_id: int) -> TLObject:
        # Every session of this key (this one included) is now this account's.
        ctx.sessions.authorization_changed(ctx.perm_auth_key_id, user_id)
        user = await self._users_tl.one(user_id, user_id, ctx.now)
        return types.auth.Authorization(user=user)

    @method(functions.auth.SendCode, requires_auth=False)
    async def send_code(self, ctx: RequestContext, req: functions.auth.SendCode) -> TLObject:
        return _sent_code(await self._login.send_code(req.phone_number, ctx.now, ctx.client_ip))

    @method(functions.auth.ResendCode, requires_auth=False)
    async def resend_code(self, ctx: RequestContext, req: functions.auth.ResendCode) -> TLObject:
        sent = await self._login.resend_code(
            req.phone_number, req.phone_code_hash, ctx.now, ctx.client_ip
        )
        return _sent_code(sent)

    @method(functions.auth.CancelCode, requires_auth=False)
    async def cancel_code(self, ctx: RequestContext, req: functions.auth.CancelCode) -> bool:
        return await self._login.cancel_code(req.phone_number, req.phone_code_hash)

    @method(functions.auth.SignIn, requires_auth=False)
    async def sign_in(self, ctx: RequestContext, req: functions.auth.SignIn) -> TLObject:
        with audit_refusal("sign_in", ctx):
            signed = await self._login.sign_in(
                req.phone_number,
                req.phone_code_hash,
                req.phone_code,
                ctx.perm_auth_key_id,
                ctx.now,
            )
        if signed is None:
            audit("sign_in", ctx, None, outcome="sign_up_required")
            return types.auth.AuthorizationSignUpRequired()
        # An account auto-registered by this sign-in is a sign-up in the audit log.
        audit("sign_up" if signed.created else "sign_in", ctx, signed.user_id)
        return await self._logged_in(ctx, signed.user_id)

    @method(functions.auth.SignUp, requires_auth=False)
    async def sign_up(self, ctx: RequestContext, req: functions.auth.SignUp) -> TLObject:
        with audit_refusal("sign_up", ctx):
            user_id = await self._login.sign_up(
                req.phone_number,
                req.phone_code_hash,
                req.first_name,
                req.last_name,
                ctx.perm_auth_key_id,
                ctx.now,
            )
        audit("sign_up", ctx, user_id)
        return await self._logged_in(ctx, user_id)

    # Also served to a key that waits for its account's password: it may give up.
    @method(functions.auth.LogOut, requires_auth=False)
    async def log_out(self, ctx: RequestContext, req: functions.auth.LogOut) -> TLObject:
        if ctx.user_id is None:
            waited = self._passwords is not None and await self._passwords.cancel_login(
                ctx.perm_auth_key_id
            )
            if not waited:
                raise AuthKeyUnregistered()
            audit("logout", ctx, None, outcome="password_wait_ended")
            return types.auth.LoggedOut()
        await self._authorizations.log_out(ctx.perm_auth_key_id)
        ctx.sessions.authorization_changed(ctx.perm_auth_key_id, None)
        audit("logout", ctx, ctx.user_id)
        return types.auth.LoggedOut()

    @method(functions.auth.ResetAuthorizations)
    async def reset_authorizations(
        self, ctx: AuthedContext, req: functions.auth.ResetAuthorizations
    ) -> bool:
        keys = await self._authorizations.reset_others(ctx.user_id, ctx.perm_auth_key_id)
        for key in keys:
            ctx.sessions.close_key(key)
        audit("reset_authorizations", ctx, ctx.user_id, ended_keys=len(keys))
        return True
