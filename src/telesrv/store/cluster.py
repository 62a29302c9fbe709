"""Several server processes on one Redis: who is alive, who holds which user, messages.

- ``cluster:procs``: sorted set, member a process id, score the unix time its entry
  expires. Every process renews its own entry well before then; a process that dies
  simply stops renewing and drops out.
- ``cluster:holders:{uid}``: sorted set per user, member the id of a process holding a
  session of that user, score the expiry as above. The braces make it a Redis Cluster
  hash tag, so the user's keys (counters included) share a slot.
- ``cluster:proc:<id>``: the pub/sub channel each process reads pushes from.
- ``cluster:bus``: the pub/sub channel every process reads: joins, leaves, and cache
  invalidations.

Everything here can be lost at any moment (a restarted or flushed Redis) without
losing a message: pushes are a shortcut, devices catch up with getDifference.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from telesrv.store.metrics import REDIS_ERRORS
from telesrv.store.redis_batch import CommandBatcher
from telesrv.store.redis_client import PubSubLink, RedisClient

PROCS_KEY = "cluster:procs"
BUS_CHANNEL = "cluster:bus"
# Users per pipeline when renewing registrations.
RENEW_CHUNK = 1000

_PUSH_HEAD = struct.Struct("<qBqq")


def holders_key(user_id: int) -> str:
    return f"cluster:holders:{{{user_id}}}"


def proc_channel(process_id: str) -> str:
    return f"cluster:proc:{process_id}"


async def announce(redis: RedisClient, process_id: str, now: float, ttl: float) -> list[str]:
    """Renew this process's entry and drop expired ones; the live processes, itself
    included."""
    pipe = redis.pipeline(transaction=False)
    pipe.zadd(PROCS_KEY, {process_id: now + ttl})
    pipe.zremrangebyscore(PROCS_KEY, "-inf", now)
    pipe.zrange(PROCS_KEY, 0, -1)
    results = await pipe.execute()
    return [_text(m) for m in results[2]]


async def withdraw(redis: RedisClient, process_id: str, user_ids: Iterable[int]) -> None:
    """This process stops: its entry and its registrations go at once."""
    pipe = redis.pipeline(transaction=False)
    pipe.zrem(PROCS_KEY, process_id)
    for user_id in user_ids:
        pipe.zrem(holders_key(user_id), process_id)
    await pipe.execute()


async def register(
    redis: RedisClient, process_id: str, user_ids: Sequence[int], now: float, ttl: float
) -> None:
    """This process holds sessions of these users until ``now + ttl`` (or renewal)."""
    for start in range(0, len(user_ids), RENEW_CHUNK):
        pipe = redis.pipeline(transaction=False)
        for user_id in user_ids[start : start + RENEW_CHUNK]:
            key = holders_key(user_id)
            pipe.zadd(key, {process_id: now + ttl})
            pipe.expire(key, int(ttl) + 1)
        await pipe.execute()


async def unregister(redis: RedisClient, process_id: str, user_ids: Sequence[int]) -> None:
    pipe = redis.pipeline(transaction=False)
    for user_id in user_ids:
        pipe.zrem(holders_key(user_id), process_id)
    await pipe.execute()


@dataclass(frozen=True, slots=True)
class Holders:
    """Who holds sessions of the users looked up."""

    found: dict[int, list[str]]  # user -> the processes (unexpired) holding sessions
    failed: list[int]  # users whose lookup got an error reply: holders unknown


async def holders(batch: CommandBatcher, user_ids: Sequence[int], now: float) -> Holders:
    """The processes holding sessions of each user: in one round trip, shared with the
    other commands of the same turn of the loop. A user whose command got an error
    reply is listed in ``failed``; the others are answered all the same."""
    replies = await batch.execute_many(
        [("ZRANGEBYSCORE", holders_key(user_id), now, "+inf") for user_id in user_ids]
    )
    found: dict[int, list[str]] = {}
    failed: list[int] = []
    for user_id, reply in zip(user_ids, replies, strict=True):
        if isinstance(reply, Exception):
            failed.append(user_id)
        else:
            found[user_id] = [_text(m) for m in reply]
    return Holders(found, failed)


@dataclass(frozen=True, slots=True)
class RemotePush:
    user_id: int
    body: bytes  # a serialized ``updates``
    exclude: tuple[int, int] | None  # (auth_key_id, session_id) not to push to


def encode_push(push: RemotePush) -> bytes:
    exclude = push.exclude
    head = _PUSH_HEAD.pack(
        push.user_id, exclude is not None, *(exclude if exclude is not None else (0, 0))
    )
    return head + push.body


def decode_push(data: bytes) -> RemotePush:
    user_id, has_exclude, key_id, session_id = _PUSH_HEAD.unpack_from(data)
    return RemotePush(
        user_id, data[_PUSH_HEAD.size :], (key_id, session_id) if has_exclude else None
    )


async def publish_pushes(link: PubSubLink, by_process: dict[str, list[RemotePush]]) -> int:
    """Every push to the process that holds the sessions: one round trip. Returns how
    many got an error reply (those are lost; the rest are published all the same)."""
    replies = await link.publish_many(
        [
            (proc_channel(process_id), encode_push(push))
            for process_id, pushes in by_process.items()
            for push in pushes
        ]
    )
    failed = sum(1 for reply in replies if isinstance(reply, Exception))
    # Returned rather than raised, these escape the client's own count of the errors it
    # raises: counted here one by one, as the command batcher counts its error replies.
    REDIS_ERRORS.inc(failed)
    return failed


async def publish_bus(link: PubSubLink, message: dict[str, Any]) -> None:
    await link.publish(BUS_CHANNEL, json.dumps(message, separators=(",", ":")))


def decode_bus(data: bytes | str) -> dict[str, Any]:
    decoded = json.loads(data)
    if not isinstance(decoded, dict):
        raise ValueError("bus message is not an object")
    return decoded


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
