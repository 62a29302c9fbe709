"""Two-step verification through unmodified Telethon: Alice sets a password, a new device
that gives her login code is not signed in until it gives the password too, a wrong one
is refused, and password attempts are rate limited."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from telethon import TelegramClient, errors, functions, types

from telesrv.services.passwords import PasswordPolicy

from .conftest import API_HASH, API_ID, ClientFactory
from .test_messages import CODE, sign_in
from .test_send_limits import error_of

_passwords = itertools.count(1)


async def with_password(make_client: ClientFactory, hint: str = "") -> tuple[TelegramClient, str]:
    """A signed-in account that set a password (and the password)."""
    alice = await sign_in(make_client, updates=False)
    password = f"correct horse {next(_passwords)}"
    assert await alice.edit_2fa(new_password=password, hint=hint)
    return alice, password


async def waiting_device(make_client: ClientFactory, phone: str) -> TelegramClient:
    """A new device that gave the account's login code: it now owes the password."""
    device = make_client()
    device.flood_sleep_threshold = 0  # answer FLOOD_WAIT as an error, never sleep on it
    await device.connect()
    await device.send_code_request(phone)
    with pytest.raises(errors.SessionPasswordNeededError):
        await device.sign_in(phone, code=CODE)
    return device


def get_self() -> Any:
    return functions.users.GetUsersRequest([types.InputUserSelf()])


async def test_a_new_device_needs_the_password_and_a_wrong_one_is_refused(
    make_client: ClientFactory,
) -> None:
    alice, password = await with_password(make_client, hint="a horse")
    me = await alice.get_me()
    state = await alice(functions.account.GetPasswordRequest())
    assert state.has_password and state.hint == "a horse"
    assert isinstance(
        state.current_algo, types.PasswordKdfAlgoSHA256SHA256PBKDF2HMACSHA512iter100000SHA256ModPow
    )

    device = await waiting_device(make_client, f"+{me.phone}")
    # Not signed in until the password: any other call is told so.
    assert await error_of(device(get_self())) == "SESSION_PASSWORD_NEEDED"
    assert not await device.is_user_authorized()
    # What the password screen shows: the hint, over the waiting key.
    shown = await device(functions.account.GetPasswordRequest())
    assert shown.has_password and shown.hint == "a horse"

    with pytest.raises(errors.PasswordHashInvalidError):
        await device.sign_in(password=password + "!")
    assert await error_of(device(get_self())) == "SESSION_PASSWORD_NEEDED"

    signed = await device.sign_in(password=password)
    assert signed.id == me.id
    (user,) = await device(get_self())
    assert user.id == me.id and user.is_self
    listed = await alice(functions.account.GetAuthorizationsRequest())
    assert len(listed.authorizations) == 2


async def test_password_settings_need_the_password(make_client: ClientFactory) -> None:
    alice, password = await with_password(make_client)
    from telethon.password import compute_check

    state = await alice(functions.account.GetPasswordRequest())
    settings = await alice(
        functions.account.GetPasswordSettingsRequest(compute_check(state, password))
    )
    assert isinstance(settings, types.account.PasswordSettings) and settings.email is None
    state = await alice(functions.account.GetPasswordRequest())
    wrong = alice(functions.account.GetPasswordSettingsRequest(compute_check(state, "nope")))
    assert await error_of(wrong) == "PASSWORD_HASH_INVALID"
    # An exchange serves one check: the one just used is gone.
    reused = alice(functions.account.GetPasswordSettingsRequest(compute_check(state, password)))
    assert await error_of(reused) == "SRP_ID_INVALID"


async def test_change_and_remove_the_password(make_client: ClientFactory) -> None:
    alice, password = await with_password(make_client)
    phone = f"+{(await alice.get_me()).phone}"
    with pytest.raises(errors.PasswordHashInvalidError):
        await alice.edit_2fa(current_password="not it", new_password="other")
    assert await alice.edit_2fa(current_password=password, new_password="second one")

    device = await waiting_device(make_client, phone)
    with pytest.raises(errors.PasswordHashInvalidError):
        await device.sign_in(password=password)  # the old one no longer works
    assert (await device.sign_in(password="second one")).phone == phone[1:]

    assert await alice.edit_2fa(current_password="second one")  # removed
    assert not (await alice(functions.account.GetPasswordRequest())).has_password
    fresh = await sign_in(make_client, phone, updates=False)  # no password asked now
    assert (await fresh.get_me()).phone == phone[1:]


async def test_a_recovery_email_and_recovery_are_refused(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    refused = alice.edit_2fa(
        new_password="with mail", email="alice@example.com", email_code_callback=lambda n: "1"
    )
    assert await error_of(refused) == "EMAIL_NOT_ALLOWED"
    assert not (await alice(functions.account.GetPasswordRequest())).has_password

    alice, _ = await with_password(make_client)
    device = await waiting_device(make_client, f"+{(await alice.get_me()).phone}")
    recovery = device(functions.auth.RequestPasswordRecoveryRequest())
    assert await error_of(recovery) == "PASSWORD_RECOVERY_NA"


async def test_a_waiting_device_may_log_out(make_client: ClientFactory) -> None:
    alice, _ = await with_password(make_client)
    device = await waiting_device(make_client, f"+{(await alice.get_me()).phone}")
    assert await device.log_out()
    device = make_client()
    await device.connect()
    assert await error_of(device(get_self())) == "AUTH_KEY_UNREGISTERED"


async def test_password_attempts_are_limited_per_key(make_client: ClientFactory) -> None:
    alice, password = await with_password(make_client)
    device = await waiting_device(make_client, f"+{(await alice.get_me()).phone}")
    limit = PasswordPolicy().key_attempts
    for _ in range(limit):  # up to the limit: each wrong password is told so
        with pytest.raises(errors.PasswordHashInvalidError):
            await device.sign_in(password="guess")
    # One past it: refused before the password is even looked at, right or wrong.
    with pytest.raises(errors.FloodWaitError) as flood:
        await device.sign_in(password=password)
    assert 0 < flood.value.seconds <= PasswordPolicy().key_window
    assert await error_of(device(get_self())) == "SESSION_PASSWORD_NEEDED"


async def test_qr_login_of_an_account_with_a_password_waits_for_it(
    make_client: ClientFactory,
) -> None:
    alice, password = await with_password(make_client)
    waiting = make_client()
    await waiting.connect()
    export = functions.auth.ExportLoginTokenRequest(API_ID, API_HASH, [])
    shown = await waiting(export)
    await alice(functions.auth.AcceptLoginTokenRequest(shown.token))
    with pytest.raises(errors.SessionPasswordNeededError):
        await waiting(export)
    assert await error_of(waiting(get_self())) == "SESSION_PASSWORD_NEEDED"
    assert (await waiting.sign_in(password=password)).id == (await alice.get_me()).id
