"""Two-step verification: account.getPassword, account.updatePasswordSettings,
account.getPasswordSettings, auth.checkPassword, recovery and reset.

A key that gave the login code of an account with a password waits for the password
and is not signed in; it may still ask for the exchange (account.getPassword), give
the password (auth.checkPassword), ask for recovery, or log out (``rpc.auth``).
"""

from __future__ import annotations

from telesrv.rpc.audit import audit, audit_refusal
from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.registry import method
from telesrv.rpc.users_tl import UsersTl
from telesrv.services import srp
from telesrv.services.passwords import (
    NewPassword,
    Passwords,
    PasswordState,
    RemovePassword,
    ResetDone,
    SrpCheck,
)
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import AuthKeyUnregistered, NewSettingsInvalid


def srp_check_of(value: types.TypeInputCheckPasswordSRP) -> SrpCheck | None:
    """inputCheckPasswordSRP as the service takes it; the empty one is None."""
    if isinstance(value, types.InputCheckPasswordSRP):
        return SrpCheck(srp_id=value.srp_id, a=value.A, m1=value.M1)
    return None


def new_settings_of(
    settings: types.account.PasswordInputSettings,
) -> NewPassword | RemovePassword | None:
    algo = settings.new_algo
    if algo is None:
        return None  # flag 0 unset: the password is not touched
    if isinstance(algo, types.PasswordKdfAlgoUnknown) or not settings.new_password_hash:
        return RemovePassword()
    if not isinstance(
        algo, types.PasswordKdfAlgoSHA256SHA256PBKDF2HMACSHA512iter100000SHA256ModPow
    ):
        raise NewSettingsInvalid()
    return NewPassword(
        salt1=algo.salt1,
        salt2=algo.salt2,
        g=algo.g,
        p=algo.p,
        verifier=settings.new_password_hash,
        hint=settings.hint or "",
    )


def _algo(
    salt1: bytes, salt2: bytes
) -> types.PasswordKdfAlgoSHA256SHA256PBKDF2HMACSHA512iter100000SHA256ModPow:
    return types.PasswordKdfAlgoSHA256SHA256PBKDF2HMACSHA512iter100000SHA256ModPow(
        salt1=salt1, salt2=salt2, g=srp.G, p=srp.P_BYTES
    )


def password_to_tl(state: PasswordState) -> types.account.Password:
    current = state.has_password
    return types.account.Password(
        has_password=current,
        current_algo=_algo(state.salt1, state.salt2) if current else None,
        srp_B=state.srp_b if current else None,
        srp_id=state.srp_id if current else None,
        hint=state.hint if current and state.hint else None,
        new_algo=_algo(state.new_salt1, state.new_salt2),
        new_secure_algo=types.SecurePasswordKdfAlgoPBKDF2HMACSHA512iter100000(
            salt=state.new_secure_salt
        ),
        secure_random=state.secure_random,
        pending_reset_date=state.pending_reset_date,
    )


class PasswordHandlers:
    def __init__(self, passwords: Passwords, users_tl: UsersTl) -> None:
        self._passwords = passwords
        self._users_tl = users_tl

    async def _account(self, ctx: RequestContext) -> int:
        """The signed-in account, or the one whose password the key still owes."""
        if ctx.user_id is not None:
            return ctx.user_id
        waiting = await self._passwords.waiting_user(ctx.perm_auth_key_id, ctx.now)
        if waiting is None:
            raise AuthKeyUnregistered()
        return waiting

    @method(functions.account.GetPassword, requires_auth=False)
    async def get_password(
        self, ctx: RequestContext, req: functions.account.GetPassword
    ) -> TLObject:
        user_id = await self._account(ctx)
        return password_to_tl(await self._passwords.state(user_id, ctx.perm_auth_key_id, ctx.now))

    @method(functions.account.UpdatePasswordSettings)
    async def update_password_settings(
        self, ctx: AuthedContext, req: functions.account.UpdatePasswordSettings
    ) -> bool:
        settings = req.new_settings
        with audit_refusal("update_password", ctx, ctx.user_id):
            await self._passwords.update(
                ctx.user_id,
                ctx.perm_auth_key_id,
                srp_check_of(req.password),
                new_settings_of(settings),
                settings.email,
                ctx.now,
            )
        audit("update_password", ctx, ctx.user_id)
        return True

    @method(functions.account.GetPasswordSettings)
    async def get_password_settings(
        self, ctx: AuthedContext, req: functions.account.GetPasswordSettings
    ) -> TLObject:
        await self._passwords.verify(
            ctx.user_id, ctx.perm_auth_key_id, srp_check_of(req.password), ctx.now
        )
        # No recovery e-mail and no Passport secret are ever kept here.
        return types.account.PasswordSettings()

    @method(functions.auth.CheckPassword, requires_auth=False)
    async def check_password(
        self, ctx: RequestContext, req: functions.auth.CheckPassword
    ) -> TLObject:
        with audit_refusal("check_password", ctx):
            user_id = await self._passwords.complete_login(
                ctx.perm_auth_key_id, srp_check_of(req.password), ctx.now
            )
            if user_id is None:
                raise AuthKeyUnregistered()
        audit("check_password", ctx, user_id)
        # As after auth.signIn: every session of this key is now this account's.
        ctx.sessions.authorization_changed(ctx.perm_auth_key_id, user_id)
        user = await self._users_tl.one(user_id, user_id, ctx.now)
        return types.auth.Authorization(user=user)

    @method(functions.auth.RequestPasswordRecovery, requires_auth=False)
    async def request_password_recovery(
        self, ctx: RequestContext, req: functions.auth.RequestPasswordRecovery
    ) -> TLObject:
        await self._passwords.recovery(await self._account(ctx))

    @method(functions.auth.CheckRecoveryPassword, requires_auth=False)
    async def check_recovery_password(
        self, ctx: RequestContext, req: functions.auth.CheckRecoveryPassword
    ) -> bool:
        # No recovery code is ever sent, so none can be right.
        await self._passwords.recovery(await self._account(ctx))

    @method(functions.auth.RecoverPassword, requires_auth=False)
    async def recover_password(
        self, ctx: RequestContext, req: functions.auth.RecoverPassword
    ) -> TLObject:
        await self._passwords.recovery(await self._account(ctx))

    @method(functions.account.ResetPassword)
    async def reset_password(
        self, ctx: AuthedContext, req: functions.account.ResetPassword
    ) -> TLObject:
        outcome = await self._passwords.reset(ctx.user_id, ctx.now)
        if isinstance(outcome, ResetDone):
            return types.account.ResetPasswordOk()
        return types.account.ResetPasswordRequestedWait(until_date=outcome.until)

    @method(functions.account.DeclinePasswordReset)
    async def decline_password_reset(
        self, ctx: AuthedContext, req: functions.account.DeclinePasswordReset
    ) -> bool:
        await self._passwords.decline_reset(ctx.user_id)
        return True
