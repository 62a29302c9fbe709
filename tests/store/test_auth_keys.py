from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta

import pytest

from telesrv.store import auth_keys
from telesrv.store.auth_keys import BindResult, ClientInfo
from telesrv.store.db import Db

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def _new_id() -> int:
    return random.randint(-(2**63), 2**63 - 1)


async def _new_key(db: Db, *, is_temp: bool = False, expires_at: datetime | None = None) -> int:
    key_id = _new_id()
    stored = await auth_keys.save_auth_key(
        db.pool, key_id, os.urandom(256), is_temp=is_temp, expires_at=expires_at
    )
    assert stored
    return key_id


async def test_saved_key_reads_back(db: Db) -> None:
    key_id, key = _new_id(), os.urandom(256)
    assert await auth_keys.save_auth_key(db.pool, key_id, key)
    row = await auth_keys.get_auth_key(db.pool, key_id)
    assert row is not None
    assert (row.auth_key_id, row.auth_key, row.is_temp) == (key_id, key, False)
    assert row.expires_at is None and row.perm_auth_key_id is None
    assert await auth_keys.get_auth_key(db.pool, _new_id()) is None


async def test_extreme_ids_round_trip(db: Db) -> None:
    for key_id in (-(2**63), 2**63 - 1, 0):
        key = os.urandom(256)
        assert await auth_keys.save_auth_key(db.pool, key_id, key)
        row = await auth_keys.get_auth_key(db.pool, key_id)
        assert row is not None and row.auth_key == key


async def test_saving_the_same_key_again_succeeds_but_a_different_one_does_not(db: Db) -> None:
    key_id, key = _new_id(), os.urandom(256)
    assert await auth_keys.save_auth_key(db.pool, key_id, key)
    assert await auth_keys.save_auth_key(db.pool, key_id, key)
    assert not await auth_keys.save_auth_key(db.pool, key_id, os.urandom(256))
    row = await auth_keys.get_auth_key(db.pool, key_id)
    assert row is not None and row.auth_key == key


async def test_save_rejects_bad_input(db: Db) -> None:
    with pytest.raises(ValueError, match="256 bytes"):
        await auth_keys.save_auth_key(db.pool, _new_id(), b"short")
    with pytest.raises(ValueError, match="only temporary keys expire"):
        await auth_keys.save_auth_key(db.pool, _new_id(), os.urandom(256), expires_at=NOW)


async def test_bind_temp_key(db: Db) -> None:
    perm_id = await _new_key(db)
    temp_id = await _new_key(db, is_temp=True, expires_at=NOW)
    later = NOW + timedelta(hours=1)

    result = await db.run_txn("bind", auth_keys.bind_temp_auth_key_txn, temp_id, perm_id, later)
    assert result is BindResult.BOUND
    row = await auth_keys.get_auth_key(db.pool, temp_id)
    assert row is not None and row.perm_auth_key_id == perm_id and row.expires_at == later

    # Binding again to the same permanent key renews the expiry.
    much_later = NOW + timedelta(days=1)
    result = await db.run_txn(
        "bind", auth_keys.bind_temp_auth_key_txn, temp_id, perm_id, much_later
    )
    assert result is BindResult.BOUND
    row = await auth_keys.get_auth_key(db.pool, temp_id)
    assert row is not None and row.expires_at == much_later

    other_perm = await _new_key(db)
    result = await db.run_txn("bind", auth_keys.bind_temp_auth_key_txn, temp_id, other_perm, later)
    assert result is BindResult.ALREADY_BOUND
    row = await auth_keys.get_auth_key(db.pool, temp_id)
    assert row is not None and row.perm_auth_key_id == perm_id


