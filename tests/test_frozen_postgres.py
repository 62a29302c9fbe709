"""PostgreSQL frozen (SIGSTOP of the test server's postmaster and backends) under a
running gateway: a new client's key exchange is answered by a closed connection once
its key could not be stored in ``key_store_timeout`` (it never hangs), connections
with a key keep being served, no "Task exception was never retrieved" is logged after
the freeze, and everything works again once PostgreSQL continues.

Nothing asserts on elapsed time; GUARD only turns a hang into a failure."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from e2e.conftest import RunningServer, e2e_settings
from frozen_postgres import frozen, postmaster_of
from test_faults import public_key

from telesrv.app import open_resources
from telesrv.bench._client import (
    EncryptedClient,
    EncryptedSession,
    RawConnection,
    create_auth_key,
)
from telesrv.serving import readiness
from telesrv.wiring import build_server

GUARD = 60.0  # only against a hang


@pytest.fixture
async def server(tmp_path: Any, database_url: str, redis_url: str) -> AsyncIterator[RunningServer]:
    settings = e2e_settings(
        tmp_path / "data", database_url, redis_url, pg_pool_min_size=1, pg_pool_max_size=3
    )
    async with open_resources(settings) as resources:
        built = build_server(settings, resources)
        host, port = await built.start(settings.listen_host, settings.listen_port)
        try:
            yield RunningServer(settings, resources, built, host, port)
        finally:
            await built.stop()


async def test_key_exchange_fails_fast_while_postgres_is_frozen(
    server: RunningServer, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    postmaster = await postmaster_of(database_url)
    key = public_key(server)
    keyed = await RawConnection.open(server.host, server.port)
    try:
        made = await create_auth_key(keyed, key)
        raw = EncryptedClient(keyed, EncryptedSession(auth_key=made.auth_key, salt=made.salt))
        await raw.ping(1)
        with frozen(postmaster):
            exchange = await RawConnection.open(server.host, server.port)
            try:
                with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
                    async with asyncio.timeout(GUARD):
                        await create_auth_key(exchange, key)
            finally:
                await exchange.close()
            await raw.ping(2)  # a connection with a key is still served
            # A /readyz probe that gives up (its client went away) mid-check.
            probe = asyncio.ensure_future(readiness(server.resources)())
            await asyncio.sleep(1.0)
            probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probe
            # The connection that gave up left its release to finish in the background.
            await asyncio.sleep(0)
        assert "its new key was not stored" in caplog.text
        # Once PostgreSQL continues, a key exchange works again.
        again = await RawConnection.open(server.host, server.port)
        try:
            async with asyncio.timeout(GUARD):
                await create_auth_key(again, key)
        finally:
            await again.close()
        for _ in range(3):
            gc.collect()
            await asyncio.sleep(0.1)
        assert "never retrieved" not in caplog.text
    finally:
        await keyed.close()
