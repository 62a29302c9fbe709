"""A real telesrv gateway on a loopback port, and unmodified Telethon clients for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from telethon import TelegramClient
from telethon.crypto import rsa as telethon_rsa
from telethon.network import ConnectionTcpFull
from telethon.sessions import StringSession

from telesrv.app import Resources, open_resources
from telesrv.config import Settings
from telesrv.gateway.server import Gateway
from telesrv.wiring import Server, build_server

TEST_PARTITION_COUNT = 4  # as in tests/conftest.py: few partitions keep databases cheap

API_ID = 1
API_HASH = "0" * 32


@dataclass
class RunningServer:
    settings: Settings
    resources: Resources
    server: Server
    host: str
    port: int
    ws_port: int | None = None  # the WebSocket listener's (ws://host:ws_port/apiws)

    @property
    def gateway(self) -> Gateway:
        return self.server.gateway

    async def restart(self) -> None:
        """Stop the server and start a new one on the same ports, data and database."""
        await self.server.stop()
        self.server = build_server(self.settings, self.resources)
        self.host, self.port = await self.server.start(self.host, self.port)
        if self.ws_port is not None:
            _, self.ws_port = await self.gateway.start_websocket(self.host, self.ws_port)


def e2e_settings(data_dir: Path, database_url: str, redis_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "listen_host": "127.0.0.1",
        "listen_port": 0,
        "data_dir": data_dir,
        "database_url": database_url,
        "redis_url": redis_url,
        "partition_count": TEST_PARTITION_COUNT,
        "dev_login_code": "12345",
        # The production limit, which the dev code alone turns off: tests check it.
        "login_codes_per_phone": 5,
        "auto_register": True,
        "send_rate_limit": 0,  # tests send faster than 30 a minute; the limit has its own test
        "media_rate_limit": 0,  # likewise for uploads made into media
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, redis: Any
) -> AsyncIterator[RunningServer]:
    settings = e2e_settings(tmp_path_factory.mktemp("telesrv-data"), database_url, redis_url)
    async with open_resources(settings) as resources:
        server = build_server(settings, resources)
        host, port = await server.start(settings.listen_host, settings.listen_port)
        # Browsers' listener too (any free port), for clients that speak WebSocket.
        _, ws_port = await server.gateway.start_websocket(host, 0)
        running = RunningServer(settings, resources, server, host, port, ws_port)
        telethon_rsa.add_key(resources.server_key.public_pem, old=False)
        try:
            yield running
        finally:
            await running.server.stop()


ClientFactory = Callable[..., TelegramClient]


@pytest.fixture
async def make_client(server: RunningServer) -> AsyncIterator[ClientFactory]:
    """`make_client(connection=ConnectionTcpFull, session=None, receive_updates=False)`;
    all are disconnected after the test."""
    clients: list[TelegramClient] = []

    def build(
        connection: Any = ConnectionTcpFull,
        session: str | None = None,
        receive_updates: bool = False,
    ) -> TelegramClient:
        client = TelegramClient(
            StringSession(session),
            API_ID,
            API_HASH,
            connection=connection,
            receive_updates=receive_updates,
            request_retries=1,
            # Telethon drops the leading zero bytes of a new auth key (one key in 256)
            # and then fails its own hash check; it recovers by trying again, and its
            # default of 5 attempts is what a user has. With 2, two such keys in a row
            # failed a test now and then.
            connection_retries=5,
            retry_delay=0,
            timeout=10,
        )
        client.session.set_dc(2, server.host, server.port)
        clients.append(client)
        return client

    yield build
    for client in clients:
        await client.disconnect()
