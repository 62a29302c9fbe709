"""Key exchanges over real sockets: a key whose first byte is zero.

The key is the shared number as 256 big-endian bytes, so about one key in 256 begins
with a zero byte. Telethon, GramJS, mtcute and the web app drop that byte, fail their
own check of dh_gen_ok and run the exchange again; the server must keep the key whole
(a client that does keep it must be able to use it) and say in its log that it made
one, which the browser and Node tests use to tell that retry from a real fault.
"""

from __future__ import annotations

import logging

import pytest
from e2e.conftest import RunningServer

from telesrv.bench._client import (
    EncryptedClient,
    EncryptedSession,
    MsgIdClock,
    RawConnection,
    create_auth_key,
)

from .test_limits import public_key, server_side

ZERO_KEY_LOG = "begins with a zero byte"


def _zero_key_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "telesrv.gateway.connection" and ZERO_KEY_LOG in r.getMessage()
    ]


@pytest.mark.parametrize("first_byte_zero", [True, False])
async def test_a_key_that_begins_with_a_zero_byte_is_kept_whole_and_logged(
    server: RunningServer, caplog: pytest.LogCaptureFixture, first_byte_zero: bool
) -> None:
    caplog.set_level(logging.INFO, logger="telesrv.gateway.connection")
    conn = await RawConnection.open(server.host, server.port)
    try:
        key = await create_auth_key(
            conn, public_key(server), key_wanted=lambda k: (k[0] == 0) == first_byte_zero
        )
        assert len(key.auth_key) == 256 and (key.auth_key[0] == 0) == first_byte_zero
        client = EncryptedClient(
            conn, EncryptedSession(key.auth_key, key.salt, clock=MsgIdClock(key.time_offset))
        )
        await client.ping(1)  # the whole 256 bytes are the key on both sides
        side = await server_side(server, conn.writer)
        assert side.auth_key is not None and side.auth_key.auth_key == key.auth_key
        key_hex = f"{key.auth_key_id & 0xFFFFFFFFFFFFFFFF:016x}"
        line = f"new auth key {key_hex} for {side.peer} {ZERO_KEY_LOG}"
        expected = [line] if first_byte_zero else []
        assert _zero_key_lines(caplog) == expected
    finally:
        await conn.close()
