"""QR login tokens (auth.exportLoginToken / acceptLoginToken / importLoginToken), in Redis.

A token lives a few seconds and must be seen by every server process: the device that
shows it and the one that scans it may be connected to different ones. Redis with a
TTL fits: nothing here has to survive a Redis restart (the QR code is simply shown
again).

- ``qrlogin:tok:{<token hex>}``: hash, one per token: ``k`` the permanent auth key that
  exported it, ``e`` when it expires (unix seconds), ``x`` the except_ids as
  ``,id,id,``; once accepted ``u`` the accepting user and ``h`` the new authorization's
  hash; once the waiting key has logged in with it, ``d``.
- ``qrlogin:cur:{k<auth key id>}``: the token the key shows now (its hex). A key shows
  one token at a time: a new export replaces (and deletes) the one before, so each key
  holds at most one token however often it exports.
- ``qrlogin:rate:{k<auth key id>}``: the key's exports of the last minute (the same
  sliding-window log as the send rate limit), in the slot of ``cur``.
- ``qrlogin:global:<minute>``: exports of all keys in one minute, a fixed window.

Every script touches one key (or keys of one hash tag), so this works on Redis Cluster.
Expiry is judged against the caller's clock (``now``), so tests need not wait; the Redis
TTLs only bound how long dead tokens take memory.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from redis.commands.core import AsyncScript

# The send rate limit's script: one sliding-window log per key, on Redis's clock.
from telesrv.store.counter_scripts import RATE_LIMIT_LUA
from telesrv.store.redis_client import RedisClient

RATE_WINDOW_MS = 60_000
GLOBAL_WINDOW = 60  # seconds per fixed window of the global count

# KEYS: the token. ARGV: now, accepting user, new authorization hash, TTL seconds once
# accepted. Returns {status} or {"ok", exporting key}.
_ACCEPT_LUA = """
local rec = redis.call('HMGET', KEYS[1], 'k', 'e', 'x', 'u', 'd')
if not rec[1] then
  return {'invalid'}
end
if rec[4] or rec[5] then
  return {'accepted'}
end
if tonumber(rec[2]) <= tonumber(ARGV[1]) then
  return {'expired'}
end
if rec[3] and string.find(rec[3], ',' .. ARGV[2] .. ',', 1, true) then
  return {'excepted'}
