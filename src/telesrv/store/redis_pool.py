"""The Redis connection pool: redis-py's blocking pool, with a cheap way in and out for
the common case.

Every command and pipeline borrows a connection. redis-py's BlockingConnectionPool
takes a condition, starts a timeout and runs its observability hooks (none of which we
use) to hand out a connection even when one is idle and nobody waits, and again to
take it back: a sizeable share of the CPU of a two-command send. Here an idle
connection is handed out, and taken back, directly while no task waits for one; as
soon as one waits (the pool is exhausted) every borrow and return goes through the
parent's condition, so waiters are woken and served in order, and the wait still gives
up after the pool's timeout.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import BlockingConnectionPool
from redis.asyncio.connection import AbstractConnection


class RedisPool(BlockingConnectionPool):
    def _uncontended(self) -> bool:
        condition = self._condition
        return (
            not condition._waiters  # nobody waits to borrow
            and not condition.locked()
            # redis-py's own pool lock guards a reconnect of every connection
            and not getattr(self, "_in_maintenance", False)
        )

    async def get_connection(self, command_name: Any = None, *keys: Any, **options: Any) -> Any:
        if not (self._available_connections and self._uncontended()):
            return await super().get_connection()  # type: ignore[no-untyped-call]
        connection = self._available_connections.pop()
        self._in_use_connections.add(connection)
        try:
            await self.ensure_connection(connection)
        except BaseException:
            await self.release(connection)
            raise
        return connection

    async def release(self, connection: AbstractConnection) -> None:
        if not self._uncontended():
            await super().release(connection)  # wakes a waiter
            return
        self._in_use_connections.remove(connection)
        if connection.should_reconnect():  # type: ignore[no-untyped-call]
            await connection.disconnect()
        self._available_connections.append(connection)
