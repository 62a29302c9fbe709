"""Per-user and per-address rate limits in Redis: sliding windows of what was done,
and the daily cap of distinct phone numbers a user looks up.

Each check counts and answers in one script call: 0 when the action is accepted (and
counted), else the seconds until it would be, which the caller answers as
FLOOD_WAIT_X. A limit of 0 turns a check off. The send rate's window is also checked
inside the send's own claim script (``counters.py``), under the same key.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from redis.commands.core import AsyncScript

from telesrv.store.counter_scripts import PHONE_LOOKUPS_LUA, RATE_LIMIT_LUA
from telesrv.store.redis_client import RedisClient

MINUTE_MS = 60_000  # the window of the per-minute limits
SEND_RATE_WINDOW_MS = MINUTE_MS
PHONE_LOOKUP_WINDOW = 86_400  # seconds: "per day"


def send_rate_key(user_id: int) -> str:
    return f"ratelimit:messages:send:{{{user_id}}}"


def phone_lookup_rate_key(user_id: int) -> str:
    return f"ratelimit:contacts:lookup:{{{user_id}}}"


def people_search_rate_key(user_id: int) -> str:
    return f"ratelimit:contacts:search:{{{user_id}}}"


def profile_change_rate_key(user_id: int) -> str:
    return f"ratelimit:account:profile:{{{user_id}}}"


def media_rate_key(user_id: int) -> str:
    return f"ratelimit:media:process:{{{user_id}}}"


def login_code_ip_rate_key(ip: str) -> str:
    return f"ratelimit:auth:sendcode:{{{ip}}}"


def phone_lookups_key(user_id: int) -> str:
    return f"lookups:phones:{{{user_id}}}"


class RateLimits:
    def __init__(self, redis: RedisClient) -> None:
        self._redis = redis
        self._rate_script: AsyncScript = redis.register_script(RATE_LIMIT_LUA)
        self._lookups_script: AsyncScript = redis.register_script(PHONE_LOOKUPS_LUA)

    async def load_scripts(self) -> None:
        """Load the scripts now (at startup) rather than on the first NOSCRIPT."""
        self._rate_script.sha = await self._redis.script_load(self._rate_script.script)
        self._lookups_script.sha = await self._redis.script_load(self._lookups_script.script)

    async def send_rate_wait(self, user_id: int, per_minute: int, n: int = 1) -> int:
        """Count ``n`` sends (a forward of n messages is n) against the user's minute."""
        return await self._wait(send_rate_key(user_id), per_minute, SEND_RATE_WINDOW_MS, n)

    async def login_code_ip_rate_wait(self, ip: str, limit: int, window_ms: int) -> int:
        """Count one login code asked for from ``ip`` against its window."""
        return await self._wait(login_code_ip_rate_key(ip), limit, window_ms)

    async def phone_lookup_rate_wait(self, user_id: int, per_minute: int) -> int:
        """Count one phone lookup call (importContacts, resolvePhone)."""
        return await self._wait(phone_lookup_rate_key(user_id), per_minute, MINUTE_MS)

    async def people_search_rate_wait(self, user_id: int, per_minute: int) -> int:
        """Count one contacts.search call."""
        return await self._wait(people_search_rate_key(user_id), per_minute, MINUTE_MS)

    async def profile_change_rate_wait(self, user_id: int, per_minute: int) -> int:
        """Count one change of names or username."""
        return await self._wait(profile_change_rate_key(user_id), per_minute, MINUTE_MS)

    async def media_rate_wait(self, user_id: int, per_minute: int) -> int:
        """Count one upload made into a photo or document."""
        return await self._wait(media_rate_key(user_id), per_minute, MINUTE_MS)

    async def charge_phone_lookups(
        self, user_id: int, tokens: Sequence[str], per_day: int
    ) -> tuple[list[bool], int]:
        """Count distinct looked-up numbers (as opaque tokens) against the user's daily
        cap: per token whether it may be looked up (repeats are free), and the seconds
        until the day's count starts over. `per_day == 0` turns it off."""
        if per_day <= 0 or not tokens:
            return [True] * len(tokens), 0
        reply = await self._lookups_script(
            keys=[phone_lookups_key(user_id)], args=[per_day, PHONE_LOOKUP_WINDOW, *tokens]
        )
        return [bool(int(flag)) for flag in reply[1:]], max(1, int(reply[0]))

    async def _wait(self, key: str, limit: int, window_ms: int, n: int = 1) -> int:
        """0 when ``n`` more fit ``key``'s window (they are counted), else the whole
        seconds (>= 1) until they would. ``limit`` 0 or less: off."""
        if limit <= 0:
            return 0
        wait_ms = await self._wait_ms(key, limit, window_ms, n)
        return max(1, math.ceil(wait_ms / 1000)) if wait_ms > 0 else 0

    async def _wait_ms(self, key: str, limit: int, window_ms: int, n: int = 1) -> int:
        # AsyncScript reloads itself on NOSCRIPT (one extra round trip, only then).
        wait_ms: int = await self._rate_script(keys=[key], args=[limit, window_ms, max(1, n)])
        return wait_ms
