"""telesrv on a Redis Cluster of 3 masters with a replica each (``redis+cluster://``):
sends, pushes between two server processes, and a master killed in the middle of a
stream of sends, whose replica takes over.

Process 1 runs in the test's event loop; process 2 is a real ``telesrv serve`` on the
same PostgreSQL and cluster (see test_cluster.py). The cluster is started once for
the run, on free ports (the ``redis_cluster`` fixture of tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster
from redis_cluster import LocalRedisCluster, master_of
from serve_process import serving
from telethon import TelegramClient, events, functions, types
from telethon.errors import RPCError

from telesrv.store import cluster as cluster_store
from telesrv.store import counters as counters_store
from telesrv.store.metrics import REDIS_ERRORS
from telesrv.store.redis_client import is_cluster_url

from .conftest import ClientFactory, RunningServer
from .test_cluster import client_on, peer_of, second_args, sign_in, waiter

GUARD = 60.0  # only against a hang: a failover takes a few node timeouts
_phones = itertools.count(15559300)


@pytest.fixture(scope="module")
def redis_url(redis_cluster: LocalRedisCluster) -> str:
    """The module's server, its second process and the ``redis`` fixture use the cluster."""
    return redis_cluster.url


@pytest.fixture(scope="module")
async def second(server: RunningServer) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    async with serving(second_args(server), server.settings.data_dir / "second.log") as serve:
        async with asyncio.timeout(GUARD):
            while not server.server.cluster.peers:
                await asyncio.sleep(0.01)
        yield serve.process, serve.port


@pytest.fixture
async def clients() -> AsyncIterator[list[TelegramClient]]:
    made: list[TelegramClient] = []
    yield made
    for client in made:
        await client.disconnect()


async def registered(server: RunningServer, user_id: int, holders: int) -> None:
    redis = server.resources.redis
    async with asyncio.timeout(GUARD):
        while await redis.zcard(cluster_store.holders_key(user_id)) < holders:
            await asyncio.sleep(0.01)


async def pts_log(server: RunningServer, user_id: int) -> list[tuple[int, int]]:
    rows = await server.resources.db.pool.fetch(
        "SELECT pts, pts_count FROM user_update_events WHERE user_id = $1 ORDER BY pts", user_id
    )
    return [(row["pts"], row["pts_count"]) for row in rows]


def assert_dense(log: list[tuple[int, int]]) -> None:
    """Every pts from 1 to the last one is covered by exactly one event."""
    expected = 1
    for pts, count in log:
        assert pts - count + 1 == expected, f"pts hole or overlap before {pts}: {log}"
        expected = pts + 1


async def test_the_server_talks_to_the_cluster_through_a_cluster_client(
    server: RunningServer, redis_cluster: LocalRedisCluster
) -> None:
    assert is_cluster_url(redis_cluster.url)
    redis = server.resources.redis
    assert isinstance(redis, RedisCluster)
    assert len(redis.get_primaries()) == 3


async def test_sends_push_across_processes_with_keys_on_every_master(
    server: RunningServer,
    second: tuple[asyncio.subprocess.Process, int],
    clients: list[TelegramClient],
    make_client: ClientFactory,
) -> None:
    _, port2 = second
    users = [
        await sign_in(client_on(clients, port2 if i % 2 else server.port), f"+{next(_phones)}")
        for i in range(6)
    ]
    ids = [(await u.get_me()).id for u in users]
    for user in users:
        await user.get_dialogs()  # a request with updates: the device wants pushes
    for user_id in ids:
        await registered(server, user_id, 1)
    redis = server.resources.redis
    assert isinstance(redis, RedisCluster)
    # The counters of these users live on more than one master: routing per key is used.
    masters = {master_of(redis, counters_store.pts_key(u)) for u in ids}
    assert len(masters) > 1

    # Each sender on one process, each recipient on the other: every push crosses.
    for sender, recipient in itertools.pairwise(users):
        peer = await peer_of(sender, recipient)
        incoming = waiter(recipient, events.NewMessage(incoming=True))
        text = f"to {(await recipient.get_me()).id}"
        await sender.send_message(peer, text)
        got = await asyncio.wait_for(incoming, GUARD)
        assert got.message.text == text
    for user_id in ids:
        assert_dense(await pts_log(server, user_id))


async def send_until_acknowledged(
    client: TelegramClient, peer: Any, text: str, random_id: int
) -> int:
    """Send, retrying with the same random_id while the server fails (Telethon also
    retries a server error by itself); the message id."""
    async with asyncio.timeout(GUARD):
        while True:
            try:
                answer = await client(
                    functions.messages.SendMessageRequest(
                        peer=peer, message=text, random_id=random_id
                    )
                )
            except (RPCError, ConnectionError, TimeoutError):
                await asyncio.sleep(0.1)
                continue
            ids = [u.id for u in answer.updates if isinstance(u, types.UpdateMessageID)]
            if ids:
                return int(ids[0])
            return int(answer.id)


async def test_a_master_killed_mid_stream_loses_no_acknowledged_message(
    server: RunningServer,
    second: tuple[asyncio.subprocess.Process, int],
    redis_cluster: LocalRedisCluster,
    clients: list[TelegramClient],
    make_client: ClientFactory,
) -> None:
    _, port2 = second
    alice = await sign_in(client_on(clients, server.port, updates=False), f"+{next(_phones)}")
    bob = await sign_in(client_on(clients, port2), f"+{next(_phones)}")
    alice_id, bob_id = (await alice.get_me()).id, (await bob.get_me()).id
    bob_peer = await peer_of(alice, bob)
    await bob.get_dialogs()
    await registered(server, bob_id, 1)
    seen: set[str] = set()

    async def collect(e: Any) -> None:
        seen.add(e.message.text)

    bob.add_event_handler(collect, events.NewMessage(incoming=True))

    redis = server.resources.redis
    assert isinstance(redis, RedisCluster)
    victim = redis_cluster.master_of_slot(redis.keyslot(counters_store.pts_key(alice_id)))

    total, kill_at = 30, 10
    acknowledged: dict[str, int] = {}
    errors_before = REDIS_ERRORS._value.get()
    for i in range(total):
        if i == kill_at:
            # The master of Alice's counters, her send claims and rate log goes away
            # without a word; its replica takes over after the node timeout.
            redis_cluster.kill(victim)
        text = f"f{i}"
        acknowledged[text] = await send_until_acknowledged(alice, bob_peer, text, 9000 + i)
    await asyncio.to_thread(redis_cluster.wait_until_healthy)
    # The send after the kill found its master gone (in this process, which serves
    # Alice): the stream went through the failover.
    assert REDIS_ERRORS._value.get() > errors_before
    assert redis_cluster.master_of_slot(redis.keyslot(counters_store.pts_key(alice_id))) != victim

    # Pushes are best effort (a subscription on the killed node missed some); the
    # messages are all there, once each, and a device that catches up gets them all.
    await bob.catch_up()
    history = await bob.get_messages(await peer_of(bob, alice), limit=100)
    assert sorted(m.message for m in history) == sorted(acknowledged)
    mine = await alice.get_messages(bob_peer, limit=100)
    assert {m.message: m.id for m in mine} == acknowledged
    for user_id in (alice_id, bob_id):
        assert_dense(await pts_log(server, user_id))

    # And the cluster serves on: a send and its push across the processes.
    incoming = waiter(bob, events.NewMessage(incoming=True))
    await alice.send_message(bob_peer, "after the failover")
    got = await asyncio.wait_for(incoming, GUARD)
    assert got.message.text == "after the failover"
    assert seen  # pushes reached Bob through process 2 during the stream too
