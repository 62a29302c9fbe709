"""The batcher's round trips on one Redis server: replies, the deadline, the connection
limit, and connections that failed or were cut off part way."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from telesrv.store.redis_client import ServerRedis
from telesrv.store.redis_round_trips import RoundTrips

_keys = itertools.count(1)


def _key() -> str:
    return f"trips:{next(_keys)}"


def _trips(redis: ServerRedis, *, timeout: float | None = None, size: int = 4) -> RoundTrips:
    return RoundTrips(redis.connection_pool, redis.response_callbacks, timeout=timeout, size=size)


@contextlib.asynccontextmanager
async def _open_trips(redis: ServerRedis, **options: Any) -> AsyncIterator[RoundTrips]:
    trips = _trips(redis, **options)
    try:
        yield trips
    finally:
        await trips.aclose()


# A round trip held open on purpose: BLPOP on an empty list waits, on the real server,
# until another client pushes to it (``_release``).
def _held(key: str) -> tuple[Any, ...]:
    return ("BLPOP", key, 0)


async def _release(redis: ServerRedis, key: str) -> None:
    await redis.rpush(key, "go")


async def _until_blocked(redis: ServerRedis, count: int) -> None:
    """Until ``count`` clients wait in BLPOP (bounded, so a failure is not a hang)."""
    for _ in range(2_000):
        clients = await redis.client_list()
        if sum(1 for c in clients if c.get("cmd") == "blpop") == count:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never {count} clients blocked")


async def test_replies_are_the_clients_own_in_order(redis: ServerRedis) -> None:
    async with _open_trips(redis) as trips:
        counter, text, scored = _key(), _key(), _key()
        await redis.zadd(scored, {"a": 1, "b": 2.5})
        replies = await trips.run(
            [
                ("INCRBY", counter, 5),
                ("SET", text, "x", "NX", "PX", 60_000),
                ("SET", text, "y", "NX"),
                ("INCR", text),
                ("ZRANGEBYSCORE", scored, 2.25, "+inf"),
                ("GET", text),
            ]
        )
        assert replies[:3] == [5, True, None]
        assert isinstance(replies[3], ResponseError)  # in its place, the rest answered
        assert replies[4:] == [[b"b"], b"x"]
        assert await trips.run([]) == []
        assert trips.connections == 1


async def test_an_argument_that_is_not_text_or_a_number_sends_nothing(
    redis: ServerRedis,
) -> None:
    async with _open_trips(redis) as trips:
        key = _key()
        with pytest.raises(DataError):
            await trips.run([("INCR", key), ("SET", key, {"not": "text"})])
        assert await redis.get(key) is None
        assert trips.connections == 0


async def test_no_answer_within_the_deadline_fails_the_round_trip_and_drops_its_connection(
    redis: ServerRedis,
) -> None:
    async with _open_trips(redis) as trips:
        assert await trips.run([("INCR", _key())]) == [1]  # connected, without a deadline
        trips.timeout = 0.2
        key = _key()
        with pytest.raises(RedisTimeoutError):
            await trips.run([("INCR", _key()), _held(key)])
        assert trips.connections == 0  # its reply may still come: not reused
        await _until_blocked(redis, 0)  # closed: the server stopped waiting for it
        fresh = _key()
        assert await trips.run([("INCR", fresh), ("GET", fresh)]) == [1, b"1"]


async def test_a_round_trip_cancelled_part_way_leaves_no_reply_for_the_next(
    redis: ServerRedis,
) -> None:
    async with _open_trips(redis) as trips:
        key = _key()
        cut = asyncio.ensure_future(trips.run([("INCR", _key()), _held(key)]))
        await _until_blocked(redis, 1)  # written; its first reply is on its way
        cut.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cut
        assert trips.connections == 0
        await _until_blocked(redis, 0)  # the server saw the connection close
        await _release(redis, key)  # nobody waits any more: the list keeps it
        assert await redis.llen(key) == 1
        mine = _key()
        assert await trips.run([("SET", mine, "mine"), ("GET", mine)]) == [True, b"mine"]


async def test_at_most_size_connections_and_the_next_round_trip_waits_for_one(
    redis: ServerRedis,
) -> None:
    async with _open_trips(redis, size=2) as trips:
        held = [_key(), _key()]
        first_two = [asyncio.ensure_future(trips.run([_held(k)])) for k in held]
        await _until_blocked(redis, 2)
        assert trips.connections == 2  # at the limit: both out
        counter = _key()
        third = asyncio.ensure_future(trips.run([("INCR", counter)]))
        await asyncio.sleep(0.05)
        assert trips.connections == 2  # past it: the third waits, no connection made
        assert not third.done()
        assert await redis.get(counter) is None
        for k in held:
            await _release(redis, k)
        replies = await asyncio.wait_for(asyncio.gather(*first_two, third), 60)
        assert replies == [[(held[0].encode(), b"go")], [(held[1].encode(), b"go")], [1]]
        assert trips.connections == 2


async def test_a_waiter_cancelled_passes_its_turn_on(redis: ServerRedis) -> None:
    async with _open_trips(redis, size=1) as trips:
        key = _key()
        holder = asyncio.ensure_future(trips.run([_held(key)]))
        await _until_blocked(redis, 1)
        gone = asyncio.ensure_future(trips.run([("INCR", _key())]))
        kept = asyncio.ensure_future(trips.run([("INCR", _key())]))
        await asyncio.sleep(0.01)
        gone.cancel()
        await _release(redis, key)
        assert await asyncio.wait_for(holder, 60) == [(key.encode(), b"go")]
        assert await asyncio.wait_for(kept, 60) == [1]
        with pytest.raises(asyncio.CancelledError):
            await gone


async def test_waiters_are_served_in_order_of_arrival(redis: ServerRedis) -> None:
    async with _open_trips(redis, size=1) as trips:
        counter = _key()
        connection = await trips._take()
        first = asyncio.ensure_future(trips.run([("INCR", counter)]))
        await asyncio.sleep(0)  # waiting
        # A newcomer whose first step runs after the connection is back, but before
        # the waiter's: it must not take the connection from the waiter.
        later = asyncio.ensure_future(trips.run([("INCR", counter)]))
        await trips._give_back(connection)
        replies = await asyncio.wait_for(asyncio.gather(first, later), 60)
        assert list(replies) == [[1], [2]]
        assert trips.connections == 1


@pytest.mark.parametrize("freed", ["given back", "dropped"])
async def test_a_waiter_gone_once_handed_a_connection_passes_it_on(
    redis: ServerRedis, freed: str
) -> None:
    # Handed a connection (or, after a drop, the place to make one) and cancelled
    # before it ran: the next waiter gets it, and the count stays right.
    async with _open_trips(redis, size=1) as trips:
        connection = await trips._take()
        gone_key, kept_key = _key(), _key()
        gone = asyncio.ensure_future(trips.run([("INCR", gone_key)]))
        kept = asyncio.ensure_future(trips.run([("INCR", kept_key)]))
        await asyncio.sleep(0)  # both waiting
        if freed == "given back":
            await trips._give_back(connection)
        else:
            await trips._drop(connection)
        gone.cancel()  # handed over, not yet run
        assert await asyncio.wait_for(kept, 60) == [1]
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert await redis.get(gone_key) is None
        assert trips.connections == 1


async def test_waiting_for_a_connection_is_bounded_without_a_timeout(
    redis: ServerRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from telesrv.store import redis_round_trips

    async with _open_trips(redis, size=1) as trips:
        assert await trips.run([("INCR", _key())]) == [1]  # connected before the bound
        monkeypatch.setattr(redis_round_trips, "CONNECTION_WAIT", 0.2)
        key = _key()
        holder = asyncio.ensure_future(trips.run([_held(key)]))
        await _until_blocked(redis, 1)
        with pytest.raises(RedisTimeoutError):
            await trips.run([("INCR", _key())])
        await _release(redis, key)  # the round trip itself had no deadline
        assert await asyncio.wait_for(holder, 60) == [(key.encode(), b"go")]


async def test_an_idle_connection_the_server_closed_is_replaced(redis: ServerRedis) -> None:
    async with _open_trips(redis) as trips:
        (first_id,) = await trips.run([("CLIENT", "ID")])
        assert await redis.client_kill_filter(_id=first_id) == 1
        key = _key()
        assert await trips.run([("INCR", key)]) == [1]  # not lost on the dead socket
        (second_id,) = await trips.run([("CLIENT", "ID")])
        assert second_id != first_id
        assert trips.connections == 1


async def test_closed_round_trips_refuse_and_wake_their_waiters(redis: ServerRedis) -> None:
    trips = _trips(redis, size=1)
    key = _key()
    holder = asyncio.ensure_future(trips.run([_held(key)]))
    await _until_blocked(redis, 1)
    waiter = asyncio.ensure_future(trips.run([("INCR", _key())]))
    await asyncio.sleep(0.01)
    await trips.aclose()
    with pytest.raises(RedisConnectionError):
        await waiter
    await _release(redis, key)
    assert await holder == [(key.encode(), b"go")]  # the round trip in flight ends ...
    assert trips.connections == 0  # ... and its connection is closed, not kept
    with pytest.raises(RedisConnectionError):
        await trips.run([("INCR", _key())])


async def test_the_servers_client_closes_its_round_trips(redis_url: str) -> None:
    from telesrv.store.redis_client import open_redis

    client = await open_redis(redis_url, timeout=5)
    assert isinstance(client, ServerRedis)
    assert client.round_trips.timeout == 5
    assert await client.round_trips.run([("INCR", _key())]) == [1]
    await client.aclose()
    assert client.round_trips.connections == 0


async def test_a_server_that_is_not_there_fails_the_round_trip_and_keeps_no_connection(
    tmp_path: Any,
) -> None:
    from redis.asyncio.connection import ConnectionPool

    pool = ConnectionPool.from_url(f"unix://{tmp_path / 'nobody-listens'}")
    trips = RoundTrips(pool, {}, timeout=5, size=1)
    for _ in range(2):  # the failed connection gave its place back
        with pytest.raises(RedisConnectionError):
            await trips.run([("INCR", _key())])
        assert trips.connections == 0
    await trips.aclose()
    await pool.aclose()