async def test_bind_checks_both_keys(db: Db) -> None:
    perm_id = await _new_key(db)
    temp_id = await _new_key(db, is_temp=True, expires_at=NOW)
    other_temp = await _new_key(db, is_temp=True, expires_at=NOW)
    bind = auth_keys.bind_temp_auth_key_txn

    assert await db.run_txn("bind", bind, _new_id(), perm_id, NOW) is BindResult.TEMP_KEY_NOT_FOUND
    # A permanent key is not a temporary key.
    assert await db.run_txn("bind", bind, perm_id, perm_id, NOW) is BindResult.TEMP_KEY_NOT_FOUND
    assert await db.run_txn("bind", bind, temp_id, _new_id(), NOW) is BindResult.PERM_KEY_NOT_FOUND
    # A temporary key cannot stand in for a permanent one.
    assert await db.run_txn("bind", bind, temp_id, other_temp, NOW) is BindResult.PERM_KEY_NOT_FOUND
    row = await auth_keys.get_auth_key(db.pool, temp_id)
    assert row is not None and row.perm_auth_key_id is None


async def test_client_info_upserts_and_is_bounded(db: Db) -> None:
    key_id = await _new_key(db)
    assert await auth_keys.get_client_info(db.pool, key_id) is None
    first = ClientInfo(
        api_id=6,
        device_model="Pixel",
        system_version="Android 14",
        app_version="10.0",
        system_lang_code="en-US",
        lang_pack="android",
        lang_code="en",
        layer=229,
    )
    await auth_keys.record_client_info(db.pool, key_id, first)
    assert await auth_keys.get_client_info(db.pool, key_id) == first

    second = ClientInfo(
        api_id=7,
        device_model="x" * 10_000,
        system_version="Linux",
        app_version="1.45",
        system_lang_code="de",
        lang_pack="",
        lang_code="de",
        layer=158,
    )
    await auth_keys.record_client_info(db.pool, key_id, second)
    stored = await auth_keys.get_client_info(db.pool, key_id)
    assert stored is not None
    assert stored.device_model == "x" * auth_keys.MAX_CLIENT_TEXT
    assert (stored.api_id, stored.layer, stored.lang_code) == (7, 158, "de")


async def test_delete_key_removes_client_info_and_unbinds_temp_keys(db: Db) -> None:
    perm_id = await _new_key(db)
    temp_id = await _new_key(db, is_temp=True, expires_at=NOW)
    await db.run_txn("bind", auth_keys.bind_temp_auth_key_txn, temp_id, perm_id, NOW)
    await auth_keys.record_client_info(
        db.pool, perm_id, ClientInfo(1, "d", "s", "a", "en", "", "en", 229)
    )

    assert await auth_keys.delete_auth_key(db.pool, perm_id)
    assert not await auth_keys.delete_auth_key(db.pool, perm_id)
    assert await auth_keys.get_auth_key(db.pool, perm_id) is None
    assert await auth_keys.get_client_info(db.pool, perm_id) is None
    temp = await auth_keys.get_auth_key(db.pool, temp_id)
    assert temp is not None and temp.perm_auth_key_id is None


async def test_delete_expired_temp_keys(db: Db) -> None:
    # This module's database is shared by its tests: start from no temporary keys.
    await db.pool.execute("DELETE FROM auth_keys WHERE is_temp")
    perm_id = await _new_key(db)
    expired = [
        await _new_key(db, is_temp=True, expires_at=NOW - timedelta(seconds=s)) for s in (1, 2, 3)
    ]
    alive = await _new_key(db, is_temp=True, expires_at=NOW + timedelta(seconds=1))

    assert await auth_keys.delete_expired_temp_keys(db.pool, NOW, limit=2) == 2
    assert await auth_keys.delete_expired_temp_keys(db.pool, NOW, limit=2) == 1
    assert await auth_keys.delete_expired_temp_keys(db.pool, NOW) == 0
    for key_id in expired:
        assert await auth_keys.get_auth_key(db.pool, key_id) is None
    assert await auth_keys.get_auth_key(db.pool, alive) is not None
    assert await auth_keys.get_auth_key(db.pool, perm_id) is not None