end
redis.call('HSET', KEYS[1], 'u', ARGV[2], 'h', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return {'ok', rec[1]}
"""

# KEYS: the token. ARGV: the caller's auth key id, now. The waiting key takes the login
# an accepted token carries, once. Returns {status, ...}: {"ok", user, hash},
# {"waiting", expires}, or a refusal.
_COLLECT_LUA = """
local rec = redis.call('HMGET', KEYS[1], 'k', 'e', 'u', 'h', 'd')
if not rec[1] or rec[1] ~= ARGV[1] then
  return {'invalid'}
end
if rec[5] then
  return {'accepted'}
end
if rec[3] then
  redis.call('HSET', KEYS[1], 'd', '1')
  return {'ok', rec[3], rec[4]}
end
if tonumber(rec[2]) <= tonumber(ARGV[2]) then
  return {'expired'}
end
return {'waiting', rec[2]}
"""

# KEYS: a token the key no longer shows. Deleted unless someone accepted it meanwhile
# (then the key collects it on its next export or import, as if it had not moved on).
_DROP_LUA = """
if redis.call('HEXISTS', KEYS[1], 'u') == 0 then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def token_key(token: bytes) -> str:
    return f"qrlogin:tok:{{{token.hex()}}}"


def current_key(auth_key_id: int) -> str:
    return f"qrlogin:cur:{{k{auth_key_id}}}"


def rate_key(auth_key_id: int) -> str:
    return f"qrlogin:rate:{{k{auth_key_id}}}"


def global_key(now: float) -> str:
    return f"qrlogin:global:{int(now // GLOBAL_WINDOW)}"


class Status(enum.Enum):
    OK = "ok"
    WAITING = "waiting"  # exported, not accepted yet
    INVALID = "invalid"  # unknown (never issued, replaced, long gone) or another key's
    EXPIRED = "expired"
    ACCEPTED = "accepted"  # accepted already (and maybe used already)
    EXCEPTED = "excepted"  # the accepting user is in the token's except_ids


@dataclass(frozen=True, slots=True)
class Accepted:
    status: Status
    auth_key_id: int = 0  # the key that exported the token (when OK)


@dataclass(frozen=True, slots=True)
class Collected:
    status: Status
    user_id: int = 0  # when OK: the account the key now logs in to
    authorization_hash: int = 0  # when OK: the hash acceptLoginToken answered
    expires: int = 0  # when WAITING


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class LoginTokens:
    def __init__(self, redis: RedisClient) -> None:
        self._redis = redis
        self._accept: AsyncScript = redis.register_script(_ACCEPT_LUA)
        self._collect: AsyncScript = redis.register_script(_COLLECT_LUA)
        self._drop: AsyncScript = redis.register_script(_DROP_LUA)
        self._rate: AsyncScript = redis.register_script(RATE_LIMIT_LUA)

    async def key_rate_wait(self, auth_key_id: int, per_minute: int) -> int:
        """Count one export of the key: 0 when allowed, else the seconds to wait."""
        if per_minute <= 0:
            return 0
        wait_ms = int(
            await self._rate(keys=[rate_key(auth_key_id)], args=[per_minute, RATE_WINDOW_MS, 1])
        )
        return max(1, math.ceil(wait_ms / 1000)) if wait_ms > 0 else 0

    async def global_rate_wait(self, now: float, per_minute: int) -> int:
        """Count one export of any key in this minute's window: 0 when allowed, else the
        seconds until the next window."""
        if per_minute <= 0:
            return 0
        key = global_key(now)
        pipe = self._redis.pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, GLOBAL_WINDOW * 2)
        count, _ = await pipe.execute()
        if int(count) <= per_minute:
            return 0
        return max(1, math.ceil(GLOBAL_WINDOW - now % GLOBAL_WINDOW))

    async def current(self, auth_key_id: int) -> bytes | None:
        value = await self._redis.get(current_key(auth_key_id))
        return None if value is None else bytes.fromhex(_text(value))

    async def issue(
        self,
        auth_key_id: int,
        token: bytes,
        expires: int,
        except_ids: Sequence[int],
        keep_seconds: int,
        replaces: bytes | None,
    ) -> None:
        """Store a new token as the key's current one (kept ``keep_seconds``, past its
        expiry, so that a late scan is told it expired) and drop the one it replaces."""
        key = token_key(token)
        pipe = self._redis.pipeline(transaction=False)
        pipe.hset(
            key,
            mapping={
                "k": str(auth_key_id),
                "e": str(expires),
                "x": "," + ",".join(str(i) for i in except_ids) + ",",
            },
        )
        pipe.expire(key, keep_seconds)
        pipe.set(current_key(auth_key_id), token.hex(), ex=keep_seconds)
        await pipe.execute()
        if replaces is not None and replaces != token:
            await self._drop(keys=[token_key(replaces)])

    async def accept(
        self, token: bytes, user_id: int, authorization_hash: int, now: float, keep_seconds: int
    ) -> Accepted:
        reply = await self._accept(
            keys=[token_key(token)], args=[now, user_id, authorization_hash, keep_seconds]
        )
        status = Status(_text(reply[0]))
        if status is not Status.OK:
            return Accepted(status)
        return Accepted(status, int(reply[1]))

    async def collect(self, token: bytes, auth_key_id: int, now: float) -> Collected:
        reply = await self._collect(keys=[token_key(token)], args=[auth_key_id, now])
        status = Status(_text(reply[0]))
        if status is Status.OK:
            return Collected(status, user_id=int(reply[1]), authorization_hash=int(reply[2]))
        if status is Status.WAITING:
            return Collected(status, expires=int(reply[1]))
        return Collected(status)
