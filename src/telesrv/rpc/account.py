"""account.*: devices, profile, username, online status."""

from __future__ import annotations

from telesrv.rpc.account_common import origin
from telesrv.rpc.audit import audit, audit_refusal, key_hex
from telesrv.rpc.context import AuthedContext
from telesrv.rpc.profile_pushes import ProfilePushes
from telesrv.rpc.registry import method
from telesrv.rpc.users_tl import UsersTl
from telesrv.services.accounts import AUTHORIZATION_TTL_DAYS, AuthorizationService, Device
from telesrv.services.users import UserService
from telesrv.tl import TLObject, functions, types


def device_to_tl(device: Device, current: bool) -> types.Authorization:
    # initConnection reports no app name; the api_id and layer identify the client.
    layer = f", layer {device.layer}" if device.layer is not None else ""
    return types.Authorization(
        current=current,
        hash=0 if current else device.hash,
        device_model=device.device_model,
        platform="",
        system_version=device.system_version,
        api_id=device.api_id,
        app_name=f"api_id {device.api_id}{layer}",
        app_version=device.app_version,
        date_created=device.created_at,
        date_active=device.active_at,
        ip="",
        country="",
        region="",
    )


class AccountHandlers:
    def __init__(
        self,
        users: UserService,
        authorizations: AuthorizationService,
        users_tl: UsersTl,
        profile_pushes: ProfilePushes | None = None,
    ) -> None:
        self._users = users
        self._authorizations = authorizations
        self._users_tl = users_tl
        self._pushes = profile_pushes  # None: changes are stored, not pushed

    @method(functions.account.GetAuthorizations)
    async def get_authorizations(
        self, ctx: AuthedContext, req: functions.account.GetAuthorizations
    ) -> TLObject:
        devices = await self._authorizations.devices(ctx.user_id)
        return types.account.Authorizations(
            authorization_ttl_days=AUTHORIZATION_TTL_DAYS,
            authorizations=[
                device_to_tl(d, d.auth_key_id == ctx.perm_auth_key_id) for d in devices
            ],
        )

    @method(functions.account.ResetAuthorization)
    async def reset_authorization(
        self, ctx: AuthedContext, req: functions.account.ResetAuthorization
    ) -> bool:
        with audit_refusal("reset_authorization", ctx, ctx.user_id):
            key = await self._authorizations.reset_by_hash(ctx.user_id, req.hash)
        ctx.sessions.close_key(key)
        audit("reset_authorization", ctx, ctx.user_id, ended_key=key_hex(key))
        return True

    @method(functions.account.UpdateProfile)
    async def update_profile(
        self, ctx: AuthedContext, req: functions.account.UpdateProfile
    ) -> TLObject:
        account = await self._users.update_profile(
            ctx.user_id,
            first_name=req.first_name,
            last_name=req.last_name,
            about=req.about,
            origin=origin(ctx),
        )
        if self._pushes is not None and (req.first_name is not None or req.last_name is not None):
            self._pushes.name_changed(
                ctx.user_id,
                account.first_name,
                account.last_name,
                account.username,
                origin(ctx),
                ctx.now,
            )
        return await self._users_tl.one(ctx.user_id, ctx.user_id, ctx.now)

    @method(functions.account.UpdateUsername)
    async def update_username(
        self, ctx: AuthedContext, req: functions.account.UpdateUsername
    ) -> TLObject:
        account = await self._users.update_username(ctx.user_id, req.username, origin(ctx))
        if self._pushes is not None:
            # No updateUsername in this layer: updateUserName carries the usernames.
            self._pushes.name_changed(
                ctx.user_id,
                account.first_name,
                account.last_name,
                account.username,
                origin(ctx),
                ctx.now,
            )
        return await self._users_tl.one(ctx.user_id, ctx.user_id, ctx.now)

    @method(functions.account.CheckUsername)
    async def check_username(
        self, ctx: AuthedContext, req: functions.account.CheckUsername
    ) -> bool:
        return await self._users.username_available(ctx.user_id, req.username)

    @method(functions.account.UpdateStatus)
    async def update_status(self, ctx: AuthedContext, req: functions.account.UpdateStatus) -> bool:
        await self._users.set_status(ctx.user_id, offline=bool(req.offline), now=ctx.now)
        if self._pushes is not None:
            self._pushes.status_changed(ctx.user_id, offline=bool(req.offline), now=ctx.now)
        await self._authorizations.touch(ctx.perm_auth_key_id, ctx.now)
        return True
