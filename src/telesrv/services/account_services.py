"""The account half of the service graph, built in one place for the server and tests."""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis

from telesrv.services.accounts import AccountEvents, AuthorizationService, NoAccountEvents
from telesrv.services.contacts import ContactService, PhoneLookupLimits
from telesrv.services.login import (
    CodeSender,
    FixedCodeSender,
    LogCodeSender,
    LoginPolicy,
    LoginService,
)
from telesrv.services.passwords import PasswordPolicy, Passwords
from telesrv.services.qr_login import QrLoginPolicy, QrLoginService
from telesrv.services.users import AccessHashes, ProjectionCache, UserProjection, UserService
from telesrv.store.counters import Counters
from telesrv.store.db import Db
from telesrv.store.login_tokens import LoginTokens
from telesrv.store.srp_sessions import SrpSessions


@dataclass(frozen=True)
class AccountServices:
    access_hashes: AccessHashes
    authorizations: AuthorizationService
    users: UserService
    projection: UserProjection
    login: LoginService
    contacts: ContactService
    events: AccountEvents
    # Login by QR code; None without Redis (where its tokens live).
    qr_login: QrLoginService | None = None
    # Two-step verification; None without Redis (where its exchanges live).
    passwords: Passwords | None = None


def code_sender_for(dev_login_code: str | None) -> CodeSender:
    return FixedCodeSender(dev_login_code) if dev_login_code else LogCodeSender()


def build_account_services(
    db: Db,
    *,
    access_secret: bytes,
    dev_login_code: str | None = None,
    auto_register: bool = False,
    events: AccountEvents | None = None,
    login_policy: LoginPolicy | None = None,
    counters: Counters | None = None,
    lookup_limits: PhoneLookupLimits | None = None,
    redis: aioredis.Redis | None = None,
    qr_policy: QrLoginPolicy | None = None,
    password_policy: PasswordPolicy | None = None,
) -> AccountServices:
    """``events`` is where contact/block/profile changes reach the update log; without
    it they are stored but no event is written (NoAccountEvents)."""
    events = events or NoAccountEvents()
    access_hashes = AccessHashes(access_secret)
    authorizations = AuthorizationService(db)
    policy = login_policy or LoginPolicy(auto_register=auto_register)
    projections = ProjectionCache()
    return AccountServices(
        access_hashes=access_hashes,
        authorizations=authorizations,
        users=UserService(db, events, projections),
        projection=UserProjection(db, access_hashes, projections),
        login=LoginService(db, code_sender_for(dev_login_code), authorizations, policy),
        contacts=ContactService(
            db, events, counters=counters, lookup_limits=lookup_limits, projections=projections
        ),
        events=events,
        qr_login=None
        if redis is None
        else QrLoginService(db, LoginTokens(redis), authorizations, qr_policy),
        passwords=None
        if redis is None
        else Passwords(db, SrpSessions(redis), authorizations, password_policy),
    )
