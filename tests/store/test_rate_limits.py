"""Rate limits in Redis: each window counts up to its limit and no further, slides,
and survives a script flush; the daily cap counts distinct phone numbers."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
import redis.asyncio as aioredis

from telesrv.store.rate_limits import (
    PHONE_LOOKUP_WINDOW,
    RateLimits,
    phone_lookups_key,
    send_rate_key,
)

_user_ids = itertools.count(1_200_001)


@pytest.fixture
def user_id() -> int:
    return next(_user_ids)


@pytest.fixture
def rate_limits(redis: aioredis.Redis) -> RateLimits:
    return RateLimits(redis)


async def test_send_rate_allows_up_to_the_limit(rate_limits: RateLimits, user_id: int) -> None:
    for _ in range(5):
        assert await rate_limits.send_rate_wait(user_id, 5) == 0
    wait = await rate_limits.send_rate_wait(user_id, 5)
    assert isinstance(wait, int) and 1 <= wait <= 60
    # Rejected attempts do not extend the wait.
    assert 1 <= await rate_limits.send_rate_wait(user_id, 5) <= wait
    assert await rate_limits._wait_ms(send_rate_key(user_id), 5, 60_000) > 0


async def test_send_rate_zero_disables(
    rate_limits: RateLimits, redis: aioredis.Redis, user_id: int
) -> None:
    for _ in range(100):
        assert await rate_limits.send_rate_wait(user_id, 0) == 0
    assert await redis.exists(send_rate_key(user_id)) == 0


async def test_send_rate_users_are_independent(rate_limits: RateLimits) -> None:
    a, b = next(_user_ids), next(_user_ids)
    for _ in range(3):
        assert await rate_limits.send_rate_wait(a, 3) == 0
    assert await rate_limits.send_rate_wait(a, 3) > 0
    for _ in range(3):
        assert await rate_limits.send_rate_wait(b, 3) == 0


async def test_send_rate_survives_script_flush(
    rate_limits: RateLimits, redis: aioredis.Redis, user_id: int
) -> None:
    assert await rate_limits.send_rate_wait(user_id, 2) == 0
    await redis.script_flush()
    assert await rate_limits.send_rate_wait(user_id, 2) == 0
    assert await rate_limits.send_rate_wait(user_id, 2) > 0


async def test_rate_window_slides(rate_limits: RateLimits, user_id: int) -> None:
    key = send_rate_key(user_id)
    assert await rate_limits._wait_ms(key, 2, 600) == 0
    await asyncio.sleep(0.2)
    assert await rate_limits._wait_ms(key, 2, 600) == 0
    wait_ms = await rate_limits._wait_ms(key, 2, 600)
    # The first send leaves the window first: about 400 ms from now.
    assert 0 < wait_ms <= 400
    await asyncio.sleep(wait_ms / 1000 + 0.02)
    assert await rate_limits._wait_ms(key, 2, 600) == 0
    assert await rate_limits._wait_ms(key, 2, 600) > 0


async def test_send_rate_counts_each_of_a_batch(rate_limits: RateLimits, user_id: int) -> None:
    assert await rate_limits.send_rate_wait(user_id, 5, n=3) == 0
    assert await rate_limits.send_rate_wait(user_id, 5, n=3) > 0  # 6: one past the limit
    assert await rate_limits.send_rate_wait(user_id, 5, n=2) == 0  # 5: at the limit
    assert await rate_limits.send_rate_wait(user_id, 5) > 0


async def test_send_rate_admits_a_batch_larger_than_the_limit_alone(
    rate_limits: RateLimits, redis: aioredis.Redis, user_id: int
) -> None:
    assert await rate_limits.send_rate_wait(user_id, 5, n=8) == 0  # an empty window
    assert await redis.zcard(send_rate_key(user_id)) == 8
    assert await rate_limits.send_rate_wait(user_id, 5) > 0
    other = next(_user_ids)
    assert await rate_limits.send_rate_wait(other, 5) == 0
    assert await rate_limits.send_rate_wait(other, 5, n=8) > 0  # needs the window empty


async def test_phone_lookups_count_distinct_numbers_up_to_the_cap(
    rate_limits: RateLimits, redis: aioredis.Redis, user_id: int
) -> None:
    allowed, _ = await rate_limits.charge_phone_lookups(user_id, ["a", "b", "c"], 4)
    assert allowed == [True, True, True]
    # Repeats are free; "d" is the 4th (at the cap), "e" one past it.
    allowed, retry_after = await rate_limits.charge_phone_lookups(user_id, ["a", "d", "e", "b"], 4)
    assert allowed == [True, True, False, True]
    assert 86_000 < retry_after <= PHONE_LOOKUP_WINDOW
    assert await redis.scard(phone_lookups_key(user_id)) == 4
    assert (await rate_limits.charge_phone_lookups(user_id, ["e"], 4))[0] == [False]
    assert (await rate_limits.charge_phone_lookups(user_id, ["e"], 0))[0] == [True]  # off


async def test_phone_lookup_rate_allows_up_to_the_limit(
    rate_limits: RateLimits, user_id: int
) -> None:
    for _ in range(3):
        assert await rate_limits.phone_lookup_rate_wait(user_id, 3) == 0
    assert 1 <= await rate_limits.phone_lookup_rate_wait(user_id, 3) <= 60
    assert await rate_limits.phone_lookup_rate_wait(user_id, 0) == 0


@pytest.mark.parametrize(
    "check",
    [
        lambda limits, user, limit: limits.people_search_rate_wait(user, limit),
        lambda limits, user, limit: limits.profile_change_rate_wait(user, limit),
        lambda limits, user, limit: limits.media_rate_wait(user, limit),
        lambda limits, user, limit: limits.login_code_ip_rate_wait(
            f"10.0.0.{user % 250}", limit, 60_000
        ),
    ],
    ids=["people_search", "profile_change", "media", "login_code_ip"],
)
async def test_each_window_takes_its_limit_and_refuses_one_past_it(
    rate_limits: RateLimits, user_id: int, check: Any
) -> None:
    for _ in range(3):
        assert await check(rate_limits, user_id, 3) == 0
    assert 1 <= await check(rate_limits, user_id, 3) <= 60
    other = next(_user_ids)
    assert await check(rate_limits, other, 3) == 0  # a window of its own
    assert await check(rate_limits, user_id, 0) == 0  # off


async def test_load_scripts_avoids_the_noscript_round_trip(
    rate_limits: RateLimits, redis: aioredis.Redis, user_id: int
) -> None:
    await redis.script_flush()
    await rate_limits.load_scripts()
    loaded = await redis.script_exists(
        rate_limits._rate_script.sha, rate_limits._lookups_script.sha
    )
    assert loaded == [True, True]
    assert await rate_limits.send_rate_wait(user_id, 1) == 0
    assert (await rate_limits.charge_phone_lookups(user_id, ["a"], 1))[0] == [True]
