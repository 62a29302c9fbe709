"""Login by QR code: a device that is not signed in shows a token, a signed-in one
accepts it, and the first device is then signed in to the accepting account.

The flow, as Telegram has it: auth.exportLoginToken answers a short-lived
token; auth.acceptLoginToken, from a signed-in device, marks it accepted and the waiting
device is told so (updateLoginToken, through ``on_accepted``); its next exportLoginToken
or importLoginToken logs its key in, exactly as auth.signIn does, and answers
auth.loginTokenSuccess. Tokens are random, single-use, expire after ``ttl`` seconds, and
live in Redis (``telesrv.store.login_tokens``) so that both devices may be served by
different server processes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.services.accounts import AuthorizationService, Device, new_authorization_hash
from telesrv.services.errors import (
    AuthTokenAlreadyAccepted,
    AuthTokenException,
    AuthTokenExpired,
    AuthTokenInvalid,
    DomainError,
    FloodWait,
    PhoneNumberBanned,
    SessionPasswordNeeded,
)
from telesrv.services.passwords import PasswordPolicy, Passwords, wait_for_password_txn
from telesrv.store import auth_keys as auth_keys_store
from telesrv.store import login_blocks
from telesrv.store import users as users_store
from telesrv.store.db import Db
from telesrv.store.login_tokens import Collected, LoginTokens, Status

TOKEN_BYTES = 32


@dataclass(frozen=True)
class QrLoginPolicy:
    ttl: float = 30.0  # seconds a token can be accepted (Telegram: 30)
    per_key_per_minute: int = 20  # exports per auth key per minute (0: no limit)
    global_per_minute: int = 30_000  # exports of all keys per minute (0: no limit)
    # Seconds a token is kept past its expiry or its acceptance: a late scan is told
    # "expired" rather than "invalid", and an accepted one waits this long to be used.
    keep: int = 300
    max_except_ids: int = 100  # more are ignored (an app holds a handful of accounts)


@dataclass(frozen=True, slots=True)
class NewToken:
    """auth.loginToken: show this (still waiting for a scan)."""

    token: bytes
    expires: int


@dataclass(frozen=True, slots=True)
class LoggedIn:
    """auth.loginTokenSuccess: the key is now signed in to this account."""

    user_id: int


LoginTokenOutcome = NewToken | LoggedIn


class QrLoginService:
    def __init__(
        self,
        db: Db,
        tokens: LoginTokens,
        authorizations: AuthorizationService,
        policy: QrLoginPolicy | None = None,
        random_bytes: Callable[[int], bytes] = os.urandom,
        passwords: Passwords | None = None,
    ) -> None:
        self._db = db
        self._tokens = tokens
        self._authorizations = authorizations
        self.policy = policy or QrLoginPolicy()
        self._random_bytes = random_bytes
        # As for auth.signIn: the wait's length is theirs, and they are told of it.
        self._passwords = passwords
        # Told the exporting key of each accepted token, after the fact: the server
        # pushes updateLoginToken to its sessions, in whichever process they are.
        self.on_accepted: Callable[[int], None] | None = None

    async def export(
        self, perm_auth_key_id: int, except_ids: Sequence[int], now: float
    ) -> LoginTokenOutcome:
        """auth.exportLoginToken: log in with the key's accepted token, else a new one."""
        current = await self._tokens.current(perm_auth_key_id)
        if current is not None:
            collected = await self._tokens.collect(current, perm_auth_key_id, now)
            if collected.status is Status.OK:
                return await self._log_in(perm_auth_key_id, collected, now)
        policy = self.policy
        # Per key first: a key over its own limit must not use up everyone's.
        wait = await self._tokens.key_rate_wait(perm_auth_key_id, policy.per_key_per_minute)
        if not wait:
            wait = await self._tokens.global_rate_wait(now, policy.global_per_minute)
        if wait:
            raise FloodWait(wait)
        token = self._random_bytes(TOKEN_BYTES)
        expires = int(now + policy.ttl)
        await self._tokens.issue(
            perm_auth_key_id,
            token,
            expires,
            except_ids[: policy.max_except_ids],
            int(policy.ttl) + policy.keep,
            replaces=current,
        )
        return NewToken(token, expires)

    async def import_(self, perm_auth_key_id: int, token: bytes, now: float) -> LoginTokenOutcome:
        """auth.importLoginToken: the key's own token only; answers it again while no
        one accepted it."""
        if len(token) != TOKEN_BYTES:
            raise AuthTokenInvalid()
        collected = await self._tokens.collect(token, perm_auth_key_id, now)
        if collected.status is Status.OK:
            return await self._log_in(perm_auth_key_id, collected, now)
        if collected.status is Status.WAITING:
            return NewToken(token, collected.expires)
        raise _refusal(collected.status)

    async def accept(self, user_id: int, token: bytes, now: float) -> Device:
        """auth.acceptLoginToken by a signed-in account: the device that will log in."""
        if len(token) != TOKEN_BYTES:
            raise AuthTokenInvalid()
        authorization_hash = new_authorization_hash()
        accepted = await self._tokens.accept(
            token, user_id, authorization_hash, now, int(self.policy.ttl) + self.policy.keep
        )
        if accepted.status is not Status.OK:
            raise _refusal(accepted.status)
        if self.on_accepted is not None:
            self.on_accepted(accepted.auth_key_id)
        # The waiting device as getAuthorizations will list it: what its client reported
        # in initConnection on the key that exported the token.
        client = await auth_keys_store.get_client_info(self._db.pool, accepted.auth_key_id)
        return Device(
            auth_key_id=accepted.auth_key_id,
            hash=authorization_hash,
            created_at=int(now),
            active_at=int(now),
            api_id=client.api_id if client else 0,
            device_model=client.device_model if client else "",
            system_version=client.system_version if client else "",
            app_version=client.app_version if client else "",
            layer=client.layer if client else None,
        )

    async def _log_in(self, perm_auth_key_id: int, collected: Collected, now: float) -> LoggedIn:
        """Bind the key to the accepting account, as auth.signIn does (and, as there, an
        account with a password makes the key wait for it: SessionPasswordNeeded)."""
        user_id = collected.user_id
        passwords = self._passwords
        password_wait = (
            PasswordPolicy.login_ttl if passwords is None else passwords.policy.login_ttl
        )

        async def txn(conn: asyncpg.Connection) -> bool:
            user = await users_store.get_user(conn, user_id)
            if user is None:
                raise AuthTokenInvalid()  # the account was deleted since it accepted
            # The account may have been barred between the scan and now.
            if await login_blocks.is_blocked(conn, user.phone):
                raise PhoneNumberBanned()
            if await wait_for_password_txn(conn, perm_auth_key_id, user_id, now, password_wait):
                return True
            await AuthorizationService.bind_txn(
                conn, perm_auth_key_id, user_id, now, hash=collected.authorization_hash
            )
            return False

        if await self._db.run_txn("qr_login", txn):
            if passwords is not None:
                await passwords.mark_waiting(perm_auth_key_id)
            raise SessionPasswordNeeded()
        self._authorizations.logged_in(perm_auth_key_id, user_id)
        return LoggedIn(user_id)


def _refusal(status: Status) -> DomainError:
    if status is Status.EXPIRED:
        return AuthTokenExpired()
    if status is Status.ACCEPTED:
        return AuthTokenAlreadyAccepted()
    if status is Status.EXCEPTED:
        return AuthTokenException()
    return AuthTokenInvalid()
