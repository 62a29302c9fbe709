"""Keys waiting for their account's password: only keys a sign-in made wait are looked up
in PostgreSQL (the others, any key not signed in, cost no query); the wait ends when the
password goes away, whichever way; QR sign-ins wait as long as the configured policy
says. Real PostgreSQL and Redis."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import datetime

import pytest
import redis.asyncio as aioredis
from conftest import MakeServer

from services.test_passwords import (
    CODE,
    NOW,
    POLICY,
    _with_policy,
    client_check,
    new_key,
    new_user,
    set_password,
    sign_in_code,
)
from telesrv.parts import AccountServices
from telesrv.rpc.context import RequestContext
from telesrv.server import Server
from telesrv.services import errors
from telesrv.services.accounts import to_datetime
from telesrv.services.admin import Admin
from telesrv.services.audit import AUDIT_LOGGER
from telesrv.services.passwords import Passwords, RemovePassword, ResetDone
from telesrv.services.qr_login import NewToken
from telesrv.store import passwords as passwords_store
from telesrv.store.db import Db, Executor
from telesrv.store.srp_sessions import SrpSessions
from telesrv.tl import functions, types


@pytest.fixture
def server(make_server: MakeServer) -> Server:
    return make_server(dev_login_code=CODE)


@pytest.fixture
def svc(server: Server) -> AccountServices:
    return _with_policy(server, POLICY)


@pytest.fixture
def passwords(svc: AccountServices) -> Passwords:
    assert svc.passwords is not None
    return svc.passwords


def sessions_of(passwords: Passwords) -> SrpSessions:
    return passwords._sessions


LoginUser = Callable[[Executor, int, datetime], Awaitable[int | None]]


def spy_login_user(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The keys whose wait is looked up in PostgreSQL."""
    looked_up: list[int] = []
    real: LoginUser = passwords_store.login_user

    async def spy(db: Executor, auth_key_id: int, now: datetime) -> int | None:
        looked_up.append(auth_key_id)
        return await real(db, auth_key_id, now)

    monkeypatch.setattr(passwords_store, "login_user", spy)
    return looked_up


