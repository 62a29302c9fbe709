"""Login by QR code with two unmodified Telethon clients: one that is not signed in
shows a token, a signed-in one accepts it, and the first is pushed updateLoginToken
live and is then signed in to the accepting account."""

from __future__ import annotations

import asyncio

import pytest
from telethon import TelegramClient, errors, events
from telethon.tl import functions, types

from .conftest import API_HASH, API_ID, ClientFactory
from .test_cluster import client_on, clients, second  # noqa: F401  (fixtures)

CODE = "12345"  # the e2e server's --dev-login-code


async def signed_in(make_client: ClientFactory, phone: str) -> TelegramClient:
    client = make_client()
    await client.start(phone=phone, code_callback=lambda: CODE)
    return client


async def test_qr_login_between_two_telethon_clients(make_client: ClientFactory) -> None:
    phone = await signed_in(make_client, "+15550701")
    me = await phone.get_me()

    waiting = make_client(receive_updates=True)
    await waiting.connect()
    assert not await waiting.is_user_authorized()
    pushed: asyncio.Queue[types.UpdateLoginToken] = asyncio.Queue()

    async def on_login_token(update: types.UpdateLoginToken) -> None:
        await pushed.put(update)

    waiting.add_event_handler(on_login_token, events.Raw(types.UpdateLoginToken))
    export = functions.auth.ExportLoginTokenRequest(API_ID, API_HASH, [])
    shown = await waiting(export)
    assert isinstance(shown, types.auth.LoginToken) and len(shown.token) == 32

    authorization = await phone(functions.auth.AcceptLoginTokenRequest(shown.token))
    assert isinstance(authorization, types.Authorization) and not authorization.current

    await asyncio.wait_for(pushed.get(), timeout=10)  # live, not on the next request
    success = await waiting(export)
    assert isinstance(success, types.auth.LoginTokenSuccess)
    assert success.authorization.user.id == me.id

    assert (await waiting.get_me()).id == me.id
    listed = await phone(functions.account.GetAuthorizationsRequest())
    others = {a.hash: a for a in listed.authorizations if not a.current}
    assert authorization.hash in others
    assert others[authorization.hash].api_id == API_ID

    # The token logged the key in once; a second accept is refused.
    with pytest.raises(errors.AuthTokenAlreadyAcceptedError):
        await phone(functions.auth.AcceptLoginTokenRequest(shown.token))


async def test_telethon_qr_login_helper(make_client: ClientFactory) -> None:
    """Telethon's own QR flow (client.qr_login, QRLogin.wait) signs in unchanged."""
    phone = await signed_in(make_client, "+15550702")
    me = await phone.get_me()
    waiting = make_client(receive_updates=True)
    await waiting.connect()
    qr = await waiting.qr_login()
    assert qr.url.startswith("tg://login?token=")
    waiter = asyncio.ensure_future(qr.wait(timeout=10))
    await asyncio.sleep(0)  # its handler is in place before the scan
    await phone(functions.auth.AcceptLoginTokenRequest(qr.token))
    user = await waiter
    assert user.id == me.id
    assert await waiting.is_user_authorized()


async def test_qr_login_across_two_server_processes(
    make_client: ClientFactory,
    second: tuple[asyncio.subprocess.Process, int],  # noqa: F811
    clients: list[TelegramClient],  # noqa: F811
) -> None:
    """The waiting device on the second process, the accepting one on the first: the
    token is in Redis and updateLoginToken crosses on the cluster bus."""
    phone = await signed_in(make_client, "+15550703")
    me = await phone.get_me()
    waiting = client_on(clients, second[1])
    await waiting.connect()
    pushed: asyncio.Queue[types.UpdateLoginToken] = asyncio.Queue()

    async def on_login_token(update: types.UpdateLoginToken) -> None:
        await pushed.put(update)

    waiting.add_event_handler(on_login_token, events.Raw(types.UpdateLoginToken))
    export = functions.auth.ExportLoginTokenRequest(API_ID, API_HASH, [])
    shown = await waiting(export)
    await phone(functions.auth.AcceptLoginTokenRequest(shown.token))
    await asyncio.wait_for(pushed.get(), timeout=10)
    success = await waiting(export)
    assert isinstance(success, types.auth.LoginTokenSuccess)
    assert (await waiting.get_me()).id == me.id
