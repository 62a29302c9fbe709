from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, ResponseError

from telesrv.store import metrics
from telesrv.store.counters import Counters, send_claim_key
from telesrv.store.db import Db
from telesrv.store.rate_limits import send_rate_key
from telesrv.store.redis_batch import CommandBatcher
from telesrv.store.redis_client import ServerRedis

_keys = itertools.count(1)
_user_ids = itertools.count(2_000_001)


@pytest.fixture(params=["round trips", "pipeline"])
async def client(
    request: pytest.FixtureRequest, redis: ServerRedis, redis_url: str
) -> AsyncIterator[aioredis.Redis]:
    """The server's client (its own round trips), or a client of the same server
    without them (the batcher's path for other clients: redis-py's pipeline)."""
    if request.param == "round trips":
        assert isinstance(redis, ServerRedis)
        yield redis
        return
    other = metrics.MeteredRedis.from_url(redis_url)
    try:
        yield other
    finally:
        await other.aclose()


def _count_round_trips(redis: aioredis.Redis, monkeypatch: Any) -> list[int]:
    """A one-item list counting the round trips the batcher makes on ``redis`` from
    now on: its own round trips on the server's client; pipelines and lone commands on
    another client."""
    made = [0]

    def counted(original: Any) -> Any:
        def counting(*args: Any, **kwargs: Any) -> Any:
            made[0] += 1
            return original(*args, **kwargs)

        return counting

    if isinstance(redis, ServerRedis):
        monkeypatch.setattr(redis.round_trips, "run", counted(redis.round_trips.run))
    else:
        monkeypatch.setattr(redis, "pipeline", counted(redis.pipeline))
        monkeypatch.setattr(redis, "execute_command", counted(redis.execute_command))
    return made


def _break_round_trips(redis: aioredis.Redis, monkeypatch: Any, fault: Any) -> None:
    """Every round trip on ``redis`` gives ``fault(its replies)`` instead of its replies
    (``fault`` may raise)."""
    if isinstance(redis, ServerRedis):
        run = redis.round_trips.run

        async def faulty(commands: Any) -> list[Any]:
            return fault(await run(commands))  # type: ignore[no-any-return]

        monkeypatch.setattr(redis.round_trips, "run", faulty)
        return
    original = redis.pipeline

    def broken(*args: Any, **kwargs: Any) -> Any:
        # Below the client's metering, as a failure of the connection would be.
        pipe = original(*args, **kwargs)
        execute = pipe._execute_pipeline

        async def faulty(*args: Any, **kwargs: Any) -> list[Any]:
            return fault(await execute(*args, **kwargs))  # type: ignore[no-any-return]

        pipe._execute_pipeline = faulty  # type: ignore[method-assign]
        return pipe

    monkeypatch.setattr(redis, "pipeline", broken)


async def test_commands_of_one_turn_share_a_round_trip_each_with_its_reply(
    client: aioredis.Redis, monkeypatch: Any
) -> None:
    batcher = CommandBatcher(client)
    keys = [f"batch:{next(_keys)}" for _ in range(20)]
    scored = f"batch:{next(_keys)}"
    await client.zadd(scored, {"before": 1_800_000_000.25, "after": 1_800_000_000.5})
    made = _count_round_trips(client, monkeypatch)
    replies = await asyncio.gather(
        *(batcher.execute("INCRBY", key, n) for n, key in enumerate(keys, 1)),
        batcher.execute_many([("SET", keys[0], "x", "NX"), ("GET", keys[1])]),
        batcher.execute("SET", f"batch:{next(_keys)}", b"\x00\xff", "NX", "PX", 60_000),
        batcher.execute("ZRANGEBYSCORE", scored, 1_800_000_000.375, "+inf"),
    )
    assert made == [1]
    assert replies[:20] == list(range(1, 21))
    assert replies[20] == [None, b"2"]  # SET NX found the key: not set
    assert replies[21] is True  # set (the client's own reply to SET)
    assert replies[22] == [b"after"]  # a float argument, written to the last digit


async def test_a_lone_command_of_a_turn_goes_alone(
    client: aioredis.Redis, monkeypatch: Any
) -> None:
    batcher = CommandBatcher(client)
    key = f"batch:{next(_keys)}"
    made = _count_round_trips(client, monkeypatch)
    assert await batcher.execute("INCR", key) == 1
    assert await batcher.execute_many([("INCR", key)]) == [2]
    assert made == [2]


async def test_an_error_reply_goes_to_its_own_caller_only_and_is_counted_once(
    client: aioredis.Redis,
) -> None:
    batcher = CommandBatcher(client)
    text, number = f"batch:{next(_keys)}", f"batch:{next(_keys)}"
    await client.set(text, "not a number")
    errors = metrics.REDIS_ERRORS._value.get()
    bad, good = await asyncio.gather(batcher.execute("INCR", text), batcher.execute("INCR", number))
    assert isinstance(bad, ResponseError)
    assert good == 1
    assert metrics.REDIS_ERRORS._value.get() == errors + 1
    (alone,) = await batcher.execute_many([("INCR", text)])  # a lone command
    assert isinstance(alone, ResponseError)
    assert metrics.REDIS_ERRORS._value.get() == errors + 2
    assert await batcher.execute("INCR", number) == 2  # the connection goes on


