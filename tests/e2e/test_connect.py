"""Unmodified Telethon connects over each transport, exchanges a key and calls the API."""

from __future__ import annotations

import pytest
from telethon import functions, types
from telethon.errors import AuthKeyUnregisteredError
from telethon.network import (
    ConnectionTcpAbridged,
    ConnectionTcpFull,
    ConnectionTcpIntermediate,
    ConnectionTcpObfuscated,
)

from .conftest import ClientFactory, RunningServer

TRANSPORTS = [
    ConnectionTcpFull,
    ConnectionTcpAbridged,
    ConnectionTcpIntermediate,
    ConnectionTcpObfuscated,
]


@pytest.mark.parametrize("connection", TRANSPORTS, ids=lambda c: c.__name__)
async def test_key_exchange_config_and_get_me(
    server: RunningServer, make_client: ClientFactory, connection: type
) -> None:
    client = make_client(connection=connection)
    await client.connect()
    config = await client(functions.help.GetConfigRequest())
    assert isinstance(config, types.Config)
    assert config.this_dc == 2
    assert config.message_length_max == 4096
    assert [(o.id, o.ip_address, o.port) for o in config.dc_options] == [
        (2, server.host, server.port)
    ]
    assert await client.get_me() is None
    assert not await client.is_user_authorized()


async def test_start_up_calls_answer(make_client: ClientFactory) -> None:
    client = make_client()
    await client.connect()
    nearest = await client(functions.help.GetNearestDcRequest())
    assert nearest.this_dc == 2
    app_config = await client(functions.help.GetAppConfigRequest(hash=0))
    assert isinstance(app_config, types.help.AppConfig)
    same = await client(functions.help.GetAppConfigRequest(hash=app_config.hash))
    assert isinstance(same, types.help.AppConfigNotModified)
    countries = await client(functions.help.GetCountriesListRequest(lang_code="en", hash=0))
    assert isinstance(countries, types.help.CountriesList)
    languages = await client(functions.langpack.GetLanguagesRequest(lang_pack="tdesktop"))
    assert languages[0].lang_code == "en"
    pack = await client(functions.langpack.GetLangPackRequest(lang_pack="tdesktop", lang_code="en"))
    assert pack.strings == []


async def test_methods_need_login(make_client: ClientFactory) -> None:
    client = make_client()
    await client.connect()
    with pytest.raises(AuthKeyUnregisteredError):  # Telethon's class for that wire name
        await client(functions.messages.GetDialogFiltersRequest())


async def test_auth_key_survives_a_gateway_restart(
    server: RunningServer, make_client: ClientFactory
) -> None:
    client = make_client()
    await client.connect()
    await client(functions.help.GetConfigRequest())
    saved = client.session.save()
    key_before = client.session.auth_key.key
    await client.disconnect()
    count = await server.resources.db.pool.fetchval("SELECT count(*) FROM auth_keys")

    await server.restart()

    again = make_client(session=saved)
    again.session.set_dc(2, server.host, server.port)
    await again.connect()
    config = await again(functions.help.GetConfigRequest())
    assert config.this_dc == 2
    assert again.session.auth_key.key == key_before
    assert await server.resources.db.pool.fetchval("SELECT count(*) FROM auth_keys") == count
