"""The chat with unmodified Telethon clients against telesrv on the Citus cluster: the
server migrates the cluster's database itself (distributing the tables) and two users
whose rows are on different workers (checked by their shards' placements) talk: live
pushes, history pages, dialogs, read receipts, edit, delete with revoke, search, an
offline device catching up, the outbox drained; every user's pts log dense."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from e2e.conftest import ClientFactory, make_client, server  # noqa: F401 - fixtures
from e2e.test_messages import peer_of, sign_in, waiter
from telethon import TelegramClient, events, functions, types

__all__ = ["make_client", "server"]

DEADLINE = 60.0


@pytest.fixture(scope="module")
def database_url(citus_url: str) -> str:
    """The e2e server's database: this module's on the Citus coordinator."""
    return citus_url


@pytest.fixture
async def coordinator(citus_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(citus_url)
    try:
        yield conn
    finally:
        await conn.close()


async def worker_of(conn: asyncpg.Connection, user_id: int) -> str:
    """The node holding the user's shard (of dialogs; every per-user table is
    colocated with it)."""
    return str(
        await conn.fetchval(
            "SELECT nodename FROM citus_shards"
            " WHERE shardid = get_shard_id_for_distribution_column('dialogs', $1::bigint)",
            user_id,
        )
    )


async def two_on_two_workers(
    make_client: ClientFactory, conn: asyncpg.Connection, *, updates: bool = True
) -> tuple[TelegramClient, TelegramClient]:
    """Signs in users until two of them have their rows on different workers."""
    first = await sign_in(make_client, updates=updates)
    home = await worker_of(conn, (await first.get_me()).id)
    for _ in range(12):
        other = await sign_in(make_client, updates=updates)
        if await worker_of(conn, (await other.get_me()).id) != home:
            return first, other
    raise AssertionError("every user landed on one worker")


async def dense(conn: asyncpg.Connection, user_id: int) -> bool:
    """Every pts from 1 to the newest is covered by exactly one event."""
    rows = await conn.fetch(
        "SELECT pts, pts_count FROM user_update_events WHERE user_id = $1 ORDER BY pts", user_id
    )
    covered = [p for r in rows for p in range(r["pts"] - r["pts_count"] + 1, r["pts"] + 1)]
    return covered == list(range(1, len(covered) + 1))


async def drained(conn: asyncpg.Connection) -> None:
    """Waits until the outbox holds no pending row (a generous deadline, no threshold)."""
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while await conn.fetchval("SELECT count(*) FROM dispatch_outbox WHERE status = 'pending'"):
        assert asyncio.get_running_loop().time() < deadline, "the outbox did not drain"
        await asyncio.sleep(0.2)
    assert await conn.fetchval("SELECT count(*) FROM dispatch_outbox") == 0


def search_request(peer: Any, text: str) -> functions.messages.SearchRequest:
    return functions.messages.SearchRequest(
        peer=peer,
        q=text,
        filter=types.InputMessagesFilterEmpty(),
        min_date=None,
        max_date=None,
        offset_id=0,
        add_offset=0,
        limit=10,
        max_id=0,
        min_id=0,
        hash=0,
    )


async def test_send_push_history_dialogs_read_and_search_across_workers(
    make_client: ClientFactory, coordinator: asyncpg.Connection
) -> None:
    alice, bob = await two_on_two_workers(make_client, coordinator)
    alice_id, bob_id = (await alice.get_me()).id, (await bob.get_me()).id
    assert await worker_of(coordinator, alice_id) != await worker_of(coordinator, bob_id)
    bob_peer = await peer_of(alice, bob)
    alice_peer = await peer_of(bob, alice)

    incoming = waiter(bob, events.NewMessage(incoming=True))
    await alice.send_message(bob_peer, "hello across workers")
    got: Any = await asyncio.wait_for(incoming, DEADLINE)
    assert got.message.message == "hello across workers"
    for i in range(12):
        await alice(
            functions.messages.SendMessageRequest(peer=bob_peer, message=f"m{i}", random_id=900 + i)
        )

    texts = [m.text async for m in bob.iter_messages(alice_peer, limit=None, wait_time=0)]
    assert texts == [f"m{i}" for i in range(11, -1, -1)] + ["hello across workers"]
    page = await bob(
        functions.messages.GetHistoryRequest(
            peer=alice_peer, offset_id=0, offset_date=0, add_offset=0, limit=5,
            max_id=0, min_id=0, hash=0,
        )
    )  # fmt: skip
    assert isinstance(page, types.messages.MessagesSlice) and page.count == 13

    chat = next(d for d in await bob.get_dialogs() if d.id == alice_id)
    assert chat.unread_count == 13 and chat.message.text == "m11"
    read = waiter(alice, events.MessageRead(inbox=False))
    await bob.send_read_acknowledge(alice_peer)
    await asyncio.wait_for(read, DEADLINE)
    assert next(d for d in await bob.get_dialogs() if d.id == alice_id).unread_count == 0

    found = await alice(search_request(bob_peer, "across"))
    assert [m.message for m in found.messages] == ["hello across workers"]
    found = await bob(search_request(alice_peer, "m1"))
    assert sorted(m.message for m in found.messages) == ["m1", "m10", "m11"]

    await drained(coordinator)
    assert await dense(coordinator, alice_id) and await dense(coordinator, bob_id)


async def test_edit_and_delete_with_revoke_across_workers(
    make_client: ClientFactory, coordinator: asyncpg.Connection
) -> None:
    alice, bob = await two_on_two_workers(make_client, coordinator)
    bob_peer = await peer_of(alice, bob)
    alice_peer = await peer_of(bob, alice)
    incoming = waiter(bob, events.NewMessage(incoming=True))
    sent = await alice.send_message(bob_peer, "original text")
    bob_box = (await asyncio.wait_for(incoming, DEADLINE)).message.id

    edited = waiter(bob, events.MessageEdited())
    answer = await alice.edit_message(bob_peer, sent.id, "edited text")
    assert answer.text == "edited text"
    got = await asyncio.wait_for(edited, DEADLINE)
    assert (got.message.id, got.message.text) == (bob_box, "edited text")
    assert [m.message for m in (await bob(search_request(alice_peer, "edited"))).messages] == [
        "edited text"
    ]
    assert (await bob(search_request(alice_peer, "original"))).messages == []

    deleted = waiter(bob, events.MessageDeleted())
    [affected] = await alice.delete_messages(bob_peer, [sent.id], revoke=True)
    assert affected.pts_count == 1
    assert (await asyncio.wait_for(deleted, DEADLINE)).deleted_ids == [bob_box]
    assert [m async for m in bob.iter_messages(alice_peer, limit=None, wait_time=0)] == []
    assert (await bob(search_request(alice_peer, "edited"))).messages == []

    await drained(coordinator)
    for client in (alice, bob):
        assert await dense(coordinator, (await client.get_me()).id)


async def test_an_offline_device_catches_up_across_workers(
    make_client: ClientFactory, coordinator: asyncpg.Connection
) -> None:
    alice, bob = await two_on_two_workers(make_client, coordinator)
    bob_peer = await peer_of(alice, bob)
    seen: list[str] = []
    done = asyncio.get_running_loop().create_future()

    async def collect(e: Any) -> None:
        seen.append(e.message.text)
        if len(seen) >= 120 and not done.done():
            done.set_result(None)

    bob.add_event_handler(collect, events.NewMessage(incoming=True))
    await bob.disconnect()  # the client keeps its pts
    for i in range(120):  # more than one getDifference slice of 100
        await alice(
            functions.messages.SendMessageRequest(
                peer=bob_peer, message=f"n{i}", random_id=5000 + i
            )
        )
    await bob.connect()
    await bob.catch_up()
    await asyncio.wait_for(done, DEADLINE)
    assert seen == [f"n{i}" for i in range(120)]
    await drained(coordinator)
    assert await dense(coordinator, (await bob.get_me()).id)
