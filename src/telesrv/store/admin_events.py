"""Telling a running server what an admin command changed in the database.

The server caches which auth key is logged in to which account; an admin command
runs in another process, so after ending authorizations it publishes their keys on a
Redis channel and the server forgets them and closes their sessions. A server that is
not running needs no message: it reads the database when it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from telesrv.store.redis_client import PubSubLink, RedisClient

log = logging.getLogger(__name__)

ENDED_CHANNEL = "telesrv:authorizations:ended"
# After a lost subscription, before subscribing again.
RESUBSCRIBE_SECONDS = 1.0


async def publish_ended(redis: RedisClient, keys: list[int]) -> int:
    """Publish each ended key; returns how many servers listened to the last one (on a
    Redis Cluster: those subscribed through the node it went to)."""
    listeners = 0
    for key in keys:
        listeners = int(await redis.publish(ENDED_CHANNEL, str(key)))
    return listeners


async def listen_ended(
    link: PubSubLink,
    on_ended: Callable[[int], None],
    subscribed: Callable[[], None] = lambda: None,
) -> None:
    """Call ``on_ended(perm_auth_key_id)`` for each published key, until cancelled;
    survives Redis going away and coming back."""
    while True:
        # Its own client without a read timeout: a quiet channel is not a dead Redis.
        client = link.subscriber()
        try:
            async with client.pubsub(ignore_subscribe_messages=True) as pubsub:
                await pubsub.subscribe(ENDED_CHANNEL)
                subscribed()
                async for message in pubsub.listen():
                    data = message.get("data")
                    try:
                        key = int(data)
                    except (TypeError, ValueError):
                        continue
                    on_ended(key)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("admin channel lost (%s); subscribing again", e or type(e).__name__)
            await asyncio.sleep(RESUBSCRIBE_SECONDS)
        finally:
            with contextlib.suppress(Exception):
                await client.aclose()