async def test_a_failed_round_trip_fails_every_caller_in_it(
    client: aioredis.Redis, monkeypatch: Any
) -> None:
    batcher = CommandBatcher(client)

    def lost(replies: list[Any]) -> list[Any]:
        raise RedisConnectionError("lost")

    with monkeypatch.context() as patched:
        _break_round_trips(client, patched, lost)
        errors = metrics.REDIS_ERRORS._value.get()
        results = await asyncio.gather(
            batcher.execute("INCR", f"batch:{next(_keys)}"),
            batcher.execute("INCR", f"batch:{next(_keys)}"),
            return_exceptions=True,
        )
        assert [type(r) for r in results] == [RedisConnectionError, RedisConnectionError]
        assert metrics.REDIS_ERRORS._value.get() == errors + 1  # one round trip failed
        with pytest.raises(RedisConnectionError):  # several commands of one caller
            await batcher.execute_many([("INCR", f"batch:{next(_keys)}")] * 3)
    assert await batcher.execute("INCR", f"batch:{next(_keys)}") == 1  # usable again


async def test_a_caller_cancelled_before_the_round_trip_sends_nothing(
    client: aioredis.Redis,
) -> None:
    batcher = CommandBatcher(client)
    gone, kept = f"batch:{next(_keys)}", f"batch:{next(_keys)}"
    cancelled = asyncio.ensure_future(batcher.execute("INCR", gone))
    other = asyncio.ensure_future(batcher.execute("INCR", kept))
    await asyncio.sleep(0)  # both queued
    cancelled.cancel()
    assert await other == 1
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    # Cancelled before its turn's round trip: its command was not sent.
    assert await client.get(gone) is None
    lone = asyncio.ensure_future(batcher.execute("INCR", gone))
    await asyncio.sleep(0)
    lone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await lone
    assert await batcher.execute("INCR", kept) == 2  # the batcher goes on
    assert await client.get(gone) is None


async def test_concurrent_sends_claim_and_allocate_in_shared_round_trips(
    redis: aioredis.Redis, db: Db, monkeypatch: Any
) -> None:
    counters = Counters(redis, db)
    users = [next(_user_ids) for _ in range(4)]
    await counters.allocate([(u, 1, 1) for u in users])  # first use: recovery
    await counters.load_scripts()

    made = _count_round_trips(redis, monkeypatch)
    claims = await asyncio.gather(
        *(counters.send_rate_wait_and_claim(u, 0, 5, 60_000) for u in users),
        *(counters.send_rate_wait_and_claim(u, 10, 6, 60_000) for u in users),
    )
    allocations = await asyncio.gather(*(counters.allocate([(u, 1, 1)]) for u in users))
    assert made == [2]
    assert claims == [(0, True)] * 8
    assert [a.first_pts for (a,) in allocations] == [2] * 4


async def test_a_batched_claims_error_reply_is_raised_and_counted(
    redis: aioredis.Redis, db: Db
) -> None:
    counters = Counters(redis, db)
    user_id = next(_user_ids)
    # A rate log of the wrong type: the script's ZREMRANGEBYSCORE fails.
    await redis.set(send_rate_key(user_id), "not a sorted set")
    errors = metrics.REDIS_ERRORS._value.get()
    with pytest.raises(ResponseError):
        await counters.send_rate_wait_and_claim(user_id, 10, 2, 60_000)
    assert metrics.REDIS_ERRORS._value.get() == errors + 1
    assert not await redis.exists(send_claim_key(user_id, 2))


async def test_a_round_trip_cancelled_before_it_began_leaves_no_caller_waiting(
    client: aioredis.Redis,
) -> None:
    # Cancelling every task (as a loop's shutdown does) can reach the task that sends a
    # turn's queue before its first step: its body never runs, so it never takes the
    # queue. Its callers are cancelled, and the next turn's commands get a task of
    # their own instead of joining a queue that nobody sends.
    batcher = CommandBatcher(client)
    key = f"batch:{next(_keys)}"
    callers = [asyncio.ensure_future(batcher.execute("INCR", key)) for _ in range(2)]
    await asyncio.sleep(0)  # both queued; the round trip's task has not run yet
    (round_trip,) = batcher._running
    round_trip.cancel()
    # (a bound only so that the failure is not a hang)
    results = await asyncio.wait_for(asyncio.gather(*callers, return_exceptions=True), 60)
    assert [type(r) for r in results] == [asyncio.CancelledError] * 2
    assert await client.get(key) is None
    assert await asyncio.wait_for(batcher.execute("INCR", key), 60) == 1
    assert not batcher._running


async def test_replies_that_do_not_match_the_commands_fail_every_caller(
    client: aioredis.Redis, monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A reply short (or over) cannot be matched to its callers: each gets the error,
    # none is left waiting, and nothing is logged as an exception never retrieved.
    batcher = CommandBatcher(client)
    with monkeypatch.context() as patched:
        _break_round_trips(client, patched, lambda replies: replies[:-1])
        errors = metrics.REDIS_ERRORS._value.get()
        results = await asyncio.wait_for(
            asyncio.gather(
                *(batcher.execute("INCR", f"batch:{next(_keys)}") for _ in range(3)),
                return_exceptions=True,
            ),
            60,
        )
        assert [type(r) for r in results] == [InvalidResponse] * 3
        assert metrics.REDIS_ERRORS._value.get() == errors + 1
    assert await batcher.execute("INCR", f"batch:{next(_keys)}") == 1
    assert "never retrieved" not in caplog.text
