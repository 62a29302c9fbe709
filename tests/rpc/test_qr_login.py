"""Login by QR code through the real dispatcher, PostgreSQL and Redis: each bound.

The clock is the request's ``now`` (what the gateway passes), so expiry is tested at
its exact second without waiting; the per-key rate limit counts on Redis's clock and
is tested within one minute of it.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis.asyncio as aioredis
from conftest import MakeServer

from telesrv.parts import AccountServices
from telesrv.rpc.context import RequestContext
from telesrv.rpc.dispatcher import Dispatcher
from telesrv.services.qr_login import TOKEN_BYTES, QrLoginPolicy
from telesrv.store import auth_keys
from telesrv.store.db import Db
from telesrv.tl import TLObject, functions, types
from telesrv.tl.service import decode_result

CODE = "24680"
NOW = 1_800_000_000.0
TTL = 30
PER_KEY = 3
GLOBAL = 1000
_phones = itertools.count(15550700000)


@dataclass
class FakeSessions:
    changes: list[tuple[int, int | None]] = field(default_factory=list)

    def authorization_changed(self, perm_auth_key_id: int, user_id: int | None) -> None:
        self.changes.append((perm_auth_key_id, user_id))

    def close_key(self, perm_auth_key_id: int) -> None:
        return None

    def key_bound(self, temp_auth_key_id: int, perm_auth_key_id: int) -> None:
        return None


@dataclass
class Device:
    api: Api
    key: int
    user_id: int | None = None

    def ctx(self, now: float) -> RequestContext:
        return RequestContext(
            auth_key_id=self.key,
            perm_auth_key_id=self.key,
            session_id=1,
            msg_id=1,
            now=now,
            user_id=self.user_id,
            sessions=self.api.sessions,
        )

    async def __call__(self, request: TLObject, now: float = NOW) -> Any:
        outcome = await self.api.dispatcher.call(self.ctx(now), request)
        if outcome.error is not None:
            raise outcome.error
        assert outcome.result is not None
        for key, user_id in self.api.sessions.changes:
            if key == self.key:
                self.user_id = user_id
        self.api.sessions.changes.clear()
        return decode_result(request, outcome.result)

    async def error(self, request: TLObject, now: float = NOW) -> str:
        outcome = await self.api.dispatcher.call(self.ctx(now), request)
        assert outcome.error is not None, f"expected an error, got {outcome.result!r}"
        return outcome.error.message

    async def export(self, now: float = NOW, except_ids: list[int] | None = None) -> Any:
        return await self(
            functions.auth.ExportLoginToken(api_id=1, api_hash="h", except_ids=except_ids or []),
            now,
        )


@dataclass
class Api:
    db: Db
    services: AccountServices
    dispatcher: Dispatcher
    sessions: FakeSessions
    accepted: list[int]

    async def device(self, model: str = "Pixel") -> Device:
        key = int.from_bytes(os.urandom(8), "little", signed=True)
        assert await auth_keys.save_auth_key(self.db.pool, key, os.urandom(256))
        info = auth_keys.ClientInfo(
            api_id=7,
            device_model=model,
            system_version="Linux",
            app_version="2.2",
            system_lang_code="en",
            lang_pack="",
            lang_code="en",
            layer=213,
        )
        await auth_keys.record_client_info(self.db.pool, key, info)
        return Device(self, key)

    async def signed_in(self) -> tuple[Device, Any]:
        device = await self.device("Phone")
        phone = str(next(_phones))
        sent = await device(
            functions.auth.SendCode(
                phone_number=phone, api_id=1, api_hash="h", settings=types.CodeSettings()
            )
        )
        auth = await device(
            functions.auth.SignIn(
                phone_number=phone, phone_code_hash=sent.phone_code_hash, phone_code=CODE
            )
        )
        return device, auth.user


@pytest.fixture
async def api(db: Db, make_server: MakeServer, monkeypatch: pytest.MonkeyPatch) -> Api:
    """Calls through the server's own dispatcher, every handler registered."""
    server = make_server(
        dev_login_code=CODE,
        auto_register=True,
        login_token_ttl=TTL,
        login_token_rate_limit=PER_KEY,
        login_token_global_rate_limit=GLOBAL,
    )
    services = server.accounts
    assert services is not None and services.qr_login is not None
    # Many more codes per phone than a user gets: each test signs in several times.
    login = services.login
    monkeypatch.setattr(login, "policy", dataclasses.replace(login.policy, max_sends=100))
    accepted: list[int] = []
    services.qr_login.on_accepted = accepted.append
    return Api(db, services, server.gateway.dispatcher, FakeSessions(), accepted)


