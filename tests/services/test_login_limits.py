"""The per-phone and per-address login code limits: configurable, off by default
with the dev login code, at the limit and one past it."""

from __future__ import annotations

import itertools
import uuid

import pytest
from conftest import MakeServer

from telesrv.config import (
    DEFAULT_LOGIN_CODE_WINDOW,
    DEFAULT_LOGIN_CODES_PER_IP,
    DEFAULT_LOGIN_CODES_PER_PHONE,
    Settings,
)
from telesrv.services.accounts import SendCodeFlood
from telesrv.services.login import LoginService

NOW = 1_800_000_000.0
_phones = itertools.count(15550310000)


def new_phone() -> str:
    return f"+{next(_phones)}"


def login_of(make_server: MakeServer, **overrides: object) -> LoginService:
    server = make_server(**overrides)
    assert server.accounts is not None
    return server.accounts.login


@pytest.mark.parametrize("limit", [1, 3])
async def test_configured_limit_at_and_past(make_server: MakeServer, limit: int) -> None:
    login = login_of(make_server, login_codes_per_phone=limit, login_code_window=120.0)
    phone = new_phone()
    for i in range(limit):  # at the limit: all sent
        await login.send_code(phone, NOW + i)
    with pytest.raises(SendCodeFlood) as flood:  # one past it
        await login.send_code(phone, NOW + 30)
    assert flood.value.retry_after == 120 - 30
    # Once the window has passed the oldest code, the phone may ask again.
    await login.send_code(phone, NOW + 120)


async def test_default_limit_without_dev_code(make_server: MakeServer) -> None:
    login = login_of(make_server)
    assert login.policy.max_sends == DEFAULT_LOGIN_CODES_PER_PHONE
    phone = new_phone()
    for _ in range(DEFAULT_LOGIN_CODES_PER_PHONE):
        await login.send_code(phone, NOW)
    with pytest.raises(SendCodeFlood):
        await login.send_code(phone, NOW)


async def test_dev_code_turns_the_limit_off(make_server: MakeServer) -> None:
    login = login_of(make_server, dev_login_code="24680")
    assert login.policy.max_sends == 0
    phone = new_phone()
    # Far past the default: a test script signing the same phone in again and again.
    for _ in range(4 * DEFAULT_LOGIN_CODES_PER_PHONE):
        await login.send_code(phone, NOW)


async def test_explicit_limit_wins_over_dev_code(make_server: MakeServer) -> None:
    login = login_of(make_server, dev_login_code="24680", login_codes_per_phone=2)
    phone = new_phone()
    await login.send_code(phone, NOW)
    await login.send_code(phone, NOW)
    with pytest.raises(SendCodeFlood):
        await login.send_code(phone, NOW)


async def test_zero_turns_the_limit_off(make_server: MakeServer) -> None:
    login = login_of(make_server, login_codes_per_phone=0)
    phone = new_phone()
    for _ in range(DEFAULT_LOGIN_CODES_PER_PHONE + 1):
        await login.send_code(phone, NOW)


def test_limit_settings() -> None:
    assert Settings().login_code_limit == DEFAULT_LOGIN_CODES_PER_PHONE
    assert Settings(dev_login_code="1").login_code_limit == 0
    assert Settings(dev_login_code="1", login_codes_per_phone=7).login_code_limit == 7
    with pytest.raises(ValueError, match="login_codes_per_phone"):
        Settings(login_codes_per_phone=-1)
    with pytest.raises(ValueError, match="login_code_window"):
        Settings(login_code_window=0)


def new_ip() -> str:
    """An address of its own for each test: the window lives in Redis, by Redis's clock."""
    return f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


@pytest.mark.parametrize("limit", [1, 3])
async def test_per_address_limit_at_and_past(make_server: MakeServer, limit: int) -> None:
    login = login_of(make_server, login_codes_per_ip=limit)
    ip = new_ip()
    for _ in range(limit):  # at the limit: one code each for different phones
        await login.send_code(new_phone(), NOW, ip)
    with pytest.raises(SendCodeFlood) as flood:  # one past it, for yet another phone
        await login.send_code(new_phone(), NOW, ip)
    assert 1 <= flood.value.retry_after <= DEFAULT_LOGIN_CODE_WINDOW
    # Another address is not held back, nor a call that did not come over a socket.
    await login.send_code(new_phone(), NOW, new_ip())
    await login.send_code(new_phone(), NOW, None)


async def test_per_address_limit_defaults(make_server: MakeServer) -> None:
    assert login_of(make_server).policy.max_sends_per_ip == DEFAULT_LOGIN_CODES_PER_IP
    login = login_of(make_server, dev_login_code="24680")
    assert login.policy.max_sends_per_ip == 0
    ip = new_ip()
    for _ in range(DEFAULT_LOGIN_CODES_PER_IP + 1):  # off with the dev code
        await login.send_code(new_phone(), NOW, ip)
    assert Settings(dev_login_code="1", login_codes_per_ip=4).login_code_ip_limit == 4
    with pytest.raises(ValueError, match="login_codes_per_ip"):
        Settings(login_codes_per_ip=-1)
