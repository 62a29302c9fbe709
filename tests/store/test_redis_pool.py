"""RedisPool: idle connections handed out and taken back directly while nobody waits;
past the pool size, borrowers wait (in order) and give up after the pool's timeout."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from telesrv.app import open_redis
from telesrv.store.redis_pool import RedisPool


async def test_the_server_client_uses_the_pool(redis_url: str) -> None:
    client = await open_redis(redis_url)
    try:
        assert isinstance(client.connection_pool, RedisPool)
    finally:
        await client.aclose()


async def test_sequential_commands_reuse_one_connection(redis_url: str) -> None:
    pool = RedisPool.from_url(redis_url, max_connections=4, timeout=10)
    client = aioredis.Redis(connection_pool=pool)
    try:
        for n in range(20):
            await client.set("pool:test:seq", n)
            assert await client.get("pool:test:seq") == str(n).encode()
            pipe = client.pipeline(transaction=False)
            pipe.incr("pool:test:seq")
            pipe.get("pool:test:seq")
            assert await pipe.execute() == [n + 1, str(n + 1).encode()]
        assert len(pool._available_connections) == 1
        assert not pool._in_use_connections
    finally:
        await client.delete("pool:test:seq")
        await client.aclose()
        await pool.disconnect()


async def test_a_crowd_past_the_pool_size_waits_and_is_served(redis_url: str) -> None:
    pool = RedisPool.from_url(redis_url, max_connections=3, timeout=10)
    client = aioredis.Redis(connection_pool=pool)
    try:
        got = await asyncio.gather(*(client.incr("pool:test:crowd") for _ in range(200)))
        assert sorted(got) == list(range(1, 201))
        assert len(pool._available_connections) == 3  # never more than the pool size
        assert not pool._in_use_connections
        assert await client.get("pool:test:crowd") == b"200"
    finally:
        await client.delete("pool:test:crowd")
        await client.aclose()
        await pool.disconnect()


async def test_an_exhausted_pool_gives_up_after_its_timeout(redis_url: str) -> None:
    pool = RedisPool.from_url(redis_url, max_connections=2, timeout=0.05)
    try:
        held = [await pool.get_connection(), await pool.get_connection()]
        with pytest.raises(RedisConnectionError, match="No connection available"):
            await pool.get_connection()
        # A waiter is served as soon as a connection comes back.
        pool.timeout = 10
        waiter = asyncio.create_task(pool.get_connection())
        await asyncio.sleep(0)
        await pool.release(held.pop())
        again = await asyncio.wait_for(waiter, 5)
        held.append(again)
        for connection in held:
            await pool.release(connection)
        assert len(pool._available_connections) == 2
        assert not pool._in_use_connections
    finally:
        await pool.disconnect()