def accept(token: bytes) -> TLObject:
    return functions.auth.AcceptLoginToken(token=token)


def import_(token: bytes) -> TLObject:
    return functions.auth.ImportLoginToken(token=token)


async def test_the_whole_flow_signs_the_waiting_key_in(api: Api) -> None:
    waiting = await api.device("Web K")
    phone, me = await api.signed_in()

    shown = await waiting.export()
    assert isinstance(shown, types.auth.LoginToken)
    assert shown.expires == int(NOW) + TTL
    assert len(shown.token) == TOKEN_BYTES
    # Not accepted yet: exporting again shows a new token, and importing one's own
    # token answers it again.
    again = await waiting(import_(shown.token))
    assert isinstance(again, types.auth.LoginToken) and again.token == shown.token

    authorization = await phone(accept(shown.token), NOW + 1)
    assert isinstance(authorization, types.Authorization)
    assert authorization.device_model == "Web K" and authorization.api_id == 7
    assert authorization.app_version == "2.2" and not authorization.current
    assert api.accepted == [waiting.key]

    success = await waiting.export(NOW + 2)
    assert isinstance(success, types.auth.LoginTokenSuccess)
    assert isinstance(success.authorization, types.auth.Authorization)
    assert success.authorization.user.id == me.id
    assert waiting.user_id == me.id  # its sessions follow, as after auth.signIn

    # Signed in as the account: its methods answer, and the account lists the device
    # with the hash acceptLoginToken answered.
    listed = await phone(functions.account.GetAuthorizations())
    hashes = {a.hash: a for a in listed.authorizations}
    assert authorization.hash in hashes
    assert hashes[authorization.hash].device_model == "Web K"
    mine = await waiting(functions.account.GetAuthorizations())
    current = [a for a in mine.authorizations if a.current]
    assert len(current) == 1 and current[0].device_model == "Web K"


async def test_import_answers_success_once_accepted(api: Api) -> None:
    waiting = await api.device()
    phone, me = await api.signed_in()
    shown = await waiting.export()
    await phone(accept(shown.token))
    success = await waiting(import_(shown.token))
    assert isinstance(success, types.auth.LoginTokenSuccess)
    assert isinstance(success.authorization, types.auth.Authorization)
    assert success.authorization.user.id == me.id
    # Single use: the token logs in once.
    assert await waiting.error(import_(shown.token)) == "AUTH_TOKEN_ALREADY_ACCEPTED"


async def test_expired_at_its_second_not_before(api: Api) -> None:
    waiting = await api.device()
    phone, _ = await api.signed_in()
    shown = await waiting.export()
    assert await phone.error(accept(shown.token), NOW + TTL) == "AUTH_TOKEN_EXPIRED"
    assert await waiting.error(import_(shown.token), NOW + TTL) == "AUTH_TOKEN_EXPIRED"
    # One second earlier it still works.
    fresh = await waiting.export(NOW + 100)
    accepted = await phone(accept(fresh.token), NOW + 100 + TTL - 1)
    assert isinstance(accepted, types.Authorization)
    # Once accepted, the waiting device may take it after the expiry of the QR code.
    success = await waiting.export(NOW + 100 + TTL + 5)
    assert isinstance(success, types.auth.LoginTokenSuccess)


async def test_reused_token_is_refused(api: Api) -> None:
    waiting = await api.device()
    phone, _ = await api.signed_in()
    shown = await waiting.export()
    await phone(accept(shown.token))
    assert await phone.error(accept(shown.token)) == "AUTH_TOKEN_ALREADY_ACCEPTED"
    assert isinstance(await waiting.export(), types.auth.LoginTokenSuccess)
    assert await phone.error(accept(shown.token)) == "AUTH_TOKEN_ALREADY_ACCEPTED"
    # The next export is a new QR code, not the same login again.
    assert isinstance(await waiting.export(), types.auth.LoginToken)


