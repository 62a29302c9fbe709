"""The value rules of columns every send writes (domains since 0020): each accepts the
values it allows and refuses the first one past them as a check violation, whichever
statement writes it."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from telesrv.store import db as dbmod
from telesrv.store import migrate
from telesrv.store.db import Db

_users = itertools.count(9_700_000, 10)


async def _dialog(db: Db, folder: int) -> None:
    user = next(_users)
    await db.pool.execute(
        "INSERT INTO dialogs (user_id, peer_user_id, top_message, top_message_date, folder_id)"
        " VALUES ($1::bigint, $1::bigint + 1, 1, 1, $2)",
        user,
        folder,
    )


async def _refolder(db: Db, folder: int) -> None:
    user = next(_users)
    await db.pool.execute(
        "INSERT INTO dialogs (user_id, peer_user_id, top_message, top_message_date)"
        " VALUES ($1::bigint, $1::bigint + 1, 1, 1)",
        user,
    )
    await db.pool.execute("UPDATE dialogs SET folder_id = $2 WHERE user_id = $1", user, folder)


async def _message(db: Db, media: Any) -> None:
    user = next(_users)
    await db.pool.execute(
        "INSERT INTO private_messages (sender_user_id, recipient_user_id, random_id, date,"
        " message, media) VALUES ($1::bigint, $1::bigint + 1, 1, 1, '', $2::text::jsonb)",
        user,
        None if media is None else json.dumps(media),
    )


async def _outbox(db: Db, status: str) -> None:
    await db.pool.execute(
        "INSERT INTO dispatch_outbox (target_user_id, pts, status) VALUES ($1, 1, $2)",
        next(_users),
        status,
    )


async def _outbox_status_set(db: Db, status: str) -> None:
    user = next(_users)
    await db.pool.execute("INSERT INTO dispatch_outbox (target_user_id, pts) VALUES ($1, 1)", user)
    await db.pool.execute(
        "UPDATE dispatch_outbox SET status = CASE WHEN $2 THEN 'failed' ELSE $3 END"
        " WHERE target_user_id = $1",
        user,
        status == "failed",
        status,
    )


CASES = [
    (_dialog, [0, 1], 2),
    (_dialog, [0, 1], -1),
    (_refolder, [1, 0], 2),
    (_message, [None, {"kind": "photo"}], ["photo"]),
    (_message, [None, {}], "photo"),
    (_outbox, ["pending", "failed"], "done"),
    (_outbox_status_set, ["failed", "pending"], "Pending"),
]


@pytest.mark.parametrize(("write", "allowed", "past"), CASES)
async def test_a_value_rule_allows_its_values_and_refuses_the_next(
    db: Db, write: Any, allowed: list[Any], past: Any
) -> None:
    for value in allowed:
        await write(db, value)
    with pytest.raises(asyncpg.CheckViolationError):
        await write(db, past)


_DOMAINS = 20  # the migration that moves the rules
_TABLES = ("dialogs", "private_messages", "dispatch_outbox")


@pytest.fixture
async def before_domains(pg_server_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A database migrated up to the one before the domains."""
    name = f"t_value_rules_{uuid.uuid4().hex[:12]}"
    url = await dbmod.create_database(pg_server_url, name)
    try:
        conn = await asyncpg.connect(url)
        try:
            earlier = [m for m in migrate.load_migrations() if m.version < _DOMAINS]
            await migrate.migrate(conn, partition_count=2, migrations=earlier)
            yield conn
        finally:
            await conn.close()
    finally:
        await dbmod.drop_database(pg_server_url, name)


async def _table_files(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch(
        """
        SELECT c.relname, c.relfilenode FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = ANY($1::regclass[])
        """,
        list(_TABLES),
    )
    return {r["relname"]: r["relfilenode"] for r in rows}


async def test_moving_the_rules_to_domains_rewrites_no_table(
    before_domains: asyncpg.Connection,
) -> None:
    """Upgrading keeps every row where it is (a rewrite of the messages would hold the
    server for as long as it takes to copy them all), and the rows already there keep
    their values and are checked against the rules."""
    conn = before_domains
    await conn.execute(
        """
        INSERT INTO dialogs (user_id, peer_user_id, top_message, top_message_date, folder_id)
        VALUES (1, 2, 1, 1, 1), (2, 1, 1, 1, 0);
        INSERT INTO private_messages (sender_user_id, recipient_user_id, random_id, date,
                                      message, media)
        VALUES (1, 2, 1, 1, '', '{"kind": "photo"}'), (1, 2, 2, 1, 'x', NULL);
        INSERT INTO dispatch_outbox (target_user_id, pts, status)
        VALUES (1, 1, 'pending'), (2, 1, 'failed');
        """
    )
    files = await _table_files(conn)
    assert len(files) == 2 * len(_TABLES)
    applied = await migrate.migrate(conn, partition_count=2)
    assert _DOMAINS in applied.applied
    assert await _table_files(conn) == files
    kept = await conn.fetchval(
        """
        SELECT (SELECT array_agg(folder_id::integer ORDER BY user_id) FROM dialogs)::text
            || (SELECT array_agg(media::text ORDER BY random_id) FROM private_messages)::text
            || (SELECT array_agg(status::text ORDER BY target_user_id) FROM dispatch_outbox)::text
        """
    )
    assert kept == '{1,0}{"{\\"kind\\": \\"photo\\"}",NULL}{pending,failed}'
    types = await conn.fetch(
        """
        SELECT format_type(atttypid, NULL) AS type FROM pg_attribute
         WHERE (attrelid, attname) IN (('dialogs'::regclass, 'folder_id'),
                                       ('private_messages'::regclass, 'media'),
                                       ('dispatch_outbox'::regclass, 'status'))
         ORDER BY 1
        """
    )
    assert [r["type"] for r in types] == [
        "telesrv_folder_id",
        "telesrv_message_media",
        "telesrv_outbox_status",
    ]
