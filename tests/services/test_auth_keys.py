"""AuthKeyService on real PostgreSQL: concurrent misses for one key share one query."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from telesrv.parts import Parts
from telesrv.store import auth_keys as store
from telesrv.store.db import Db


def count_queries(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = store.get_auth_key

    async def counted(db: Any, auth_key_id: int) -> Any:
        calls[0] += 1
        return await real(db, auth_key_id)

    monkeypatch.setattr(store, "get_auth_key", counted)
    return calls


async def test_concurrent_misses_for_one_key_share_one_query(
    db: Db, parts: Parts, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_id, material = int.from_bytes(os.urandom(8), "little", signed=True), os.urandom(256)
    assert await store.save_auth_key(db.pool, key_id, material)
    calls = count_queries(monkeypatch)
    service = parts.auth_keys
    keys = await asyncio.gather(*(service.get(key_id, now=0.0) for _ in range(40)))
    assert {k.auth_key for k in keys if k is not None} == {material} and None not in keys
    assert calls[0] == 1
    # Cached now; an unknown key is its own flight (and is not cached).
    unknown = key_id ^ 1
    assert list(await asyncio.gather(service.get(unknown, 0.0), service.get(unknown, 0.0))) == [
        None,
        None,
    ]
    assert (await service.get(key_id, 0.0)) is not None
    assert calls[0] == 2


async def test_a_cancelled_caller_does_not_cancel_the_shared_lookup(
    db: Db, parts: Parts, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_id = int.from_bytes(os.urandom(8), "little", signed=True)
    assert await store.save_auth_key(db.pool, key_id, os.urandom(256))
    calls = count_queries(monkeypatch)
    service = parts.auth_keys
    first = asyncio.ensure_future(service.get(key_id, 0.0))
    second = asyncio.ensure_future(service.get(key_id, 0.0))
    await asyncio.sleep(0)
    first.cancel()
    assert (await second) is not None
    assert calls[0] == 1