async def test_another_users_token_accepted_twice(api: Api) -> None:
    waiting = await api.device()
    first, first_user = await api.signed_in()
    second, _ = await api.signed_in()
    shown = await waiting.export()
    await first(accept(shown.token))
    assert await second.error(accept(shown.token)) == "AUTH_TOKEN_ALREADY_ACCEPTED"
    success = await waiting.export()
    assert success.authorization.user.id == first_user.id


async def test_someone_elses_token_cannot_be_imported(api: Api) -> None:
    waiting = await api.device()
    thief = await api.device()
    phone, me = await api.signed_in()
    shown = await waiting.export()
    assert await thief.error(import_(shown.token)) == "AUTH_TOKEN_INVALID"
    await phone(accept(shown.token))
    # Accepted or not, it is not the other key's to use; the owner still gets it.
    assert await thief.error(import_(shown.token)) == "AUTH_TOKEN_INVALID"
    assert thief.user_id is None
    success = await waiting(import_(shown.token))
    assert success.authorization.user.id == me.id


async def test_unknown_replaced_and_malformed_tokens_are_invalid(api: Api) -> None:
    waiting = await api.device()
    phone, _ = await api.signed_in()
    old = await waiting.export()
    new = await waiting.export()
    assert new.token != old.token
    # A refreshed QR code replaces the one before: the old one logs no one in.
    assert await phone.error(accept(old.token)) == "AUTH_TOKEN_INVALID"
    assert await phone.error(accept(os.urandom(TOKEN_BYTES))) == "AUTH_TOKEN_INVALID"
    assert await phone.error(accept(b"short")) == "AUTH_TOKEN_INVALID"
    assert await waiting.error(import_(b"x" * 1000)) == "AUTH_TOKEN_INVALID"


async def test_accepting_needs_a_signed_in_device(api: Api) -> None:
    waiting = await api.device()
    other = await api.device()
    shown = await waiting.export()
    assert await other.error(accept(shown.token)) == "AUTH_KEY_UNREGISTERED"


async def test_except_ids_refuse_an_account_already_logged_in(api: Api) -> None:
    waiting = await api.device()
    phone, me = await api.signed_in()
    other, _ = await api.signed_in()
    shown = await waiting.export(except_ids=[me.id, 12345])
    assert await phone.error(accept(shown.token)) == "AUTH_TOKEN_EXCEPTION"
    # Another account may accept it.
    assert isinstance(await other(accept(shown.token)), types.Authorization)


async def test_a_flood_of_exports_per_key(api: Api) -> None:
    flooding = await api.device()
    tokens = [await flooding.export() for _ in range(PER_KEY)]  # at the limit
    assert len({t.token for t in tokens}) == PER_KEY
    message = await flooding.error(
        functions.auth.ExportLoginToken(api_id=1, api_hash="h", except_ids=[])
    )
    assert message.startswith("FLOOD_WAIT_")
    assert 1 <= int(message.removeprefix("FLOOD_WAIT_")) <= 60
    # The key still holds one token only, the last one; other keys export as before.
    assert isinstance(await (await api.device()).export(), types.auth.LoginToken)
    phone, _ = await api.signed_in()
    assert await phone.error(accept(tokens[0].token)) == "AUTH_TOKEN_INVALID"
    assert isinstance(await phone(accept(tokens[-1].token)), types.Authorization)


async def test_a_flood_of_exports_of_all_keys(api: Api, redis: aioredis.Redis) -> None:
    # A minute of its own: the other tests' exports count in theirs.
    minute = NOW + 3600
    assert api.services.qr_login is not None
    api.services.qr_login.policy = QrLoginPolicy(
        ttl=TTL, per_key_per_minute=PER_KEY, global_per_minute=4
    )
    devices = [await api.device() for _ in range(5)]
    for device in devices[:4]:  # at the limit
        assert isinstance(await device.export(minute), types.auth.LoginToken)
    message = await devices[4].error(
        functions.auth.ExportLoginToken(api_id=1, api_hash="h", except_ids=[]), minute
    )
    assert message.startswith("FLOOD_WAIT_")
    # The next minute starts over.
    assert isinstance(await devices[4].export(minute + 60), types.auth.LoginToken)
