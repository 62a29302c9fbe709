"""Audit lines with unmodified Telethon for the other ways a key is signed in or out:
the two-step password check (wrong, then right), a QR login accepted, and one
device ended by another (account.resetAuthorization)."""

from __future__ import annotations

import logging

import pytest
from telethon import TelegramClient, errors
from telethon.tl import functions, types

from telesrv.rpc.audit import AUDIT_LOGGER

from .conftest import API_HASH, API_ID, ClientFactory
from .test_messages import CODE

PASSWORD = "tr0ub4dor&3"


def key_of(client: TelegramClient) -> str:
    key_id = client.session.auth_key.key_id
    assert isinstance(key_id, int)
    return f"{key_id & ((1 << 64) - 1):016x}"


async def signed_in(make_client: ClientFactory, phone: str) -> TelegramClient:
    client = make_client()
    await client.start(phone=phone, code_callback=lambda: CODE)
    return client


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]


async def test_password_check_qr_accept_and_device_reset_are_audited(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    phone = "+15550770101"
    alice = await signed_in(make_client, phone)
    me = await alice.get_me()
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)

    waiting = make_client()
    await waiting.connect()
    shown = await waiting(functions.auth.ExportLoginTokenRequest(API_ID, API_HASH, []))
    assert isinstance(shown, types.auth.LoginToken)
    accepted = await alice(functions.auth.AcceptLoginTokenRequest(shown.token))
    success = await waiting(functions.auth.ExportLoginTokenRequest(API_ID, API_HASH, []))
    assert isinstance(success, types.auth.LoginTokenSuccess)
    assert await alice(functions.account.ResetAuthorizationRequest(accepted.hash))

    assert await alice.edit_2fa(new_password=PASSWORD)
    device = make_client()
    await device.connect()
    await device.send_code_request(phone)
    with pytest.raises(errors.SessionPasswordNeededError):
        await device.sign_in(phone, code=CODE)
    with pytest.raises(errors.PasswordHashInvalidError):
        await device.sign_in(password=PASSWORD + "!")
    await device.sign_in(password=PASSWORD)

    a, d, w = key_of(alice), key_of(device), key_of(waiting)
    at = "ip=127.0.0.1"
    assert audit_lines(caplog) == [
        f"qr_accept ok user={me.id} auth_key={a} {at} signed_in_key={w}",
        f"qr_sign_in ok user={me.id} auth_key={w} {at}",
        f"reset_authorization ok user={me.id} auth_key={a} {at} ended_key={w}",
        f"update_password ok user={me.id} auth_key={a} {at}",
        f"sign_in password_needed user=- auth_key={d} {at}",
        f"check_password refused:PasswordHashInvalid user=- auth_key={d} {at}",
        f"check_password ok user={me.id} auth_key={d} {at}",
    ]
    text = "\n".join(audit_lines(caplog))
    assert PASSWORD not in text and "tr0ub" not in text
