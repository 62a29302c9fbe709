"""Push routing between server processes, on a real Redis (the gateways are stand-ins
with real session managers)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from telesrv.delivery.cluster import Cluster
from telesrv.gateway.sessions import Carrier, SessionEntry, SessionManager
from telesrv.store import cluster as store
from telesrv.store import metrics
from telesrv.store.redis_client import PubSubLink

GUARD = 10.0  # only against a hang


class CountingRedis:
    """The real client, counting pipelines, commands sent alone and publishes (each one
    round trip)."""

    def __init__(self, inner: aioredis.Redis) -> None:
        self.inner = inner
        self.round_trips = 0

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        self.round_trips += 1
        return self.inner.pipeline(*args, **kwargs)

    # redis-py leaves execute_command unannotated (hence the ignores on its calls).
    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        self.round_trips += 1
        return await self.inner.execute_command(*args, **kwargs)  # type: ignore[no-untyped-call]

    async def publish(self, *args: Any) -> Any:
        self.round_trips += 1
        return await self.inner.publish(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FakeGateway:
    def __init__(self) -> None:
        # Entries are added by hand: no session is ever made.
        self.sessions: SessionManager[Carrier] = SessionManager(
            lambda *args: None  # type: ignore[arg-type]
        )
        self.pushed: list[tuple[int, bytes, tuple[int, int] | None]] = []
        self.arrived = asyncio.Event()

    def hold(self, user_id: int, session_id: int) -> None:
        entry: SessionEntry[Carrier] = SessionEntry(1, 1, session_id, None)  # type: ignore[arg-type]
        self.sessions.set_user(entry, user_id)

    def push_to_user(self, user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int:
        self.pushed.append((user_id, body, exclude))
        self.arrived.set()
        return 1 if self.sessions.sessions_of_user(user_id) else 0


@pytest.fixture
async def clusters(redis: aioredis.Redis, redis_url: str) -> AsyncIterator[list[Cluster]]:
    await redis.flushdb()
    made: list[Cluster] = []
    yield made
    for cluster in made:
        await cluster.stop()


async def start(
    made: list[Cluster], redis: Any, redis_url: str, name: str, **options: Any
) -> Cluster:
    cluster = Cluster(redis, redis_url, FakeGateway(), process_id=name, **options)  # type: ignore[arg-type]
    await cluster.start()
    made.append(cluster)
    return cluster


def gateway(cluster: Cluster) -> FakeGateway:
    return cluster.gateway  # type: ignore[return-value]


async def settled(redis: aioredis.Redis, user_id: int, holders: int) -> None:
    async with asyncio.timeout(GUARD):
        while await redis.zcard(store.holders_key(user_id)) != holders:
            await asyncio.sleep(0.005)


async def test_a_lone_process_pushes_without_redis(
    clusters: list[Cluster], redis: aioredis.Redis, redis_url: str
) -> None:
    counting = CountingRedis(redis)
    alone = await start(clusters, counting, redis_url, "p1")
    gateway(alone).hold(7, 1)
    await settled(redis, 7, 1)  # registering is a write, once per user arriving
    before = counting.round_trips
    for _ in range(3):
        placement = await alone.locate([7, 8])
        assert placement.online(7) and not placement.online(8)
        assert placement.push(7, b"updates", None) == 1
        placement.flush()
    alone.broadcast("auth", ids=[1], close=False)
    await asyncio.sleep(0)
    assert counting.round_trips == before
    assert gateway(alone).pushed == [(7, b"updates", None)] * 3


async def test_pushes_reach_the_process_holding_the_user(
    clusters: list[Cluster], redis: aioredis.Redis, redis_url: str
) -> None:
    first = await start(clusters, redis, redis_url, "p1")
    second = await start(clusters, redis, redis_url, "p2")
    async with asyncio.timeout(GUARD):
        while not first.peers:  # the hello of the second arrives
            await asyncio.sleep(0.005)
    assert first.peers == {"p2"} and second.peers == {"p1"}
    gateway(second).hold(7, 1)  # user 7 only on the second process
    gateway(first).hold(9, 2)
    gateway(second).hold(9, 3)  # user 9 on both
    await settled(redis, 7, 1)
    await settled(redis, 9, 2)

    placement = await first.locate([7, 8, 9])
    assert placement.online(7) and placement.online(9) and not placement.online(8)
    assert placement.push(7, b"to-seven", (5, 6)) == 0  # none here
    assert placement.push(9, b"to-nine", None) == 1  # one here, and the other one there
    assert gateway(second).pushed == []  # sent once the batch is done
    placement.flush()
    async with asyncio.timeout(GUARD):
        while len(gateway(second).pushed) < 2:
            await gateway(second).arrived.wait()
            gateway(second).arrived.clear()
    assert sorted(gateway(second).pushed) == [(7, b"to-seven", (5, 6)), (9, b"to-nine", None)]
    assert gateway(first).pushed == [(7, b"to-seven", (5, 6)), (9, b"to-nine", None)]

    # The last session of user 9 on the second process goes: no more pushes there.
    entry = gateway(second).sessions.sessions_of_user(9)[0]
    gateway(second).sessions.set_user(entry, None)
    await settled(redis, 9, 1)
    placement = await first.locate([9])
    assert placement.online(9)  # still here
    assert placement.push(9, b"again", None) == 1
    placement.flush()
    await settled(redis, 7, 1)
    placement = await first.locate([7])  # ... and a last push to 7 shows the order held
    placement.push(7, b"last", None)
    placement.flush()
    async with asyncio.timeout(GUARD):
        while gateway(second).pushed[-1][1] != b"last":
            await gateway(second).arrived.wait()
            gateway(second).arrived.clear()
    assert [p for p in gateway(second).pushed if p[1] == b"again"] == []


async def test_invalidations_reach_the_other_processes(
    clusters: list[Cluster], redis: aioredis.Redis, redis_url: str
) -> None:
    first = await start(clusters, redis, redis_url, "p1")
    second = await start(clusters, redis, redis_url, "p2")
    async with asyncio.timeout(GUARD):
        while not first.peers:
            await asyncio.sleep(0.005)
    got: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    second.on("auth", got.put_nowait)
    own: list[dict[str, Any]] = []
    first.on("auth", own.append)
    first.broadcast("auth", ids=[11, 12], close=True)
    message = await asyncio.wait_for(got.get(), GUARD)
    assert message["ids"] == [11, 12] and message["close"] is True
    second.broadcast("auth", ids=[13], close=False)
    async with asyncio.timeout(GUARD):
        while not own:
            await asyncio.sleep(0.005)
    assert [m["ids"] for m in own] == [[13]]  # not its own broadcast

    await second.stop()
    clusters.remove(second)
    async with asyncio.timeout(GUARD):
        while first.peers:  # the bye arrives: alone again
            await asyncio.sleep(0.005)


async def pair(clusters: list[Cluster], redis: Any, redis_url: str, **options: Any) -> Cluster:
    """A first process (returned) that knows of a second, which holds user 7's only
    session; both made with ``options``."""
    first = await start(clusters, redis, redis_url, "p1", **options)
    second = await start(clusters, redis, redis_url, "p2", **options)
    async with asyncio.timeout(GUARD):
        while not first.peers:
            await asyncio.sleep(0.005)
    gateway(second).hold(7, 1)
    await settled(redis, 7, 1)
    return first


async def arrived(cluster: Cluster, count: int) -> list[bytes]:
    async with asyncio.timeout(GUARD):
        while len(gateway(cluster).pushed) < count:
            await gateway(cluster).arrived.wait()
            gateway(cluster).arrived.clear()
    return [body for _, body, _ in gateway(cluster).pushed]


async def test_concurrent_lookups_and_publishes_share_round_trips(
    clusters: list[Cluster], redis: aioredis.Redis, redis_url: str
) -> None:
    counting = CountingRedis(redis)
    # No heartbeat in the middle of the count; the second process has written its
    # registration once ``pair`` returns, and the first holds no user.
    first = await pair(clusters, counting, redis_url, heartbeat=3600.0)
    second = clusters[1]
    before = counting.round_trips
    placements = await asyncio.gather(*(first.locate([7, 100 + i]) for i in range(4)))
    assert counting.round_trips == before + 1  # four lookups, one pipeline
    assert all(p.remote == {7: ["p2"]} for p in placements)
    for index, placement in enumerate(placements):
        assert placement.push(7, b"body-%d" % index, None) == 0
        placement.flush()  # handed over: nothing sent yet, nobody waits
    assert counting.round_trips == before + 1
    assert await arrived(second, 4) == [b"body-0", b"body-1", b"body-2", b"body-3"]
    assert counting.round_trips == before + 2  # four pushes, one pipeline, in order


async def test_pushes_waiting_for_redis_are_bounded_in_bytes(
    clusters: list[Cluster], redis: aioredis.Redis, redis_url: str
) -> None:
    from telesrv.delivery.cluster import DROPPED_PUSHES, PUSH_ENTRY_BYTES

    entry = PUSH_ENTRY_BYTES
    first = await pair(
        clusters,
        redis,
        redis_url,
        max_pending_push_bytes=2 * entry + 10,
        max_pending_ephemeral_bytes=entry + 1,
    )
    second = clusters[1]
    dropped = DROPPED_PUSHES._value.get()
    placement = await first.locate([7])
    placement.push(7, b"a" * 6, None)
    placement.push(7, b"b" * 4, None)  # two entries and 10 bytes waiting: at the bound
    placement.push(7, b"c", None)  # one byte past it: dropped
    placement.flush()
    first.push_anywhere(7, b"d", None)  # an ephemeral push: at its own bound
    first.push_anywhere(7, b"e", None)  # past it: dropped
    assert DROPPED_PUSHES._value.get() == dropped + 2
    assert await arrived(second, 3) == [b"a" * 6, b"b" * 4, b"d"]
    # Once the writer has taken them, the room is free again.
    placement = await first.locate([7])
    placement.push(7, b"f" * 10, None)
    placement.flush()
    assert await arrived(second, 4) == [b"a" * 6, b"b" * 4, b"d", b"f" * 10]
    assert DROPPED_PUSHES._value.get() == dropped + 2


async def test_a_stopping_process_publishes_what_it_was_handed(
    clusters: list[Cluster], redis: aioredis.Redis, redis_url: str
) -> None:
    first = await pair(clusters, redis, redis_url)
    second = clusters[1]
    placement = await first.locate([7])
    placement.push(7, b"last words", None)
    placement.flush()
    await first.stop()  # before the writer had its turn
    clusters.remove(first)
    assert await arrived(second, 1) == [b"last words"]


async def test_pushes_whose_holders_are_unknown_are_counted_dropped(
    clusters: list[Cluster], redis: aioredis.Redis, redis_url: str
) -> None:
    from telesrv.delivery.cluster import DROPPED_PUSHES

    first = await pair(clusters, redis, redis_url)
    second = clusters[1]
    gateway(first).hold(9, 3)
    await settled(redis, 9, 1)
    await redis.delete(store.holders_key(9))
    await redis.set(store.holders_key(9), "not a sorted set")  # WRONGTYPE for user 9
    dropped = DROPPED_PUSHES._value.get()
    placement = await first.locate([7, 9, 10])
    assert placement.unknown == {9}
    assert placement.remote == {7: ["p2"]}  # the other users' lookups stand
    assert DROPPED_PUSHES._value.get() == dropped + 1  # user 9, whatever is pushed
    # The sessions here still get it; nothing is rendered for nobody.
    assert placement.online(9) and not placement.online(10)
    assert placement.push(9, b"here only", None) == 1
    assert placement.push(7, b"routed", None) == 0
    placement.flush()
    assert [p for p in gateway(first).pushed if p[0] == 9] == [(9, b"here only", None)]
    # An ephemeral push: the sessions here get it at once; the writer's lookup fails
    # for user 9 only (counted per push), so user 7's still goes to the second process.
    assert first.push_anywhere(9, b"typing", None) == 1
    first.push_anywhere(7, b"typing too", None)
    assert await arrived(second, 2) == [b"routed", b"typing too"]
    assert DROPPED_PUSHES._value.get() == dropped + 2


async def test_a_failed_holder_lookup_leaves_every_user_unknown(
    clusters: list[Cluster], redis: aioredis.Redis, redis_url: str, tmp_path: Any
) -> None:
    from telesrv.delivery import cluster as cluster_module
    from telesrv.store.redis_batch import CommandBatcher

    first = await pair(clusters, redis, redis_url)
    dead = aioredis.Redis(unix_socket_path=str(tmp_path / "nobody-listens"))
    working = first._batch
    first._batch = CommandBatcher(dead)  # its round trip fails as a whole
    try:
        dropped = cluster_module.DROPPED_PUSHES._value.get()
        placement = await first.locate([7, 8])
        assert placement.remote == {} and placement.unknown == {7, 8}
        assert cluster_module.DROPPED_PUSHES._value.get() == dropped + 2
        assert not placement.online(7)  # no session here: nothing to render
    finally:
        first._batch = working
        await dead.aclose()


async def test_a_publish_error_reply_drops_only_that_push(
    clusters: list[Cluster],
    redis: aioredis.Redis,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from telesrv.delivery import cluster as cluster_module

    # A client that may publish to p2's channel and the bus, not to p3's: its publishes
    # to p3 get an error reply each, while the connection stays fine.
    try:
        await redis.execute_command(  # type: ignore[no-untyped-call]
            "ACL", "SETUSER", "pushes-to-p2", "reset", "on", "nopass", "~*", "+@all",
            "resetchannels", f"&{store.proc_channel('p2')}", f"&{store.BUS_CHANNEL}",
        )  # fmt: skip
    except aioredis.ResponseError as e:  # an external Redis may not allow it
        pytest.skip(f"no ACL users on this Redis: {e}")
    limited = aioredis.Redis.from_url(redis_url, username="pushes-to-p2", password="any")
    # A failed round would pause the writer this long: the pushes after it would miss
    # the guard.
    monkeypatch.setattr(cluster_module, "RECONNECT_PAUSE", 10 * GUARD)
    try:
        first = await start(clusters, limited, redis_url, "p1")
        second = await start(clusters, redis, redis_url, "p2")
        third = await start(clusters, redis, redis_url, "p3")
        async with asyncio.timeout(GUARD):
            while first.peers != {"p2", "p3"}:
                await asyncio.sleep(0.005)
        gateway(second).hold(7, 1)
        gateway(third).hold(8, 2)
        await settled(redis, 7, 1)
        await settled(redis, 8, 1)
        dropped = cluster_module.DROPPED_PUSHES._value.get()
        errors = metrics.REDIS_ERRORS._value.get()
        placement = await first.locate([7, 8])
        assert placement.remote == {7: ["p2"], 8: ["p3"]}
        placement.push(8, b"refused", None)
        placement.push(7, b"first", None)
        placement.flush()
        assert await arrived(second, 1) == [b"first"]
        placement = await first.locate([7])
        placement.push(7, b"second", None)
        placement.flush()
        assert await arrived(second, 2) == [b"first", b"second"]
        assert cluster_module.DROPPED_PUSHES._value.get() == dropped + 1
        assert metrics.REDIS_ERRORS._value.get() == errors + 1  # as if sent alone
        assert gateway(third).pushed == []
    finally:
        for cluster in list(clusters):
            await cluster.stop()
            clusters.remove(cluster)
        await limited.aclose()
        await redis.execute_command("ACL", "DELUSER", "pushes-to-p2")  # type: ignore[no-untyped-call]


async def test_a_failed_publish_round_counts_its_pushes_dropped(
    clusters: list[Cluster], redis: aioredis.Redis, redis_url: str, tmp_path: Any
) -> None:
    from telesrv.delivery.cluster import DROPPED_PUSHES

    first = await pair(clusters, redis, redis_url)
    placement = await first.locate([7])
    working = first.link
    # A client whose server is gone: its round trip fails as a whole.
    broken = aioredis.Redis(unix_socket_path=str(tmp_path / "nobody-listens"))
    first.link = PubSubLink(broken, redis_url)
    try:
        dropped = DROPPED_PUSHES._value.get()
        placement.push(7, b"lost", None)
        placement.push(7, b"lost too", None)
        placement.flush()
        async with asyncio.timeout(GUARD):
            while DROPPED_PUSHES._value.get() < dropped + 2:
                await asyncio.sleep(0.005)
        assert DROPPED_PUSHES._value.get() == dropped + 2
    finally:
        await broken.aclose()
        first.link = working