async def test_a_key_that_never_signed_in_costs_no_query(
    svc: AccountServices, passwords: Passwords, db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, phone = await new_user(svc)
    await set_password(passwords, user, await new_key(db), "pw")
    looked_up = spy_login_user(monkeypatch)
    stranger = await new_key(db)
    for _ in range(3):
        assert not await passwords.is_waiting(stranger, NOW)
        assert await passwords.waiting_user(stranger, NOW) is None
    assert await passwords.complete_login(stranger, None, NOW) is None
    assert looked_up == []
    # auth.logOut of a key not signed in either.
    dropped: list[int] = []
    drop = passwords_store.drop_login

    async def spy_drop(db: Executor, auth_key_id: int) -> bool:
        dropped.append(auth_key_id)
        return await drop(db, auth_key_id)

    monkeypatch.setattr(passwords_store, "drop_login", spy_drop)
    assert not await passwords.cancel_login(stranger)
    assert dropped == []

    # A key the sign-in told SESSION_PASSWORD_NEEDED is marked, and looked up.
    device = await new_key(db)
    await sign_in_code(svc, phone, device)
    assert await sessions_of(passwords).is_marked_waiting(device)
    assert await passwords.is_waiting(device, NOW)
    assert looked_up == [device]

    # The password given: no longer marked.
    state = await passwords.state(user, device, NOW)
    assert await passwords.complete_login(device, client_check(state, "pw"), NOW) == user
    assert not await sessions_of(passwords).is_marked_waiting(device)


async def test_the_mark_goes_with_the_wait(
    svc: AccountServices, passwords: Passwords, db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, phone = await new_user(svc)
    await set_password(passwords, user, await new_key(db), "pw")
    sessions = sessions_of(passwords)
    device = await new_key(db)

    await sign_in_code(svc, phone, device)
    assert await passwords.cancel_login(device)  # auth.logOut
    assert not await sessions.is_marked_waiting(device)

    # A wait that expired: its first look-up drops the mark, later calls cost nothing.
    await sign_in_code(svc, phone, device)
    looked_up = spy_login_user(monkeypatch)
    late = NOW + POLICY.login_ttl
    assert not await passwords.is_waiting(device, late)
    assert not await sessions.is_marked_waiting(device)
    assert not await passwords.is_waiting(device, late)
    assert looked_up == [device]


async def wait_and_remove(
    svc: AccountServices,
    passwords: Passwords,
    db: Db,
    remove: Callable[[int, int], Awaitable[None]],
) -> None:
    """A key waits for the password; ``remove(user, owner's key)`` takes the password
    away: the key waits no more, is unmarked, and auth.checkPassword finds no wait."""
    user, phone = await new_user(svc)
    owner = await new_key(db)
    await set_password(passwords, user, owner, "pw")
    device, other = await new_key(db), await new_key(db)
    await sign_in_code(svc, phone, device)
    await sign_in_code(svc, phone, other)
    state = await passwords.state(user, device, NOW)

    await remove(user, owner)
    assert not await passwords.has_password(user)
    for key in (device, other):
        assert await passwords_store.login_user(db.pool, key, to_datetime(NOW)) is None
        assert not await passwords.is_waiting(key, NOW)
    assert await passwords.complete_login(device, client_check(state, "pw"), NOW) is None
    assert await svc.authorizations.user_for_key(device) is None
    # Signing in again now needs no password.
    sent = await svc.login.send_code(phone, NOW)
    signed = await svc.login.sign_in(phone, sent.phone_code_hash, CODE, device, NOW)
    assert signed is not None and signed.user_id == user


async def test_removing_the_password_ends_the_waits(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    async def remove(user: int, owner: int) -> None:
        state = await passwords.state(user, owner, NOW)
        check = client_check(state, "pw")
        await passwords.update(user, owner, check, RemovePassword(), None, NOW)

    await wait_and_remove(svc, passwords, db, remove)


async def test_a_reset_that_goes_through_ends_the_waits(
    svc: AccountServices, passwords: Passwords, db: Db, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="telesrv.services.passwords")

    async def remove(user: int, owner: int) -> None:
        await passwords.reset(user, NOW - POLICY.reset_delay)
        assert await passwords.reset(user, NOW) == ResetDone()

    await wait_and_remove(svc, passwords, db, remove)
    # The record of it: asked, then done.
    messages = [r.getMessage() for r in caplog.records]
    assert any("reset" in m and "asked" in m for m in messages)
    assert any("removed by its reset" in m for m in messages)


async def test_the_operator_removing_the_password_ends_the_waits(
    svc: AccountServices,
    passwords: Passwords,
    db: Db,
    redis: aioredis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger=AUDIT_LOGGER)
    admin = Admin(db, redis)

    async def remove(user: int, owner: int) -> None:
        assert await admin.remove_password(str(user))
        # The operator's removal is audited, with no key: no device asked for it.
        assert f"remove_password ok user={user} auth_key=- ip=- by=admin" in [
            r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER
        ]

    await wait_and_remove(svc, passwords, db, remove)


async def test_a_password_gone_unseen_ends_the_wait_at_the_check(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    """Whatever removed the row without ending the waits: the check ends the wait rather
    than answering PASSWORD_EMPTY until it expires."""
    user, phone = await new_user(svc)
    await set_password(passwords, user, await new_key(db), "pw")
    device = await new_key(db)
    await sign_in_code(svc, phone, device)
    state = await passwords.state(user, device, NOW)
    await db.pool.execute("DELETE FROM account_passwords WHERE user_id = $1", user)
    assert await passwords.is_waiting(device, NOW)
    assert await passwords.complete_login(device, client_check(state, "pw"), NOW) is None
    assert not await passwords.is_waiting(device, NOW)
    assert not await sessions_of(passwords).is_marked_waiting(device)


async def test_a_qr_sign_in_waits_as_long_as_the_policy_says(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    passwords.policy = dataclasses.replace(POLICY, login_ttl=100.0)
    qr = svc.qr_login
    assert qr is not None
    user, _ = await new_user(svc)
    await set_password(passwords, user, await new_key(db), "pw")
    device = await new_key(db)
    token = await qr.export(device, [], NOW)
    assert isinstance(token, NewToken)
    await qr.accept(user, token.token, NOW)
    with pytest.raises(errors.SessionPasswordNeeded):
        await qr.export(device, [], NOW)
    assert await sessions_of(passwords).is_marked_waiting(device)
    assert await passwords.is_waiting(device, NOW + 99)  # at the configured limit
    assert not await passwords.is_waiting(device, NOW + 100)  # past it


async def test_the_servers_dispatcher_asks_postgres_only_for_marked_keys(
    server: Server,
    svc: AccountServices,
    passwords: Passwords,
    db: Db,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before sign-in, calls that need it are answered AUTH_KEY_UNREGISTERED without a
    query, as before two-step verification; a waiting key is told SESSION_PASSWORD_NEEDED."""
    user, phone = await new_user(svc)
    await set_password(passwords, user, await new_key(db), "pw")
    device, stranger = await new_key(db), await new_key(db)
    await sign_in_code(svc, phone, device)
    looked_up = spy_login_user(monkeypatch)
    dispatcher = server.gateway.dispatcher
    request = functions.users.GetUsers(id=[types.InputUserSelf()])
    for key, expected in ((stranger, "AUTH_KEY_UNREGISTERED"), (device, "SESSION_PASSWORD_NEEDED")):
        ctx = RequestContext(auth_key_id=key, perm_auth_key_id=key, session_id=1, msg_id=4, now=NOW)
        outcome = await dispatcher.call(ctx, request)
        assert outcome.error is not None
        assert (outcome.error.code, outcome.error.message) == (401, expected)
    assert looked_up == [device]
