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
# Seconds a round trip waits for a connection when no timeout is given (the client's
# pool waits as long for one of its own).
CONNECTION_WAIT = 10.0


class RoundTrips:
    """Connections of their own to the server of ``pool`` (made as the pool makes its
    own, without the socket timeout), each carrying one round trip at a time.

    ``timeout`` bounds the wait for a connection (``CONNECTION_WAIT`` without one),
    and then the round trip on it: connecting, writing and reading every reply. A
    round trip that fails or is cancelled part way drops its connection (replies may
    still be on their way), so the next one never reads another's replies."""

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
        if "orig_socket_timeout" in kwargs:
            # What a maintenance notice's relaxed timeouts are undone to: none here either.
            kwargs["orig_socket_timeout"] = None
        self._connection_class = pool.connection_class
        self._connection_kwargs = kwargs
        self._callbacks = callbacks
        self.timeout = timeout
        self.size = size
        self._idle: list[AbstractConnection] = []
        self._made = 0  # connections made and not yet dropped, or places handed over
        # Round trips waiting for a connection, in order of arrival. Each is handed a
        # connection (one given back) or a place (one dropped: it makes its own).
        self._waiters: collections.deque[asyncio.Future[AbstractConnection | None]] = (
            collections.deque()
        )
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
        loop = asyncio.get_running_loop()
        try:
            # Waiting for a connection is bounded even without a timeout, as the
            # client's pool bounds it; the round trip itself then gets the whole
            # timeout again, so that a long wait never leaves commands that ran
            # without the time to read their replies.
            async with asyncio.timeout(self.timeout or CONNECTION_WAIT) as deadline:
                began = loop.time()
                connection = await self._take()
                if loop.time() != began or self.timeout is None:
                    deadline.reschedule(
                        None if self.timeout is None else loop.time() + self.timeout
                    )
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
                f"no connection, or no answer to {len(commands)} commands, in time"
            ) from None

    async def _reply(self, connection: AbstractConnection, name: Any) -> Any:
        try:
            reply = await connection.read_response()
        except ResponseError as exc:
            return exc
        callback = self._callbacks.get(name)
        return reply if callback is None else callback(reply)

    async def _take(self) -> AbstractConnection:
        if self._closed:
            raise RedisConnectionError("the client is closed")
        # While round trips wait, no connection is idle and no place is free (both go
        # to the first waiter): a newcomer queues behind them.
        if self._idle:
            return await self._checked(self._idle.pop())
        if self._made < self.size:
            self._made += 1
            return await self._connected(self._connection_class(**self._connection_kwargs))
        waiter: asyncio.Future[AbstractConnection | None] = (
            asyncio.get_running_loop().create_future()
        )
        self._waiters.append(waiter)
        try:
            handed = await waiter
        except BaseException:
            if waiter.cancelled() or not waiter.done():
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            elif waiter.exception() is None:
                # Handed a connection or a place, but gone before taking it: the
                # next waiter's, or free again.
                gone = waiter.result()
                if gone is None:
                    self._free_place()
                else:
                    await self._give_back(gone)
            raise
        if handed is None:  # a place: its count was passed on, not given up
            return await self._connected(self._connection_class(**self._connection_kwargs))
        return await self._checked(handed)

    async def _checked(self, connection: AbstractConnection) -> AbstractConnection:
        """An idle connection, or the same made anew if it is not fit to be written to:
        closed by the server while idle, or holding bytes nobody asked for. The
        client's pool checks the same on every checkout."""
        try:
            fit = not await connection.can_read()
        except (RedisConnectionError, OSError):
            fit = False
        except BaseException:
            await self._drop(connection)
            raise
        if fit:
            return connection
        await connection.disconnect(nowait=True)
        return await self._connected(connection)

    async def _connected(self, connection: AbstractConnection) -> AbstractConnection:
        try:
            await connection.connect()  # type: ignore[no-untyped-call]
        except BaseException:
            await self._drop(connection)
            raise
        return connection

    async def _give_back(self, connection: AbstractConnection) -> None:
        """Hands a connection whose round trip ended to the first waiter, else keeps it
        idle (closed, once the round trips are)."""
        if self._closed:
            await self._drop(connection)
        elif not self._hand(connection):
            self._idle.append(connection)

    def _free_place(self) -> None:
        """A connection's place is free: the first waiter's, to make one, else given up."""
        if not self._hand(None):
            self._made -= 1

    def _hand(self, handed: AbstractConnection | None) -> bool:
        """Whether a waiter took ``handed`` (a connection, or None: a place)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(handed)
                return True
        return False

    async def _drop(self, connection: AbstractConnection) -> None:
        """Closes a connection that must not carry another round trip."""
        self._free_place()
        # Without waiting for the close (this never suspends, so it also runs to its
        # end in a round trip being cancelled).
        await connection.disconnect(nowait=True)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        waiters, self._waiters = self._waiters, collections.deque()
        for waiter in waiters:  # each finds the round trips closed
            if not waiter.done():
                waiter.set_exception(RedisConnectionError("the client is closed"))
        for connection in idle:  # no waiter is left to take its place
            await self._drop(connection)
