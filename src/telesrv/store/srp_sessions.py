"""Password checks in flight (the server's SRP secret between account.getPassword and
the check that uses it) and the password attempts' rate limits, in Redis.

- ``srp:cur:{k<auth key id>}``: hash, the key's one open exchange: ``i`` its srp_id,
  ``u`` the account, ``b`` the server's secret (hex), ``B`` the public value offered
  (hex), ``p`` a digest of the password it was made for, ``e`` when it expires (unix
  seconds). A new getPassword replaces it; a check takes it (once).
- ``srp:salt:{u<user id>}``: the server's part of the account's next salt1 (every
  device is offered the same one for a while, so any of them may set the password).
- ``srp:rate:{k<auth key id>}`` and ``srp:rate:{u<user id>}``: the attempts of the last
  window per key and per account (the send rate limit's sliding-window log).
- ``srp:get:{k<auth key id>}``: the key's account.getPassword calls of the last window
  (same log).
- ``srp:wait:{k<auth key id>}``: present while the key may be waiting for its
  account's password (set once a sign-in told it SESSION_PASSWORD_NEEDED). Only a
  marked key's wait is looked up in PostgreSQL: calls of keys that never signed in
  cost no query. The table stays the truth; a marker whose wait is gone is dropped
  at its first look-up, and one lost with Redis costs the key a new login code.

Nothing here has to survive a Redis restart: the client asks for a new exchange. Every
script touches one key, so this works on Redis Cluster. Expiry is judged against the
caller's clock (``now``); the TTLs only bound how long dead exchanges take memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from redis.commands.core import AsyncScript

from telesrv.store.counter_scripts import RATE_LIMIT_LUA
from telesrv.store.redis_client import RedisClient

# KEYS: the key's exchange. ARGV: the srp_id the client names. Takes the exchange when
# the id is its own: returns {u, b, B, p, e}; else nil (and the exchange stays).
_TAKE_LUA = """
local rec = redis.call('HMGET', KEYS[1], 'i', 'u', 'b', 'B', 'p', 'e')
if not rec[1] or rec[1] ~= ARGV[1] then
  return nil
