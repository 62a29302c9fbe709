"""Every store that keeps things in Redis, on a Redis Cluster of 3 masters: the command
batcher and the counters' scripts over keys of several masters in one round trip, the
cluster registry and its pub/sub, login tokens, SRP exchanges, upload quotas and the
admin channel."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError
from redis_cluster import LocalRedisCluster, master_of

from telesrv.store import admin_events, cluster
from telesrv.store.counters import SCRIPT_RELOADS, Counters, pts_key
from telesrv.store.db import Db
from telesrv.store.login_tokens import LoginTokens, Status
from telesrv.store.rate_limits import RateLimits
from telesrv.store.redis_batch import CommandBatcher
from telesrv.store.redis_client import ClusterNodeURLError, PubSubLink, open_redis
from telesrv.store.srp_sessions import Exchange, SrpSessions
from telesrv.store.uploads import UploadQuota

GUARD = 10.0  # only against a hang
_user_ids = itertools.count(3_000_001)


@pytest.fixture(scope="module")
async def cluster_redis(redis_cluster: LocalRedisCluster) -> AsyncIterator[RedisCluster]:
    client = await open_redis(redis_cluster.url, timeout=5)
    assert isinstance(client, RedisCluster)
    await client.flushdb()  # on every master: what other modules left goes
    try:
        yield client
    finally:
        await client.aclose()


def users_on_every_master(redis: RedisCluster, count: int = 12) -> list[int]:
    """Fresh users whose keys fall on all three masters."""
    users = [next(_user_ids) for _ in range(count)]
    assert len({master_of(redis, pts_key(u)) for u in users}) == 3
    return users


async def test_a_batch_spans_masters_and_keeps_each_reply_in_place(
    cluster_redis: RedisCluster,
) -> None:
    batcher = CommandBatcher(cluster_redis)
    users = users_on_every_master(cluster_redis)
    commands: list[tuple[Any, ...]] = [("INCRBY", f"b:{{{u}}}", u) for u in users]
    commands.insert(3, ("HGET", f"b:{{{users[0]}}}", "f"))  # a wrong type: an error reply
    replies = await batcher.execute_many(commands)
    assert isinstance(replies[3], ResponseError)
    assert replies[:3] + replies[4:] == users


async def test_counters_allocate_for_users_on_every_master_in_one_call(
    cluster_redis: RedisCluster, db: Db
) -> None:
    counters = Counters(cluster_redis, db)
    await counters.load_scripts()
    # A send's two users are on different masters: its claim and allocation are two
    # scripts here, never the one that touches both users' keys.
    assert not counters.claims_allocate
    users = users_on_every_master(cluster_redis)
    first = await counters.allocate([(u, 2, 1) for u in users])
    again = await counters.allocate([(u, 1, 1) for u in users])
    assert [(a.first_pts, a.last_pts, a.first_box) for a in first] == [(1, 2, 1)] * len(users)
    assert [(a.first_pts, a.last_box) for a in again] == [(3, 2)] * len(users)
    # The rate check with the claim, and a retry finding the claim held.
    assert await counters.send_rate_wait_and_claim(users[0], 30, 5, 10_000) == (0, True)
    assert await counters.send_rate_wait_and_claim(users[0], 30, 5, 10_000) == (0, False)
    assert await counters.send_claimed(users[0], 5)
    await counters.release_send(users[0], 5)
    assert not await counters.send_claimed(users[0], 5)
    await counters.forget_no_blocks(users[1])
    rate_limits = RateLimits(cluster_redis)
    await rate_limits.load_scripts()
    allowed, _ = await rate_limits.charge_phone_lookups(users[2], ["a", "b", "c"], 2)
    assert allowed == [True, True, False]
    assert await rate_limits.send_rate_wait(users[1], 1) == 0
    assert await rate_limits.send_rate_wait(users[1], 1) > 0


async def test_a_script_flushed_from_the_cluster_is_loaded_again(
    cluster_redis: RedisCluster, db: Db
) -> None:
    counters = Counters(cluster_redis, db)
    await counters.load_scripts()
    await cluster_redis.execute_command("SCRIPT FLUSH", target_nodes=RedisCluster.PRIMARIES)
    reloads = SCRIPT_RELOADS._value.get()
    users = users_on_every_master(cluster_redis)
    allocations = await counters.allocate([(u, 1, 0) for u in users])
    assert [a.last_pts for a in allocations] == [1] * len(users)
    assert SCRIPT_RELOADS._value.get() == reloads + 1  # once, for every master


async def test_registry_and_pushes_go_through_the_cluster(cluster_redis: RedisCluster) -> None:
    link = PubSubLink(cluster_redis, "redis+cluster://unused:1")
    batcher = CommandBatcher(cluster_redis)
    users = users_on_every_master(cluster_redis)
    subscriber = link.subscriber()
    try:
        async with subscriber.pubsub(ignore_subscribe_messages=True) as pubsub:
            await pubsub.subscribe(cluster.proc_channel("p2"))
            assert await cluster.announce(cluster_redis, "p1", 1000.0, 15.0) == ["p1"]
            await cluster.register(cluster_redis, "p2", users, 1000.0, 15.0)
            found = await cluster.holders(batcher, users, 1001.0)
            assert found.failed == [] and found.found == {u: ["p2"] for u in users}
            pushes = [cluster.RemotePush(u, f"body {u}".encode(), None) for u in users]
            assert await cluster.publish_pushes(link, {"p2": pushes}) == 0
            received: list[cluster.RemotePush] = []
            async with asyncio.timeout(GUARD):
                while len(received) < len(pushes):
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None:
                        received.append(cluster.decode_push(message["data"]))
            assert received == pushes  # in the order published
            await cluster.withdraw(cluster_redis, "p2", users)
            await cluster.unregister(cluster_redis, "p1", users)
            assert (await cluster.holders(batcher, users, 1001.0)).found == {u: [] for u in users}
    finally:
        await subscriber.aclose()
        await link.aclose()


async def test_login_tokens_srp_exchanges_and_upload_quotas_on_the_cluster(
    cluster_redis: RedisCluster,
) -> None:
    tokens = LoginTokens(cluster_redis)
    token = b"\x01" * 16
    await tokens.issue(77, token, 2000, [5], 60, replaces=None)
    assert await tokens.current(77) == token
    assert (await tokens.accept(token, 9, 1234, 1000.0, 60)).status is Status.OK
    collected = await tokens.collect(token, 77, 1000.0)
    assert (collected.status, collected.user_id) == (Status.OK, 9)
    assert await tokens.global_rate_wait(1000.0, 10) == 0
    assert await tokens.key_rate_wait(77, 10) == 0

    srp = SrpSessions(cluster_redis)
    exchange = Exchange(srp_id=3, user_id=9, b=12345, big_b=b"B", password_digest=b"d", expires=9)
    await srp.open(77, exchange, 60)
    assert await srp.take(77, 3) == exchange
    assert await srp.take(77, 3) is None  # single use
    prefix = await srp.new_salt_prefix(9, b"salt", 60)
    assert prefix == b"salt" == await srp.new_salt_prefix(9, b"other", 60)
    assert await srp.account_rate_wait(9, 5, 60.0) == 0

    quota = UploadQuota(cluster_redis, max_files=1, max_bytes=100, ttl=60)
    assert await quota.reserve(9, 1, 60)
    assert not await quota.reserve(9, 2, 10)  # a second file, past max_files
    await quota.release(9, [1])
    assert await quota.reserve(9, 2, 10)


async def test_admin_messages_reach_a_listener_on_another_node(
    cluster_redis: RedisCluster,
) -> None:
    link = PubSubLink(cluster_redis, "redis+cluster://unused:1")
    ended: list[int] = []
    subscribed = asyncio.Event()
    listener = asyncio.create_task(admin_events.listen_ended(link, ended.append, subscribed.set))
    try:
        async with asyncio.timeout(GUARD):
            await subscribed.wait()
            # Published through the cluster client, to whichever node it picks.
            await admin_events.publish_ended(cluster_redis, [41, 42])
            while ended != [41, 42]:
                await asyncio.sleep(0.01)
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)


async def test_a_plain_url_of_a_cluster_node_says_how_to_name_the_cluster(
    redis_cluster: LocalRedisCluster,
) -> None:
    plain = redis_cluster.url.replace("redis+cluster://", "redis://")
    with pytest.raises(ClusterNodeURLError, match=r"redis\+cluster://127\.0\.0\.1:"):
        await open_redis(plain)
