"""PostgreSQL statements per sent message on the real server, counted per connection.

One private message, sender and recipient online: the send (RPC, transaction), then
the push from what the send has in hand and the delete of its (held) outbox rows; no
claim and no reading back. The count may only go down; when a change cuts it, lower
``STATEMENTS_PER_SEND``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from telesrv.app import open_resources
from telesrv.bench._client import PublicKey
from telesrv.bench._e2e_load import Device, Pair, _read_pushes
from telesrv.tl import functions, types
from telesrv.wiring import build_server

from .conftest import e2e_settings

# BEGIN and COMMIT count as statements: each is a round trip.
STATEMENTS_PER_SEND = 2

POOL_SIZE = 4


@pytest.fixture
async def serving(
    tmp_path: Path, database_url: str, redis_url: str, redis: Any
) -> AsyncIterator[tuple[Any, str, int]]:
    settings = e2e_settings(
        tmp_path,
        database_url,
        redis_url,
        dev_login_code="12345",
        # Every connection exists from the start (so each gets the statement logger),
        # and no idle outbox poll runs while statements are counted.
        pg_pool_min_size=POOL_SIZE,
        pg_pool_max_size=POOL_SIZE,
        outbox_poll_interval=3600.0,
    )
    async with open_resources(settings) as resources:
        server = build_server(settings, resources)
        host, port = await server.start("127.0.0.1", 0)
        try:
            yield resources, host, port
        finally:
            await server.stop()


async def outbox_empty(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)  # not the server's pool: not counted
    try:
        async with asyncio.timeout(10.0):
            while await conn.fetchval("SELECT count(*) FROM dispatch_outbox"):
                await asyncio.sleep(0.01)
    finally:
        await conn.close()


async def test_statements_per_sent_message_do_not_grow(
    serving: tuple[Any, str, int], database_url: str
) -> None:
    resources, host, port = serving
    numbers = resources.server_key.private_key.public_key().public_numbers()
    key = PublicKey(numbers.n, numbers.e)
    pair = Pair(0, Device(host, port, key, "+999770001"), Device(host, port, key, "+999770002"))
    try:
        await pair.receiver.log_in("12345")
        await pair.sender.log_in("12345")
        imported = await pair.sender.call(
            functions.contacts.ImportContacts(
                contacts=[
                    types.InputPhoneContact(
                        client_id=1, phone=pair.receiver.phone, first_name="r", last_name=""
                    )
                ]
            )
        )
        peer = types.InputPeerUser(
            user_id=pair.receiver.user_id, access_hash=imported.users[0].access_hash
        )
        await pair.receiver.call(functions.updates.GetState())
        reader = asyncio.create_task(_read_pushes(pair))

        async def send(seq: int) -> None:
            pair.expected = seq + 1
            pair.complete.clear()
            await pair.sender.call(
                functions.messages.SendMessage(
                    peer=peer, message=f"e2e 0:{seq}", random_id=1000 + seq
                )
            )
            async with asyncio.timeout(10.0):
                await pair.complete.wait()
            await outbox_empty(database_url)

        # Warm the prepared statements and the users' caches, which keep a pair from
        # its second sighting.
        await send(0)
        await send(1)

        statements: list[str] = []
        holders = resources.db.pool._holders  # every connection of the pool
        connections = [h._con for h in holders if h._con is not None]
        assert len(connections) == POOL_SIZE

        def record(query: Any) -> None:
            statements.append(" ".join(query.query.split())[:60])

        for conn in connections:
            conn.add_query_logger(record)
        await send(2)
        for conn in connections:
            conn.remove_query_logger(record)
        reader.cancel()

        summary = "\n".join(f"{n} x {s}" for s, n in Counter(statements).most_common())
        assert pair.duplicates == 0
        assert len(statements) <= STATEMENTS_PER_SEND, summary
    finally:
        await pair.sender.close()
        await pair.receiver.close()