end
redis.call('DEL', KEYS[1])
return {rec[2], rec[3], rec[4], rec[5], rec[6]}
"""


def exchange_key(auth_key_id: int) -> str:
    return f"srp:cur:{{k{auth_key_id}}}"


def salt_key(user_id: int) -> str:
    return f"srp:salt:{{u{user_id}}}"


def key_rate_key(auth_key_id: int) -> str:
    return f"srp:rate:{{k{auth_key_id}}}"


def account_rate_key(user_id: int) -> str:
    return f"srp:rate:{{u{user_id}}}"


def state_rate_key(auth_key_id: int) -> str:
    return f"srp:get:{{k{auth_key_id}}}"


def waiting_key(auth_key_id: int) -> str:
    return f"srp:wait:{{k{auth_key_id}}}"


@dataclass(frozen=True, slots=True)
class Exchange:
    srp_id: int
    user_id: int
    b: int  # the server's secret exponent
    big_b: bytes  # B as offered
    password_digest: bytes  # which password it was made for
    expires: int

    def __repr__(self) -> str:  # keeps the secret out of tracebacks and logs
        return f"Exchange(srp_id={self.srp_id}, user_id={self.user_id})"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class SrpSessions:
    def __init__(self, redis: RedisClient) -> None:
        self._redis = redis
        self._take: AsyncScript = redis.register_script(_TAKE_LUA)
        self._rate: AsyncScript = redis.register_script(RATE_LIMIT_LUA)

    async def open(self, auth_key_id: int, exchange: Exchange, keep_seconds: int) -> None:
        """The key's open exchange from now on (the one before is forgotten)."""
        key = exchange_key(auth_key_id)
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(key)
        pipe.hset(
            key,
            mapping={
                "i": str(exchange.srp_id),
                "u": str(exchange.user_id),
                "b": format(exchange.b, "x"),
                "B": exchange.big_b.hex(),
                "p": exchange.password_digest.hex(),
                "e": str(exchange.expires),
            },
        )
        pipe.expire(key, keep_seconds)
        await pipe.execute()

    async def take(self, auth_key_id: int, srp_id: int) -> Exchange | None:
        """The key's open exchange if ``srp_id`` is its id, removed (single use)."""
        reply = await self._take(keys=[exchange_key(auth_key_id)], args=[str(srp_id)])
        if reply is None:
            return None
        user, b, big_b, digest, expires = (_text(v) for v in reply)
        return Exchange(
            srp_id=srp_id,
            user_id=int(user),
            b=int(b, 16),
            big_b=bytes.fromhex(big_b),
            password_digest=bytes.fromhex(digest),
            expires=int(expires),
        )

    async def current(self, auth_key_id: int) -> Exchange | None:
        """The key's open exchange, left open (None: there is none)."""
        rec: list[bytes | str | None] = await self._redis.hmget(
            exchange_key(auth_key_id), ["i", "u", "b", "B", "p", "e"]
        )
        present = [v for v in rec if v is not None]
        if len(present) != len(rec):
            return None
        srp_id, user, b, big_b, digest, expires = (_text(v) for v in present)
        return Exchange(
            srp_id=int(srp_id),
            user_id=int(user),
            b=int(b, 16),
            big_b=bytes.fromhex(big_b),
            password_digest=bytes.fromhex(digest),
            expires=int(expires),
        )

    async def forget(self, auth_key_id: int) -> None:
        await self._redis.delete(exchange_key(auth_key_id))

    async def new_salt_prefix(self, user_id: int, candidate: bytes, keep_seconds: int) -> bytes:
        """The account's current new-salt prefix; ``candidate`` becomes it if there is
        none."""
        key = salt_key(user_id)
        pipe = self._redis.pipeline(transaction=True)
        pipe.set(key, candidate.hex(), nx=True, ex=keep_seconds)
        pipe.get(key)
        _, value = await pipe.execute()
        return bytes.fromhex(_text(value))

    async def current_salt_prefix(self, user_id: int) -> bytes | None:
        value = await self._redis.get(salt_key(user_id))
        return None if value is None else bytes.fromhex(_text(value))

    async def key_rate_wait(self, auth_key_id: int, limit: int, window: float) -> int:
        """Count one attempt on the key: 0 when allowed, else the seconds to wait."""
        return await self._rate_wait(key_rate_key(auth_key_id), limit, window)

    async def account_rate_wait(self, user_id: int, limit: int, window: float) -> int:
        """Count one attempt on the account: 0 when allowed, else the seconds to wait."""
        return await self._rate_wait(account_rate_key(user_id), limit, window)

    async def state_rate_wait(self, auth_key_id: int, limit: int, window: float) -> int:
        """Count one account.getPassword of the key: 0 when allowed, else the seconds to
        wait."""
        return await self._rate_wait(state_rate_key(auth_key_id), limit, window)

    async def mark_waiting(self, auth_key_id: int, keep_seconds: int) -> None:
        await self._redis.set(waiting_key(auth_key_id), 1, ex=max(1, keep_seconds))

    async def is_marked_waiting(self, auth_key_id: int) -> bool:
        return bool(await self._redis.exists(waiting_key(auth_key_id)))

    async def unmark_waiting(self, auth_key_ids: Iterable[int]) -> None:
        # One key per command: the markers of different keys live in different slots.
        pipe = self._redis.pipeline(transaction=False)
        for auth_key_id in auth_key_ids:
            pipe.delete(waiting_key(auth_key_id))
        await pipe.execute()

    async def _rate_wait(self, key: str, limit: int, window: float) -> int:
        if limit <= 0:
            return 0
        wait_ms = int(await self._rate(keys=[key], args=[limit, int(window * 1000), 1]))
        return max(1, math.ceil(wait_ms / 1000)) if wait_ms > 0 else 0
