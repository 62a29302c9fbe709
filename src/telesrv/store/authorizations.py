"""SQL for authorizations (permanent auth key -> account) and per-device update state.

Functions ending in `_txn` must run inside a transaction (`Db.run_txn`); the others
are single statements and take a pool or a connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from telesrv.store.db import Executor


@dataclass(frozen=True)
class AuthorizationRow:
    """One logged-in device, with what its client reported in initConnection."""

    auth_key_id: int
    user_id: int
    hash: int
    created_at: datetime
    active_at: datetime
    # From auth_key_clients; None when the client never sent initConnection.
    api_id: int | None
    device_model: str | None
    system_version: str | None
    app_version: str | None
    layer: int | None


async def get_user_id(db: Executor, auth_key_id: int) -> int | None:
    user_id = await db.fetchval(
        "SELECT user_id FROM authorizations WHERE auth_key_id = $1", auth_key_id
    )
    return None if user_id is None else int(user_id)


async def bind_txn(
    conn: asyncpg.Connection, auth_key_id: int, user_id: int, hash: int, now: datetime
) -> int | None:
    """Log the key in to `user_id`, replacing any previous login of the key.

    Returns the account the key was logged in to before (None if none). A previous
    account's device state on this key goes: the device starts afresh as a new account.
    """
    previous = await conn.fetchval(
        "DELETE FROM authorizations WHERE auth_key_id = $1 RETURNING user_id", auth_key_id
    )
    await conn.execute(
        """
        INSERT INTO authorizations (auth_key_id, user_id, hash, created_at, active_at)
        VALUES ($1, $2, $3, $4, $4)
        """,
        auth_key_id,
        user_id,
        hash,
        now,
    )
    await conn.execute(
        "DELETE FROM update_states WHERE auth_key_id = $1 AND user_id <> $2",
        auth_key_id,
        user_id,
    )
    return None if previous is None else int(previous)


async def unbind_txn(conn: asyncpg.Connection, auth_key_id: int) -> int | None:
    """Log the key out: its authorization and its device state go; returns the account."""
    user_id = await conn.fetchval(
        "DELETE FROM authorizations WHERE auth_key_id = $1 RETURNING user_id", auth_key_id
    )
    if user_id is None:
        return None
    await conn.execute(
        "DELETE FROM update_states WHERE auth_key_id = $1 AND user_id = $2", auth_key_id, user_id
    )
    return int(user_id)


async def unbind_others_txn(
    conn: asyncpg.Connection, user_id: int, keep_auth_key_id: int
) -> list[int]:
    """End every authorization of the account except `keep_auth_key_id`; returns the keys."""
    records = await conn.fetch(
        """
        DELETE FROM authorizations
         WHERE user_id = $1 AND auth_key_id <> $2
        RETURNING auth_key_id
        """,
        user_id,
        keep_auth_key_id,
    )
    keys = [r["auth_key_id"] for r in records]
    if keys:
        await conn.execute(
            "DELETE FROM update_states WHERE auth_key_id = ANY($1::bigint[]) AND user_id = $2",
            keys,
            user_id,
        )
    return keys


async def unbind_by_hash_txn(conn: asyncpg.Connection, user_id: int, hash: int) -> int | None:
    """End the account's authorization with this public hash; returns its key."""
    auth_key_id = await conn.fetchval(
        "DELETE FROM authorizations WHERE user_id = $1 AND hash = $2 RETURNING auth_key_id",
        user_id,
        hash,
    )
    if auth_key_id is None:
        return None
    await conn.execute(
        "DELETE FROM update_states WHERE auth_key_id = $1 AND user_id = $2", auth_key_id, user_id
    )
    return int(auth_key_id)


async def touch(db: Executor, auth_key_id: int, now: datetime) -> None:
    await db.execute(
        "UPDATE authorizations SET active_at = $2 WHERE auth_key_id = $1 AND active_at < $2",
        auth_key_id,
        now,
    )


async def list_for_user(db: Executor, user_id: int) -> list[AuthorizationRow]:
    records = await db.fetch(
        """
        SELECT a.auth_key_id, a.user_id, a.hash, a.created_at, a.active_at,
               c.api_id, c.device_model, c.system_version, c.app_version, c.layer
          FROM authorizations a
          LEFT JOIN auth_key_clients c ON c.auth_key_id = a.auth_key_id
         WHERE a.user_id = $1
         ORDER BY a.active_at DESC, a.auth_key_id
        """,
        user_id,
    )
    return [
        AuthorizationRow(
            auth_key_id=r["auth_key_id"],
            user_id=r["user_id"],
            hash=r["hash"],
            created_at=r["created_at"],
            active_at=r["active_at"],
            api_id=r["api_id"],
            device_model=r["device_model"],
            system_version=r["system_version"],
            app_version=r["app_version"],
            layer=r["layer"],
        )
        for r in records
    ]
