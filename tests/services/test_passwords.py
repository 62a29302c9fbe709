"""Two-step verification on real PostgreSQL and Redis: setting, changing and removing a
password, the single-use exchanges, sign-ins that wait for the password, attempts per
key and per account, reset and recovery. Telethon's client side plays the client."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
from typing import Any

import pytest
from conftest import MakeServer
from telethon import password as client_side
from telethon.tl import types as ttypes

from telesrv.parts import AccountServices
from telesrv.server import Server
from telesrv.services import errors, srp
from telesrv.services.passwords import (
    MAX_SALT_BYTES,
    NewPassword,
    PasswordPolicy,
    Passwords,
    PasswordState,
    RemovePassword,
    ResetDone,
    ResetRequested,
    SrpCheck,
)
from telesrv.store import auth_keys
from telesrv.store import passwords as passwords_store
from telesrv.store.db import Db

CODE = "24680"
NOW = 1_800_000_000.0
POLICY = PasswordPolicy(key_attempts=100, account_attempts=100)
# Small limits for the tests of the limits.
LIMITED = PasswordPolicy(key_attempts=3, account_attempts=5)
_phones = itertools.count(15550900000)


def _with_policy(server: Server, policy: PasswordPolicy) -> AccountServices:
    accounts = server.accounts
    assert accounts is not None and accounts.passwords is not None
    accounts.passwords.policy = policy
    return accounts


@pytest.fixture
def svc(make_server: MakeServer) -> AccountServices:
    return _with_policy(make_server(dev_login_code=CODE), POLICY)


@pytest.fixture
def passwords(svc: AccountServices) -> Passwords:
    assert svc.passwords is not None
    return svc.passwords


@pytest.fixture
def limited(make_server: MakeServer) -> Passwords:
    passwords = _with_policy(make_server(), LIMITED).passwords
    assert passwords is not None
    return passwords


async def new_user(svc: AccountServices) -> tuple[int, str]:
    phone = f"+{next(_phones)}"
    return (await svc.users.create(phone, "Alice")).user_id, phone


async def new_key(db: Db) -> int:
    key_id = int.from_bytes(os.urandom(8), "little", signed=True)
    assert await auth_keys.save_auth_key(db.pool, key_id, os.urandom(256))
    return key_id


def client_check(state: PasswordState, password: str) -> SrpCheck:
    """What a client answers for the exchange ``state`` offers (Telethon's own code)."""
    offered = ttypes.account.Password(
        new_algo=ttypes.PasswordKdfAlgoUnknown(),
        new_secure_algo=ttypes.SecurePasswordKdfAlgoUnknown(),
        secure_random=b"",
        has_password=True,
        current_algo=ttypes.PasswordKdfAlgoSHA256SHA256PBKDF2HMACSHA512iter100000SHA256ModPow(
            salt1=state.salt1, salt2=state.salt2, g=srp.G, p=srp.P_BYTES
        ),
        srp_B=state.srp_b,
        srp_id=state.srp_id,
    )
    check = client_side.compute_check(offered, password)
    return SrpCheck(srp_id=check.srp_id, a=check.A, m1=check.M1)


def new_password(state: PasswordState, password: str, hint: str = "") -> NewPassword:
    """A new password as a client makes it from account.getPassword's new_algo."""
    salt1 = state.new_salt1 + os.urandom(32)
    return NewPassword(
        salt1=salt1,
        salt2=state.new_salt2,
        g=srp.G,
        p=srp.P_BYTES,
        verifier=srp.verifier_of(password.encode(), salt1, state.new_salt2),
        hint=hint,
    )


async def set_password(
    passwords: Passwords, user_id: int, key: int, password: str, hint: str = ""
) -> None:
    state = await passwords.state(user_id, key, NOW)
    assert not state.has_password, "set_password is for accounts without one"
    await passwords.update(user_id, key, None, new_password(state, password, hint), None, NOW)


async def prove(
    passwords: Passwords, user_id: int, key: int, password: str, now: float = NOW
) -> None:
    state = await passwords.state(user_id, key, now)
    await passwords.verify(user_id, key, client_check(state, password), now)


# -- setting, checking, changing, removing ----------------------------------------------


async def test_set_check_change_and_remove(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    user, _ = await new_user(svc)
    key = await new_key(db)
    state = await passwords.state(user, key, NOW)
    assert not state.has_password and state.srp_b == b"" and len(state.new_salt1) == 8
    assert len(state.secure_random) == 32 and len(state.new_secure_salt) == 8

    await set_password(passwords, user, key, "first", hint="the first")
    state = await passwords.state(user, key, NOW)
    assert state.has_password and state.hint == "the first"
    assert len(state.srp_b) == srp.SIZE and len(state.salt1) == 40
    await passwords.verify(user, key, client_check(state, "first"), NOW)

    state = await passwords.state(user, key, NOW)
    with pytest.raises(errors.PasswordHashInvalid):
        await passwords.verify(user, key, client_check(state, "second"), NOW)

    # Changing it needs the current one.
    state = await passwords.state(user, key, NOW)
    with pytest.raises(errors.PasswordHashInvalid):
        await passwords.update(user, key, None, new_password(state, "second"), None, NOW)
    await passwords.update(
        user, key, client_check(state, "first"), new_password(state, "second"), None, NOW
    )
    await prove(passwords, user, key, "second")
    state = await passwords.state(user, key, NOW)
    with pytest.raises(errors.PasswordHashInvalid):
        await passwords.verify(user, key, client_check(state, "first"), NOW)

    state = await passwords.state(user, key, NOW)
    await passwords.update(user, key, client_check(state, "second"), RemovePassword(), None, NOW)
    assert not await passwords.has_password(user)
    with pytest.raises(errors.NewSettingsEmpty):  # nothing left to remove
        await passwords.update(user, key, None, RemovePassword(), None, NOW)
    with pytest.raises(errors.PasswordEmpty):
        await passwords.verify(user, key, None, NOW)


async def test_an_exchange_is_single_use_bound_to_key_and_account_and_expires(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    user, _ = await new_user(svc)
    other_user, _ = await new_user(svc)
    key, other_key = await new_key(db), await new_key(db)
    await set_password(passwords, user, key, "pw")
    await set_password(passwords, other_user, other_key, "pw")

    state = await passwords.state(user, key, NOW)
    check = client_check(state, "pw")
    with pytest.raises(errors.SrpIdInvalid):  # another key cannot use it
        await passwords.verify(user, other_key, check, NOW)
    await passwords.verify(user, key, check, NOW)
    with pytest.raises(errors.SrpIdInvalid):  # used once
        await passwords.verify(user, key, check, NOW)

    state = await passwords.state(user, key, NOW)
    check = client_check(state, "pw")
    with pytest.raises(errors.SrpIdInvalid):  # nor a check for another account...
        await passwords.verify(other_user, key, check, NOW)
    with pytest.raises(errors.SrpIdInvalid):  # ...which spent it
        await passwords.verify(user, key, check, NOW)

    # A getPassword while the key's exchange has half its time left offers it again (no
    # new secret drawn); past that a new one replaces it.
    ttl = POLICY.srp_ttl
    older = await passwords.state(user, key, NOW)
    again = await passwords.state(user, key, NOW + ttl / 2)
    assert (again.srp_id, again.srp_b) == (older.srp_id, older.srp_b)
    newer = await passwords.state(user, key, NOW + ttl / 2 + 1)
    assert newer.srp_id != older.srp_id and newer.srp_b != older.srp_b
    with pytest.raises(errors.SrpIdInvalid):
        await passwords.verify(user, key, client_check(older, "pw"), NOW)
    await passwords.verify(user, key, client_check(newer, "pw"), NOW)

    state = await passwords.state(user, key, NOW)
    await passwords.verify(user, key, client_check(state, "pw"), NOW + ttl - 1)  # last second
    state = await passwords.state(user, key, NOW)
    with pytest.raises(errors.SrpIdInvalid):
        await passwords.verify(user, key, client_check(state, "pw"), NOW + ttl)  # expired


async def test_a_password_changed_since_the_exchange(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    user, _ = await new_user(svc)
    key, laptop = await new_key(db), await new_key(db)
    await set_password(passwords, user, key, "old")
    stale = await passwords.state(user, laptop, NOW)
    state = await passwords.state(user, key, NOW)
    await passwords.update(
        user, key, client_check(state, "old"), new_password(state, "new"), None, NOW
    )
    with pytest.raises(errors.SrpPasswordChanged):
        await passwords.verify(user, laptop, client_check(stale, "old"), NOW)


async def test_a_write_goes_only_over_the_password_proved(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    user, _ = await new_user(svc)
    await set_password(passwords, user, await new_key(db), "pw")
    row = await passwords_store.get_password(db.pool, user)
    assert row is not None
    when = row.updated_at
    # Another device changed it between this one's proof and its write: nothing is written.
    # The same salts with another verifier are another password too (a client may reuse
    # the salts it was offered).
    others = [
        dataclasses.replace(row, salt1=b"another salt1"),
        dataclasses.replace(row, salt2=b"another salt2"),
        dataclasses.replace(row, verifier=srp.pad(3)),
    ]
    for replaces in (None, *others):
        assert not await passwords_store.set_password(
            db.pool, user, b"s1", b"s2", srp.pad(2), "", when, replaces=replaces
        )
    for other in others:
        assert not await passwords_store.delete_password(db.pool, other)
    assert await passwords_store.get_password(db.pool, user) == row
    assert await passwords_store.delete_password(db.pool, row)


async def test_new_settings_are_checked(svc: AccountServices, passwords: Passwords, db: Db) -> None:
    user, _ = await new_user(svc)
    key = await new_key(db)
    state = await passwords.state(user, key, NOW)
    good = new_password(state, "pw")
    bad: list[tuple[NewPassword, type[Exception]]] = [
        (dataclasses.replace(good, salt1=os.urandom(40)), errors.NewSaltInvalid),
        (dataclasses.replace(good, salt1=state.new_salt1), errors.NewSaltInvalid),  # not extended
        (
            dataclasses.replace(good, salt1=state.new_salt1 + os.urandom(MAX_SALT_BYTES - 7)),
            errors.NewSaltInvalid,
        ),
        (dataclasses.replace(good, salt2=b""), errors.NewSaltInvalid),
        (dataclasses.replace(good, salt2=os.urandom(MAX_SALT_BYTES + 1)), errors.NewSaltInvalid),
        (dataclasses.replace(good, g=2), errors.NewSettingsInvalid),
        (dataclasses.replace(good, p=srp.pad(srp.P - 2)), errors.NewSettingsInvalid),
        (dataclasses.replace(good, verifier=srp.pad(1)), errors.NewSettingsInvalid),
        (dataclasses.replace(good, verifier=b"\x01" + good.verifier), errors.NewSettingsInvalid),
        (dataclasses.replace(good, hint="h" * (POLICY.max_hint + 1)), errors.NewSettingsInvalid),
    ]
    for settings, refusal in bad:
        with pytest.raises(refusal):
            await passwords.update(user, key, None, settings, None, NOW)
    with pytest.raises(errors.EmailNotAllowed):
        await passwords.update(user, key, None, good, "alice@example.com", NOW)
    assert not await passwords.has_password(user)

    # At the limits: the longest salts and hint are taken.
    salt1 = state.new_salt1 + os.urandom(MAX_SALT_BYTES - len(state.new_salt1))
    salt2 = os.urandom(MAX_SALT_BYTES)
    longest = dataclasses.replace(
        good,
        salt1=salt1,
        salt2=salt2,
        verifier=srp.verifier_of(b"pw", salt1, salt2),
        hint="h" * POLICY.max_hint,
    )
    await passwords.update(user, key, None, longest, None, NOW)
    assert (await passwords.state(user, key, NOW)).hint == "h" * POLICY.max_hint
    await prove(passwords, user, key, "pw")


# -- sign-ins that wait for the password --------------------------------------------------


async def sign_in_code(svc: AccountServices, phone: str, key: int) -> None:
    sent = await svc.login.send_code(phone, NOW)
    with pytest.raises(errors.SessionPasswordNeeded):
        await svc.login.sign_in(phone, sent.phone_code_hash, CODE, key, NOW)


async def test_a_sign_in_waits_for_the_password(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    user, phone = await new_user(svc)
    await set_password(passwords, user, await new_key(db), "pw")
    device = await new_key(db)
    await sign_in_code(svc, phone, device)
    assert await svc.authorizations.user_for_key(device) is None  # not signed in
    assert await passwords.is_waiting(device, NOW)
    assert await passwords.waiting_user(device, NOW) == user

    state = await passwords.state(user, device, NOW)
    with pytest.raises(errors.PasswordHashInvalid):
        await passwords.complete_login(device, client_check(state, "wrong"), NOW)
    assert await svc.authorizations.user_for_key(device) is None
    state = await passwords.state(user, device, NOW)
    assert await passwords.complete_login(device, client_check(state, "pw"), NOW) == user
    assert await svc.authorizations.user_for_key(device) == user
    assert not await passwords.is_waiting(device, NOW)
    # A key that waits for nothing has nothing to complete.
    assert await passwords.complete_login(device, None, NOW) is None


async def test_the_wait_expires_and_can_be_given_up(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    user, phone = await new_user(svc)
    await set_password(passwords, user, await new_key(db), "pw")
    device = await new_key(db)
    await sign_in_code(svc, phone, device)
    assert await passwords.is_waiting(device, NOW + POLICY.login_ttl - 1)
    assert not await passwords.is_waiting(device, NOW + POLICY.login_ttl)
    state = await passwords.state(user, device, NOW)
    late = NOW + POLICY.login_ttl
    assert await passwords.complete_login(device, client_check(state, "pw"), late) is None

    await sign_in_code(svc, phone, device)
    assert await passwords.cancel_login(device)
    assert not await passwords.is_waiting(device, NOW)
    assert not await passwords.cancel_login(device)

    # A waiting key is never signed in, so it may be collected as unused; its wait goes.
    await sign_in_code(svc, phone, device)
    assert await auth_keys.delete_auth_key(db.pool, device)
    assert not await passwords.is_waiting(device, NOW)


async def test_a_sign_in_elsewhere_ends_the_wait(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    user, phone = await new_user(svc)
    _, other_phone = await new_user(svc)
    await set_password(passwords, user, await new_key(db), "pw")
    device = await new_key(db)
    await sign_in_code(svc, phone, device)
    sent = await svc.login.send_code(other_phone, NOW)
    await svc.login.sign_in(other_phone, sent.phone_code_hash, CODE, device, NOW)
    assert not await passwords.is_waiting(device, NOW)


# -- attempts --------------------------------------------------------------------------------


async def test_attempts_per_key(svc: AccountServices, limited: Passwords, db: Db) -> None:
    user, _ = await new_user(svc)
    key = await new_key(db)
    await set_password(limited, user, key, "pw")
    for _ in range(LIMITED.key_attempts):  # up to the limit: each is checked
        state = await limited.state(user, key, NOW)
        with pytest.raises(errors.PasswordHashInvalid):
            await limited.verify(user, key, client_check(state, "guess"), NOW)
    state = await limited.state(user, key, NOW)
    with pytest.raises(errors.FloodWait) as flood:  # one past: refused, right or not
        await limited.verify(user, key, client_check(state, "pw"), NOW)
    assert 0 < flood.value.seconds <= LIMITED.key_window
    # The limit is the key's: another key of the account still may try.
    await prove(limited, user, await new_key(db), "pw")


async def test_attempts_per_account(svc: AccountServices, limited: Passwords, db: Db) -> None:
    user, _ = await new_user(svc)
    await set_password(limited, user, await new_key(db), "pw")
    for _ in range(LIMITED.account_attempts):  # each from a new key: only the account counts
        key = await new_key(db)
        state = await limited.state(user, key, NOW)
        with pytest.raises(errors.PasswordHashInvalid):
            await limited.verify(user, key, client_check(state, "guess"), NOW)
    key = await new_key(db)
    state = await limited.state(user, key, NOW)
    with pytest.raises(errors.FloodWait) as flood:
        await limited.verify(user, key, client_check(state, "pw"), NOW)
    assert 0 < flood.value.seconds <= LIMITED.account_window


# -- reset and recovery ----------------------------------------------------------------------


async def test_reset_after_the_delay_and_declining_it(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    user, _ = await new_user(svc)
    key = await new_key(db)
    with pytest.raises(errors.PasswordEmpty):
        await passwords.reset(user, NOW)
    await set_password(passwords, user, key, "pw")
    until = int(NOW + POLICY.reset_delay)
    assert await passwords.reset(user, NOW) == ResetRequested(until)
    assert await passwords.reset(user, NOW + 10) == ResetRequested(until)  # the first holds
    assert (await passwords.state(user, key, NOW)).pending_reset_date == until
    await passwords.decline_reset(user)
    with pytest.raises(errors.ResetRequestMissing):
        await passwords.decline_reset(user)
    assert (await passwords.state(user, key, NOW)).pending_reset_date is None

    until = int(NOW + 100 + POLICY.reset_delay)
    assert await passwords.reset(user, NOW + 100) == ResetRequested(until)
    assert await passwords.reset(user, until - 1) == ResetRequested(until)
    assert await passwords.reset(user, until) == ResetDone()
    assert not await passwords.has_password(user)


async def test_recovery_without_email_is_refused(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    user, _ = await new_user(svc)
    with pytest.raises(errors.PasswordEmpty):
        await passwords.recovery(user)
    await set_password(passwords, user, await new_key(db), "pw")
    with pytest.raises(errors.PasswordRecoveryNa):
        await passwords.recovery(user)


# -- the verifier stays inside ------------------------------------------------------------


async def test_the_verifier_is_never_answered_nor_logged(
    svc: AccountServices, passwords: Passwords, db: Db, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    user, phone = await new_user(svc)
    key = await new_key(db)
    await set_password(passwords, user, key, "pw")
    row = await passwords_store.get_password(db.pool, user)
    assert row is not None
    verifier = row.verifier
    state = await passwords.state(user, key, NOW)
    answered: list[Any] = [getattr(state, f.name) for f in dataclasses.fields(state)]
    assert verifier not in answered and all(verifier.hex() not in str(value) for value in answered)
    assert verifier.hex() not in repr(row) and verifier.hex() not in repr(new_password(state, "pw"))
    device = await new_key(db)
    await sign_in_code(svc, phone, device)
    state = await passwords.state(user, device, NOW)
    with pytest.raises(errors.PasswordHashInvalid):
        await passwords.complete_login(device, client_check(state, "x"), NOW)
    assert verifier.hex() not in caplog.text
