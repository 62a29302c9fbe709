"""Redis commands of concurrent coroutines sent together: one pipeline per turn of the loop.

Every command sent on its own costs the client a pooled connection, a write, a read and
their timers; most of a send's Redis CPU is that, not the command. The hot commands (the
send's claim and rate check, the counter allocations, and with several server processes
the push's holder lookup) go through one ``CommandBatcher``:
the commands queued during one turn of the event loop leave as one pipeline (not MULTI:
each command stands alone, as if sent by itself, so this works on Redis Cluster too),
and each caller gets its own reply. A lone command still costs one round trip.

On one Redis server the round trip runs on the client's own connections for it
(``redis_round_trips.py``), which cost a fraction of redis-py's pipeline; on a cluster,
through the cluster client's pipeline, which routes each command to its node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.exceptions import InvalidResponse, RedisError, ResponseError

from telesrv.store.metrics import REDIS_ERRORS
from telesrv.store.redis_client import RedisClient, ServerRedis


class CommandBatcher:
    """Queues commands and sends each turn's queue as one pipeline (a lone command as
    itself). Replies come back as a pipeline gives them with ``raise_on_error=False``:
    an error reply is an exception object, returned rather than raised (the caller
    decides), and counted in the Redis error metric as a command sent alone is. A
    failure of the round trip as a whole (connection lost, timeout) is raised to every
    caller in it."""

    def __init__(self, redis: RedisClient) -> None:
        self._redis = redis
        self._queued: list[tuple[tuple[Any, ...], asyncio.Future[Any]]] = []
        # The loop whose next turn sends the queue, and the task that does; None while
        # nothing is queued.
        self._queued_on: asyncio.AbstractEventLoop | None = None
        self._sender: asyncio.Task[None] | None = None
        # Round trips in flight: the loop holds tasks only weakly.
        self._running: set[asyncio.Task[None]] = set()

    async def execute(self, *args: Any) -> Any:
        """One command's reply (an error reply as an exception object)."""
        (reply,) = await self.execute_many([args])
        return reply

    async def execute_many(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """The replies of ``commands``, in order; they go in the same round trip."""
        loop = asyncio.get_running_loop()
        if self._queued_on is not loop:
            # The first command of this turn: a task sends the queue. Its first step
            # runs on the loop's next turn, after every coroutine of this one.
            self._queued = []
            self._queued_on = loop
            task = loop.create_task(self._send())
            self._sender = task
            self._running.add(task)
            task.add_done_callback(self._ended)
        futures = []
        for args in commands:
            future: asyncio.Future[Any] = loop.create_future()
            self._queued.append((args, future))
            futures.append(future)
        try:
            return [await future for future in futures]
        finally:
            for future in futures:
                if not future.done():
                    future.cancel()  # its caller is gone: not sent, if not yet
                elif not future.cancelled():
                    future.exception()  # a failure is raised once, to the caller

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if self._sender is task:
            # Cancelled before its first step (a loop's shutdown cancels every task):
            # it never took its queue. Its callers must not wait for it, nor must the
            # next commands join a queue nobody will send.
            queued, self._queued, self._queued_on, self._sender = self._queued, [], None, None
            for _args, future in queued:
                future.cancel()

    async def _send(self) -> None:
        queued, self._queued = self._queued, []
        self._queued_on = self._sender = None
        # A caller cancelled before its command left takes it back, as a command sent
        # alone would not have been written yet. One window is wider than for a command
        # sent alone: a caller cancelled while this round trip waits for a pooled
        # connection still has its command sent (taking the connection first would mean
        # handing it to the pipeline through the client's internals). For an allocation
        # that is the same outcome as a send cancelled in flight: pts taken and never
        # written, filled later by the stale-hole repair.
        queued = [(args, future) for args, future in queued if not future.done()]
        if not queued:
            return
        try:
            try:
                replies = await self._round_trip(queued)
                if len(replies) != len(queued):
                    REDIS_ERRORS.inc()
                    raise InvalidResponse(f"{len(replies)} replies to {len(queued)} commands")
            except Exception as exc:
                for _args, future in queued:
                    if not future.done():
                        future.set_exception(exc)
                return
            for (_args, future), reply in zip(queued, replies, strict=True):
                if not future.done():
                    future.set_result(reply)
        finally:
            # Cancelled in flight (at shutdown), or stopped by anything that is not an
            # Exception: no caller is left waiting for a reply that will not come.
            for _args, future in queued:
                if not future.done():
                    future.cancel()

    async def _round_trip(
        self, queued: list[tuple[tuple[Any, ...], asyncio.Future[Any]]]
    ) -> list[Any]:
        if isinstance(self._redis, ServerRedis):
            try:
                answered = await self._redis.round_trips.run([args for args, _future in queued])
            except RedisError:
                REDIS_ERRORS.inc()
                raise
            for reply in answered:
                if isinstance(reply, ResponseError):
                    REDIS_ERRORS.inc()  # as if sent alone
            return answered
        if len(queued) == 1:
            # The metered client counts an error reply it raises.
            try:
                command = self._redis.execute_command(*queued[0][0])
                return [await command]
            except ResponseError as exc:
                return [exc]
        pipe = self._redis.pipeline(transaction=False)
        for args, _future in queued:
            pipe.execute_command(*args)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, ResponseError):
                REDIS_ERRORS.inc()  # as if sent alone
        return replies
