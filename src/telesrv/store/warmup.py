"""Warming a new pooled connection before it serves requests.

A new PostgreSQL backend knows nothing of the schema yet: its first sends load the
catalog entries of every partition and index they touch, compile the send's PL/pgSQL
functions and plan their statements, and the client prepares its statements on that
connection for the first time. Measured on the send path with 16 partitions, that is
about 40 ms of database time per connection, spread over its first twenty or so
sends, which a process just started pays while requests already queue up.

``warm_connection`` pays it up front: for made-up users, one in each partition, it
runs the send function (each in a transaction it then rolls back, so nothing is written
but gaps in two id sequences), the read a user's first send makes, and the read of the
users an answer shows. At startup the pool is opened to its full size and every
connection warmed (``Db.warm``): a load arriving at a fresh process would otherwise
open the rest of the pool, cold, while it queues. A connection the pool opens later
(one closed after being idle, or dropped) starts cold, and its first sends pay for it
as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from telesrv.store import counters as counters_store
from telesrv.store import messages as messages_store
from telesrv.store import users as users_store

# Made-up users, one per partition of the per-user tables, negative (never a real
# account) and distinct per backend, so that connections warming at the same time do
# not wait on each other's uncommitted keys. All these tables hash the same bigint
# key with the same modulus, so one table's partitions stand for all of them.
_WARM_USERS = """
SELECT (SELECT s.id
          FROM (SELECT -(pg_backend_pid()::bigint * 100000
                         + generate_series(1, 100000)) AS id) AS s
         WHERE satisfies_hash_partition('message_boxes'::regclass, m.modulus, r.remainder,
                                        s.id)
         LIMIT 1) AS user_id
  FROM (SELECT value::int AS modulus FROM schema_settings
         WHERE name = 'partition_count') AS m,
       generate_series(0, m.modulus - 1) AS r(remainder)
 ORDER BY r.remainder
"""


class _Undo(Exception):
    """Rolls the warming transaction back."""


async def warm_users(conn: asyncpg.Connection) -> list[int]:
    """One made-up user id per partition of this database, for this connection."""
    rows = await conn.fetch(_WARM_USERS)
    return [row["user_id"] for row in rows if row["user_id"] is not None]


def _warm_send(sender: int, recipient: int) -> messages_store.SendParams:
    return messages_store.SendParams(
        sender=sender,
        recipient=recipient,
        random_id=1,
        date=0,
        message="",
        entities=None,
        fwd_from=None,
        silent=False,
        noforwards=False,
        media_unread=False,
        reply_to=None,
        quote_text=None,
        quote_entities=None,
        quote_offset=None,
        # Numbers a send would be given; each send is rolled back alone, so none is taken.
        sender_pts=1,
        sender_box=1,
        recipient_pts=2,
        recipient_box=2,
        exclude_auth_key_id=None,
        exclude_session_id=None,
    )


async def warm_connection(conn: asyncpg.Connection) -> None:
    """Run the send path on ``conn`` once per partition, writing nothing."""
    users = await warm_users(conn)
    if not users:
        return
    # Each user sends to the next, so every partition is a sender's and a recipient's.
    pairs = list(zip(users, users[1:] + users[:1], strict=True))
    for sender, recipient in pairs:
        await counters_store.unguarded_facts(conn, sender, recipient, of_other=True)
    # A transaction per send: all of them in one would hold a lock on every partition
    # and index of the send's tables at once, most of them in the lock table all
    # sessions share (thousands per connection with hundreds of partitions); one
    # send's locks fit in the backend's own fast-path slots.
    for sender, recipient in pairs:
        await _undone(conn, messages_store.send_private_message_txn, _warm_send(sender, recipient))
    # The group's statement too (sends that queued behind one in flight): compiled and
    # planned here, on one pair, rather than by the first group under load.
    await _undone(conn, messages_store.send_group_txn, [_warm_send(*pairs[0])])
    # The users the first answers and pushes show: the projection's one plan (a few
    # milliseconds to make, kept by the connection) is made here. The made-up users do
    # not exist, so it reads nothing.
    await users_store.project_user_pairs(conn, users, [u for _, u in pairs], ())


async def _undone(conn: asyncpg.Connection, write: Callable[..., Awaitable[Any]], arg: Any) -> None:
    """``write(conn, arg)`` in a transaction of its own, rolled back."""
    try:
        async with conn.transaction():
            await write(conn, arg)
            raise _Undo
    except _Undo:
        pass
