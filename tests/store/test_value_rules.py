"""The value rules of columns every send writes (domains since 0020): each accepts the
values it allows and refuses the first one past them as a check violation, whichever
statement writes it."""

from __future__ import annotations

import itertools
import json
from typing import Any

import asyncpg
import pytest

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
