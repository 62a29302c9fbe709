"""SQL for MTProto authorization keys and what clients report about themselves.

auth_key_id is the signed int64 the wire carries. Functions ending in `_txn` must
run inside a transaction (`Db.run_txn`); the others are single statements and take
a pool or a connection.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from telesrv.store.db import Executor

AUTH_KEY_LENGTH = 256
# initConnection strings are client-chosen; keep what we store bounded.
MAX_CLIENT_TEXT = 256


@dataclass(frozen=True)
class AuthKeyRow:
    auth_key_id: int
    auth_key: bytes
    is_temp: bool
    expires_at: datetime | None
    perm_auth_key_id: int | None
    created_at: datetime


@dataclass(frozen=True)
class ClientInfo:
    api_id: int
    device_model: str
    system_version: str
    app_version: str
    system_lang_code: str
    lang_pack: str
    lang_code: str
    layer: int


class BindResult(enum.Enum):
    BOUND = "bound"
    TEMP_KEY_NOT_FOUND = "temp_key_not_found"
    PERM_KEY_NOT_FOUND = "perm_key_not_found"
    # The temporary key is bound to a different permanent key already.
    ALREADY_BOUND = "already_bound"


def _auth_key_row(record: asyncpg.Record) -> AuthKeyRow:
    return AuthKeyRow(
        auth_key_id=record["auth_key_id"],
        auth_key=bytes(record["auth_key"]),
        is_temp=record["is_temp"],
        expires_at=record["expires_at"],
        perm_auth_key_id=record["perm_auth_key_id"],
        created_at=record["created_at"],
    )


async def save_auth_key(
    db: Executor,
    auth_key_id: int,
    auth_key: bytes,
    *,
    is_temp: bool = False,
    expires_at: datetime | None = None,
) -> bool:
    """Store a new key. False when the id is taken by a different key (answer dh_gen_retry).

    Saving the same key twice (a retransmitted set_client_DH_params) returns True.
    """
    if len(auth_key) != AUTH_KEY_LENGTH:
        raise ValueError(f"auth key must be {AUTH_KEY_LENGTH} bytes, got {len(auth_key)}")
    if not is_temp and expires_at is not None:
        raise ValueError("only temporary keys expire")
    stored = await db.fetchval(
        """
        WITH inserted AS (
            INSERT INTO auth_keys (auth_key_id, auth_key, is_temp, expires_at)
            VALUES ($1, $2, $3, $4)
            ON CONFLICT (auth_key_id) DO NOTHING
            RETURNING 1
        )
        SELECT EXISTS (SELECT 1 FROM inserted)
            OR EXISTS (SELECT 1 FROM auth_keys WHERE auth_key_id = $1 AND auth_key = $2)
        """,
        auth_key_id,
        auth_key,
        is_temp,
        expires_at,
    )
    return bool(stored)


async def get_auth_key(db: Executor, auth_key_id: int) -> AuthKeyRow | None:
    record = await db.fetchrow(
        """
        SELECT auth_key_id, auth_key, is_temp, expires_at, perm_auth_key_id, created_at
          FROM auth_keys
         WHERE auth_key_id = $1
        """,
        auth_key_id,
    )
    return None if record is None else _auth_key_row(record)


async def bind_temp_auth_key_txn(
    conn: asyncpg.Connection, temp_auth_key_id: int, perm_auth_key_id: int, expires_at: datetime
) -> BindResult:
    """auth.bindTempAuthKey: bind a temporary key to a permanent one until `expires_at`.

    Binding again to the same permanent key renews the expiry.
    """
    temp = await conn.fetchrow(
        """
        SELECT perm_auth_key_id
          FROM auth_keys
         WHERE auth_key_id = $1 AND is_temp
           FOR UPDATE
        """,
        temp_auth_key_id,
    )
    if temp is None:
        return BindResult.TEMP_KEY_NOT_FOUND
    bound_to = temp["perm_auth_key_id"]
    if bound_to is not None and bound_to != perm_auth_key_id:
        return BindResult.ALREADY_BOUND
    # FOR KEY SHARE: the permanent key cannot vanish before we commit the reference.
    perm_exists = await conn.fetchval(
        """
        SELECT 1
          FROM auth_keys
         WHERE auth_key_id = $1 AND NOT is_temp
           FOR KEY SHARE
        """,
        perm_auth_key_id,
    )
    if perm_exists is None:
        return BindResult.PERM_KEY_NOT_FOUND
    await conn.execute(
        """
        UPDATE auth_keys
           SET perm_auth_key_id = $2, expires_at = $3
         WHERE auth_key_id = $1
        """,
        temp_auth_key_id,
        perm_auth_key_id,
        expires_at,
    )
    return BindResult.BOUND


async def record_client_info(db: Executor, auth_key_id: int, info: ClientInfo) -> None:
    """Remember what initConnection reported on this key (strings cut to MAX_CLIENT_TEXT)."""
    await db.execute(
        """
        INSERT INTO auth_key_clients (
            auth_key_id, api_id, device_model, system_version, app_version,
            system_lang_code, lang_pack, lang_code, layer, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())
        ON CONFLICT (auth_key_id) DO UPDATE SET
            api_id = EXCLUDED.api_id,
            device_model = EXCLUDED.device_model,
            system_version = EXCLUDED.system_version,
            app_version = EXCLUDED.app_version,
            system_lang_code = EXCLUDED.system_lang_code,
            lang_pack = EXCLUDED.lang_pack,
            lang_code = EXCLUDED.lang_code,
            layer = EXCLUDED.layer,
            updated_at = EXCLUDED.updated_at
        """,
        auth_key_id,
        info.api_id,
        info.device_model[:MAX_CLIENT_TEXT],
        info.system_version[:MAX_CLIENT_TEXT],
        info.app_version[:MAX_CLIENT_TEXT],
        info.system_lang_code[:MAX_CLIENT_TEXT],
        info.lang_pack[:MAX_CLIENT_TEXT],
        info.lang_code[:MAX_CLIENT_TEXT],
        info.layer,
    )


async def get_client_info(db: Executor, auth_key_id: int) -> ClientInfo | None:
    record = await db.fetchrow(
        """
        SELECT api_id, device_model, system_version, app_version,
               system_lang_code, lang_pack, lang_code, layer
          FROM auth_key_clients
         WHERE auth_key_id = $1
        """,
        auth_key_id,
    )
    if record is None:
        return None
    return ClientInfo(
        api_id=record["api_id"],
        device_model=record["device_model"],
        system_version=record["system_version"],
        app_version=record["app_version"],
        system_lang_code=record["system_lang_code"],
        lang_pack=record["lang_pack"],
        lang_code=record["lang_code"],
        layer=record["layer"],
    )


async def delete_auth_key(db: Executor, auth_key_id: int) -> bool:
    """destroy_auth_key: forget the key. True when it existed."""
    deleted = await db.fetchval(
        "DELETE FROM auth_keys WHERE auth_key_id = $1 RETURNING 1",
        auth_key_id,
    )
    return deleted is not None


async def delete_expired_temp_keys(db: Executor, now: datetime, *, limit: int = 1000) -> int:
    """Delete up to `limit` temporary keys expired before `now`; returns how many."""
    return len(await delete_expired_temp_key_ids(db, now, limit=limit))


async def delete_expired_temp_key_ids(
    db: Executor, now: datetime, *, limit: int = 1000
) -> list[int]:
    """Delete up to `limit` temporary keys expired before `now`; returns their ids.

    Rows another process is deleting at the same moment are skipped, not waited for.
    """
    rows = await db.fetch(
        """
        DELETE FROM auth_keys
         WHERE auth_key_id IN (
               SELECT auth_key_id
                 FROM auth_keys
                WHERE is_temp AND expires_at < $1
                LIMIT $2
                  FOR UPDATE SKIP LOCKED)
        RETURNING auth_key_id
        """,
        now,
        limit,
    )
    return [row["auth_key_id"] for row in rows]


async def delete_unused_perm_key_ids(
    db: Executor, created_before: datetime, now: datetime, *, limit: int = 1000
) -> list[int]:
    """Delete up to `limit` permanent keys created before `created_before` that no account
    is logged in to and no unexpired temporary key is bound to; returns their ids."""
    rows = await db.fetch(
        """
        DELETE FROM auth_keys
         WHERE auth_key_id IN (
               SELECT k.auth_key_id
                 FROM auth_keys k
                WHERE NOT k.is_temp
                  AND k.created_at < $1
                  AND NOT EXISTS (
                      SELECT 1 FROM authorizations a WHERE a.auth_key_id = k.auth_key_id)
                  AND NOT EXISTS (
                      SELECT 1 FROM auth_keys t
                       WHERE t.perm_auth_key_id = k.auth_key_id AND t.expires_at >= $2)
                LIMIT $3
                  FOR UPDATE SKIP LOCKED)
        RETURNING auth_key_id
        """,
        created_before,
        now,
        limit,
    )
    return [row["auth_key_id"] for row in rows]
