"""Round trips of independent commands to one Redis server, on connections of their own.

The batcher (``redis_batch.py``) sends the hot commands of each turn of the loop in one
round trip. Through redis-py's pipeline, the client spent more CPU on such a round trip
than Redis spent on its commands: per command, a serializer and an encoder in Python and
a timer around each reply's read; per round trip, a task for the write's timeout, the
retry wrapper, the pool's lock and its observability hooks. None of it is needed here:
the arguments are strings, bytes and numbers, the commands stand alone, and one deadline
for the whole round trip is all the timeout they need. So the commands are packed by
hiredis in C, written at once, and their replies read in order by the connection's own
parser, on connections made without a per-operation timeout.

A reply is what the client's own command would have returned (its response callback is
applied); an error reply is returned as its exception object, in its place.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import hiredis
from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

# Connections per process for these round trips. A round trip holds one until its last
# reply is read; the batcher starts at most one per turn of the loop, so a few are in
# flight at once. Past this many, a round trip waits for one to come back.
ROUND_TRIP_CONNECTIONS = 16


class RoundTrips:
    """Connections of their own to the server of ``pool`` (made as the pool makes its
    own, without the socket timeout), each carrying one round trip at a time.

    ``timeout`` bounds a whole round trip: waiting for a connection, connecting,
    writing and reading every reply. A round trip that fails or is cancelled part way
    drops its connection (replies may still be on their way), so the next one never
    reads another's replies."""

    def __init__(
        self,
        pool: ConnectionPool,
        callbacks: Mapping[str | bytes, Callable[..., Any]],
        *,
        timeout: float | None,
        size: int = ROUND_TRIP_CONNECTIONS,
    ) -> None:
        if size < 1:
            raise ValueError("round trips need at least one connection")
        kwargs = dict(pool.connection_kwargs)
        kwargs["socket_timeout"] = None
        self._connection_class = pool.connection_class
        self._connection_kwargs = kwargs
        self._callbacks = callbacks
        self.timeout = timeout
        self.size = size
        self._idle: list[AbstractConnection] = []
        self._made = 0  # connections made and not yet dropped
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed = False

    @property
    def connections(self) -> int:
        """Connections open or being opened, idle or carrying a round trip."""
        return self._made

    async def run(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """The replies of ``commands``, in order, from one round trip."""
        if not commands:
            return []
        try:
            packed = [hiredis.pack_command(args) for args in commands]
        except TypeError as exc:
            raise DataError(str(exc)) from None
        try:
            async with asyncio.timeout(self.timeout):
                connection = await self._take()
                try:
                    await connection.send_packed_command(packed, check_health=False)
                    replies = [await self._reply(connection, args[0]) for args in commands]
                except BaseException:
                    await self._drop(connection)
                    raise
                await self._give_back(connection)
                return replies
        except TimeoutError:
            raise RedisTimeoutError(
                f"no answer to {len(commands)} commands within {self.timeout} s"
            ) from None

    async def _reply(self, connection: AbstractConnection, name: Any) -> Any:
        try:
            reply = await connection.read_response()
        except ResponseError as exc:
            return exc
        callback = self._callbacks.get(name)
        return reply if callback is None else callback(reply)

    async def _take(self) -> AbstractConnection:
        while True:
            if self._closed:
                raise RedisConnectionError("the client is closed")
            if self._idle:
                connection = self._idle.pop()
                try:
                    # Closed by the server while idle, or left with bytes nobody
                    # asked for: not to be written to. The client's pool checks the
                    # same on every checkout.
                    if await connection.can_read():
                        raise RedisConnectionError("unexpected data on an idle connection")
                except (RedisConnectionError, OSError):
                    await connection.disconnect(nowait=True)
                    await self._connect(connection)  # still counted: made anew
                return connection
            if self._made < self.size:
                self._made += 1
                connection = self._connection_class(**self._connection_kwargs)
                await self._connect(connection)
                return connection
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, but gone: the next waiter's turn
                raise

    async def _connect(self, connection: AbstractConnection) -> None:
        try:
            await connection.connect()  # type: ignore[no-untyped-call]
        except BaseException:
            await self._drop(connection)
            raise

    async def _give_back(self, connection: AbstractConnection) -> None:
        if self._closed:
            await self._drop(connection)
            return
        self._idle.append(connection)
        self._wake()

    async def _drop(self, connection: AbstractConnection) -> None:
        self._made -= 1
        self._wake()
        # Without waiting for the close (this never suspends, so it also runs to its
        # end in a round trip being cancelled).
        await connection.disconnect(nowait=True)

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            await self._drop(connection)
        while self._waiters:  # each finds the client closed
            self._wake()
