"""telesrv's migrations on Citus: every table distributed by its user (one colocation
group) or a reference table, none partitioned, no triggers, a second start changing
nothing; then a send, an edit and a delete with revoke between two users whose rows are
on different workers, through the SQL functions the server calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from telesrv.store import citus, deletes, edits, migrate
from telesrv.store import messages as messages_store
from telesrv.store.db import Db, open_db
from telesrv.store.deletes import PtsRange
from telesrv.store.messages import SendParams

PARTITIONS = 16
DATE = 1_700_000_000


@pytest.fixture(scope="module")
async def migrated(citus_url: str) -> AsyncIterator[str]:
    conn = await asyncpg.connect(citus_url)
    try:
        await migrate.migrate(conn, partition_count=PARTITIONS)
    finally:
        await conn.close()
    yield citus_url


@pytest.fixture
async def conn(migrated: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(migrated)
    try:
        yield connection
    finally:
        await connection.close()


@pytest.fixture(scope="module")
async def db(migrated: str) -> AsyncIterator[Db]:
    database = await open_db(migrated, min_size=1, max_size=2)
    try:
        yield database
    finally:
        await database.close()


async def kinds(conn: asyncpg.Connection) -> dict[str, tuple[str, str, int]]:
    rows = await conn.fetch(
        "SELECT table_name::text AS name, citus_table_type AS kind,"
        " distribution_column AS col, colocation_id FROM citus_tables"
    )
    return {r["name"]: (r["kind"], r["col"], r["colocation_id"]) for r in rows}


async def test_every_user_table_is_distributed_by_its_user_in_one_group(
    conn: asyncpg.Connection,
) -> None:
    placed = await kinds(conn)
    groups = set()
    for table, column in citus.DISTRIBUTED.items():
        kind, col, group = placed[table]
        assert (kind, col) == ("distributed", column), table
        groups.add(group)
    assert len(groups) == 1


async def test_global_tables_are_reference_tables(conn: asyncpg.Connection) -> None:
    placed = await kinds(conn)
    assert {t: placed[t][0] for t in citus.REFERENCE} == dict.fromkeys(citus.REFERENCE, "reference")
    assert set(placed) == set(citus.DISTRIBUTED) | set(citus.REFERENCE)


async def test_no_table_is_partitioned_and_none_has_a_trigger(conn: asyncpg.Connection) -> None:
    partitioned = await conn.fetch(
        "SELECT relname FROM pg_class WHERE relkind = 'p'"
        " AND relnamespace = current_schema()::regnamespace"
    )
    assert partitioned == []
    triggers = await conn.fetch(
        "SELECT tgrelid::regclass::text AS t, tgname FROM pg_trigger t"
        " JOIN pg_class c ON c.oid = t.tgrelid"
        " WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace"
    )
    assert triggers == []


async def test_a_second_start_changes_nothing(conn: asyncpg.Connection) -> None:
    before = await kinds(conn)
    shards = await conn.fetchval("SELECT count(*) FROM pg_dist_shard")
    result = await migrate.migrate(conn, partition_count=PARTITIONS)
    assert result.applied == ()
    assert await citus.place_tables(conn) == []
    assert await kinds(conn) == before
    assert await conn.fetchval("SELECT count(*) FROM pg_dist_shard") == shards


async def worker_of(conn: asyncpg.Connection, user_id: int) -> str:
    """The node holding ``user_id``'s shard of every distributed table (colocated)."""
    hosts = {
        await conn.fetchval(
            "SELECT nodename FROM citus_shards"
            " WHERE shardid = get_shard_id_for_distribution_column($1::regclass, $2::bigint)",
            table,
            user_id,
        )
        for table in citus.DISTRIBUTED
    }
    assert len(hosts) == 1
    return str(hosts.pop())


async def users_on_two_workers(conn: asyncpg.Connection) -> tuple[int, int]:
    """Two user ids whose rows are on different workers."""
    first = 7_000_001
    home = await worker_of(conn, first)
    for other in range(first + 1, first + 200):
        if await worker_of(conn, other) != home:
            return first, other
    raise AssertionError("no user on another worker")


def send_params(sender: int, recipient: int, n: int, text: str) -> SendParams:
    return SendParams(
        sender=sender,
        recipient=recipient,
        random_id=5000 + n,
        date=DATE + n,
        message=text,
        entities=None,
        fwd_from=None,
        silent=False,
        noforwards=False,
        media_unread=False,
        reply_to=None,
        quote_text=None,
        quote_entities=None,
        quote_offset=None,
        sender_pts=n,
        sender_box=n,
        recipient_pts=n,
        recipient_box=n,
        exclude_auth_key_id=None,
        exclude_session_id=None,
    )


async def fetch(db: Db, query: str, *args: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in await db.pool.fetch(query, *args)]


async def test_send_edit_and_revoke_between_users_on_two_workers(
    conn: asyncpg.Connection, db: Db
) -> None:
    a, b = await users_on_two_workers(conn)
    assert await worker_of(conn, a) != await worker_of(conn, b)
    for n, (sender, recipient) in enumerate([(a, b), (b, a), (a, b)], start=1):
        async with db.pool.acquire() as c, c.transaction():
            sent = await messages_store.send_private_message_txn(
                c, send_params(sender, recipient, n, f"hello {n}")
            )
        assert not sent.duplicate
    for owner, peer in ((a, b), (b, a)):
        assert await fetch(
            db,
            "SELECT box_id, out FROM message_boxes WHERE owner_user_id = $1 ORDER BY box_id",
            owner,
        ) == [(1, owner == a), (2, owner == b), (3, owner == a)]
        assert await fetch(
            db,
            "SELECT box_id, body FROM message_search WHERE owner_user_id = $1 ORDER BY box_id",
            owner,
        ) == [(1, "hello 1"), (2, "hello 2"), (3, "hello 3")]
        assert await fetch(
            db,
            "SELECT top_message, unread_count FROM dialogs"
            " WHERE user_id = $1 AND peer_user_id = $2",
            owner,
            peer,
        ) == [(3, 2 if owner == b else 1)]

    async with db.pool.acquire() as c, c.transaction():
        edited = await edits.edit_private_message_txn(
            c, a, b, 3, "edited", None, DATE + 10, [(a, 4), (b, 4)], None, None
        )
    assert sorted((e.owner_user_id, e.box_id, e.pts) for e in edited) == [(a, 3, 4), (b, 3, 4)]
    for owner in (a, b):
        assert await fetch(
            db, "SELECT body FROM message_search WHERE owner_user_id = $1 AND box_id = 3", owner
        ) == [("edited",)]

    async with db.pool.acquire() as c, c.transaction():
        gone = await deletes.delete_message_boxes_txn(
            c,
            a,
            [1],
            True,
            False,
            DATE + 11,
            [PtsRange(a, 5, 1), PtsRange(b, 5, 1)],
            None,
            None,
        )
    assert sorted((g.user_id, g.pts) for g in gone) == [(a, 5), (b, 5)]
    for owner in (a, b):
        assert await fetch(
            db,
            "SELECT box_id FROM message_search WHERE owner_user_id = $1 ORDER BY box_id",
            owner,
        ) == [(2,), (3,)]
        # Every pts from 1 to 5 used once: the log is dense.
        assert await fetch(
            db,
            "SELECT pts FROM user_update_events WHERE user_id = $1 ORDER BY pts",
            owner,
        ) == [(1,), (2,), (3,), (4,), (5,)]
