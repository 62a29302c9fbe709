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
from telesrv.gateway.server import Gateway, build_gateway

TEST_PARTITION_COUNT = 4  # as in tests/conftest.py: few partitions keep databases cheap

API_ID = 1
API_HASH = "0" * 32


@dataclass
class RunningServer:
    settings: Settings
    resources: Resources
    gateway: Gateway
    host: str
    port: int

    async def restart(self) -> None:
        """Stop the gateway and start a new one on the same port, data and database."""
        await self.gateway.stop()
        self.gateway = build_gateway(self.settings, self.resources)
        self.host, self.port = await self.gateway.start(self.host, self.port)


def e2e_settings(data_dir: Path, database_url: str, redis_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "listen_host": "127.0.0.1",
        "listen_port": 0,
        "data_dir": data_dir,
        "database_url": database_url,
        "redis_url": redis_url,
        "partition_count": TEST_PARTITION_COUNT,
        "dev_login_code": "12345",
        "auto_register": True,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, redis: Any
) -> AsyncIterator[RunningServer]:
    settings = e2e_settings(tmp_path_factory.mktemp("telesrv-data"), database_url, redis_url)
    async with open_resources(settings) as resources:
        gateway = build_gateway(settings, resources)
        host, port = await gateway.start(settings.listen_host, settings.listen_port)
        running = RunningServer(settings, resources, gateway, host, port)
        telethon_rsa.add_key(resources.server_key.public_pem, old=False)
        try:
            yield running
        finally:
            await running.gateway.stop()


ClientFactory = Callable[..., TelegramClient]


@pytest.fixture
async def make_client(server: RunningServer) -> AsyncIterator[ClientFactory]:
    """`make_client(connection=ConnectionTcpFull, session=None)`; all are disconnected after."""
    clients: list[TelegramClient] = []

    def build(connection: Any = ConnectionTcpFull, session: str | None = None) -> TelegramClient:
        client = TelegramClient(
            StringSession(session),
            API_ID,
            API_HASH,
            connection=connection,
            receive_updates=False,
            request_retries=1,
            connection_retries=1,
            retry_delay=0,
            timeout=10,
        )
        client.session.set_dc(2, server.host, server.port)
        clients.append(client)
        return client

    yield build
    for client in clients:
        await client.disconnect()
