"""A key's declared layer outlives its sessions: clients do not declare it again when
they reconnect with a new session (Telethon's auto-reconnect), so a session opened
after a restart, or on another process, is served the layer the key last declared."""

from __future__ import annotations

import struct

from gateway.test_limits import public_key

from telesrv.bench._client import (
    EncryptedClient,
    EncryptedSession,
    MsgIdClock,
    RawConnection,
    connect_new_key,
)
from telesrv.tl import LAYER, TLObject, functions, types

from .conftest import RunningServer


def with_layer(layer: int, query: TLObject) -> bytes:
    return functions.InvokeWithLayer(
        layer=layer,
        query=functions.InitConnection(
            api_id=1,
            device_model="d",
            system_version="s",
            app_version="a",
            system_lang_code="en",
            lang_pack="",
            lang_code="en",
            query=query,
        ),
    ).to_bytes()


async def config_id_on_a_new_session(server: RunningServer, key: object) -> int:
    conn = await RawConnection.open(server.host, server.port)
    try:
        session = EncryptedSession(
            key.auth_key,  # type: ignore[attr-defined]
            key.salt,  # type: ignore[attr-defined]
            clock=MsgIdClock(key.time_offset),  # type: ignore[attr-defined]
        )
        answer = await EncryptedClient(conn, session).call(functions.help.GetConfig().to_bytes())
    finally:
        await conn.close()
    return int(struct.unpack_from("<I", answer)[0])


async def test_a_new_session_after_a_restart_is_served_the_declared_layer(
    server: RunningServer,
) -> None:
    client, key = await connect_new_key(server.host, server.port, public_key(server))
    first = await client.call(with_layer(133, functions.help.GetConfig()))
    at_133 = struct.unpack_from("<I", first)[0]
    await client.conn.close()
    assert at_133 != types.Config.CONSTRUCTOR_ID  # 133 has a config of its own
    await server.restart()
    assert await config_id_on_a_new_session(server, key) == at_133


async def test_a_key_that_never_declared_a_layer_is_served_the_current_one(
    server: RunningServer,
) -> None:
    client, key = await connect_new_key(server.host, server.port, public_key(server))
    await client.conn.close()
    assert LAYER == 229
    assert await config_id_on_a_new_session(server, key) == types.Config.CONSTRUCTOR_ID
