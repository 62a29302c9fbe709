"""The audit log with unmodified Telethon: sign-up, sign-in (and a refused one),
logout and a session reset each leave one INFO line on ``telesrv.audit`` with the
account, the auth key and the client's address, and never the code."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from telethon import TelegramClient, errors, functions
from telethon.crypto import rsa as telethon_rsa

from telesrv.app import open_resources
from telesrv.rpc.audit import AUDIT_LOGGER
from telesrv.wiring import build_server

from .conftest import ClientFactory, RunningServer, e2e_settings

CODE = "97531"
PHONE = "+15550770001"


@pytest.fixture(scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, redis: Any
) -> AsyncIterator[RunningServer]:
    """Without --auto-register, so that a new phone signs up (auth.signUp)."""
    data_dir: Path = tmp_path_factory.mktemp("telesrv-data")
    settings = e2e_settings(
        data_dir, database_url, redis_url, dev_login_code=CODE, auto_register=False
    )
    async with open_resources(settings) as resources:
        server = build_server(settings, resources)
        host, port = await server.start(settings.listen_host, settings.listen_port)
        telethon_rsa.add_key(resources.server_key.public_pem, old=False)
        try:
            yield RunningServer(settings, resources, server, host, port)
        finally:
            await server.stop()


def key_of(client: TelegramClient) -> str:
    key_id = client.session.auth_key.key_id
    assert isinstance(key_id, int)
    return f"{key_id & ((1 << 64) - 1):016x}"


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]


def without_ids(line: str) -> str:
    """The line without its numbers that could contain the code's digits by chance."""
    return re.sub(r"(user|auth_key|ended_keys)=\S+", "", line)


async def test_sign_up_sign_in_logout_and_reset_are_audited(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    first = make_client()
    await first.connect()
    sent = await first.send_code_request(PHONE)
    with pytest.raises(errors.PhoneNumberUnoccupiedError):
        await first.sign_in(PHONE, CODE, phone_code_hash=sent.phone_code_hash)
    await first(functions.auth.SignUpRequest(PHONE, sent.phone_code_hash, "Audra", ""))
    me = await first.get_me()
    first_key = key_of(first)

    second = make_client()
    await second.connect()
    sent = await second.send_code_request(PHONE)
    with pytest.raises(errors.PhoneCodeInvalidError):
        await second.sign_in(PHONE, "00000", phone_code_hash=sent.phone_code_hash)
    await second.sign_in(PHONE, CODE, phone_code_hash=sent.phone_code_hash)
    second_key = key_of(second)

    third = make_client()
    await third.start(phone=PHONE, code_callback=lambda: CODE)
    third_key = key_of(third)
    assert await third.log_out()

    assert await first(functions.auth.ResetAuthorizationsRequest())

    at = "ip=127.0.0.1"
    assert audit_lines(caplog) == [
        f"sign_in sign_up_required user=- auth_key={first_key} {at}",
        f"sign_up ok user={me.id} auth_key={first_key} {at}",
        f"sign_in refused:PhoneCodeInvalid user=- auth_key={second_key} {at}",
        f"sign_in ok user={me.id} auth_key={second_key} {at}",
        f"sign_in ok user={me.id} auth_key={third_key} {at}",
        f"logout ok user={me.id} auth_key={third_key} {at}",
        f"reset_authorizations ok user={me.id} auth_key={first_key} {at} ended_keys=1",
    ]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == AUDIT_LOGGER)
    assert not any(CODE in without_ids(r.getMessage()) for r in caplog.records)
