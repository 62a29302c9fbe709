from __future__ import annotations

import asyncio
import os
import signal
import sys
import types
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis

from telesrv import app
from telesrv.config import Settings
from telesrv.store import db as dbmod


async def test_open_resources_on_external_servers(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings(tmp_path)
    warmed = dbmod.WARMED_CONNECTIONS._value.get()
    async with app.open_resources(settings) as resources:
        # the whole pool was opened and warmed before anything could use it
        assert dbmod.WARMED_CONNECTIONS._value.get() == warmed + settings.pg_pool_max_size
        assert resources.db.pool.get_idle_size() == settings.pg_pool_max_size
        assert resources.database_url == settings.database_url
        assert resources.partition_count == 4
        assert await resources.db.pool.fetchval("SELECT to_regclass('auth_keys') IS NOT NULL")
        assert await resources.redis.ping()
        assert resources.server_key.private_key_path == tmp_path / "server_key.pem"
        pool = resources.db.pool
    assert pool.is_closing()


async def test_a_group_whose_pools_cannot_all_open_is_warned_of(
    make_settings: Callable[..., Settings],
    tmp_path: Path,
    db: dbmod.Db,
    caplog: pytest.LogCaptureFixture,
) -> None:
    room = await dbmod.connection_room(db.pool)
    assert room is not None and room > 10
    # a superuser (the embedded server's role) may use every slot; others fewer
    most = int(await db.pool.fetchval("SHOW max_connections"))
    superuser = await db.pool.fetchval("SELECT current_setting('is_superuser')::boolean")
    assert room == most if superuser else room < most
    for workers, size, warned in (
        (1, room, False),
        (1, room + 1, True),
        (room // 10 + 1, 10, True),
    ):
        caplog.clear()
        settings = make_settings(tmp_path, workers=workers, pg_pool_max_size=size)
        with caplog.at_level("WARNING", logger="telesrv.app"):
            await app._check_connection_room(db, settings)
        assert ("max_connections leaves" in caplog.text) is warned, (workers, size)
    # and through startup, for a group whose pools fit
    caplog.clear()
    with caplog.at_level("WARNING", logger="telesrv.app"):
        async with app.open_resources(make_settings(tmp_path, workers=2)):
            pass
    assert "max_connections leaves" not in caplog.text


async def test_open_resources_gives_the_settled_heap_back_on_exit(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    # A process that opens resources more than once (the tests do) must not keep
    # everything alive at each start frozen for good, nor the raised threshold.
    import gc

    gc.unfreeze()
    thresholds = gc.get_threshold()
    async with app.open_resources(make_settings(tmp_path)):
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == app.GC_YOUNG_THRESHOLD
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == thresholds


async def test_open_resources_starts_and_stops_embedded_servers(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", listen_port=0, pg_pool_min_size=1)
    async with app.open_resources(settings) as resources:
        assert "/telesrv?" in resources.database_url  # the dedicated database, not `postgres`
        assert resources.redis_url.startswith("unix://")
        await resources.db.run_txn("probe", lambda conn: conn.execute("SELECT 1"))
        await resources.redis.set("probe", b"1")
        assert (tmp_path / "data" / "pg" / "PG_VERSION").exists()
        assert (tmp_path / "data" / "server_key.pub.pem").exists()
        database_url, redis_url = resources.database_url, resources.redis_url

    with pytest.raises((OSError, asyncpg.PostgresError)):
        await asyncpg.connect(database_url, timeout=2)
    client = aioredis.Redis.from_url(redis_url)
    try:
        with pytest.raises(aioredis.ConnectionError):
            await client.ping()
    finally:
        await client.aclose()

    # A second start reuses the data directory: same key, data still there.
    async with app.open_resources(settings) as resources:
        assert await resources.db.pool.fetchval("SELECT count(*) FROM schema_migrations") >= 1


async def test_serve_runs_gateway_and_stops_on_sigterm(
    make_settings: Callable[..., Settings],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    gateway_state: dict[str, object] = {}
    ready = asyncio.Event()

    async def fake_gateway(settings: Settings, resources: app.Resources) -> None:
        gateway_state["pool"] = resources.db.pool
        ready.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            gateway_state["cancelled"] = True
            raise

    module = types.ModuleType("fake_gateway_for_test")
    module.run = fake_gateway  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_gateway_for_test", module)
    monkeypatch.setattr(app, "GATEWAY_MODULE", "fake_gateway_for_test")

    server = asyncio.create_task(app.serve(make_settings(tmp_path)))
    await asyncio.wait_for(ready.wait(), 30)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(server, 30)

    assert gateway_state["cancelled"] is True
    pool = gateway_state["pool"]
    assert isinstance(pool, asyncpg.Pool) and pool.is_closing()
    assert "telesrv server key fingerprint " in capsys.readouterr().out


async def test_serve_fails_before_starting_anything_without_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app, "GATEWAY_MODULE", "telesrv.gateway.no_such_module")
    with pytest.raises(app.GatewayUnavailable):
        await app.serve(Settings(data_dir=tmp_path / "data"))
    assert not (tmp_path / "data").exists()


def test_settle_heap_freezes_what_is_alive_after_collecting_and_raises_the_young_threshold() -> (
    None
):
    import gc
    import weakref

    class Node:
        def __init__(self) -> None:
            self.other: object = None

    lost = Node()
    lost.other = lost  # a cycle only the cyclic collector frees
    gone = weakref.ref(lost)
    del lost
    gc.unfreeze()
    thresholds = gc.get_threshold()
    try:
        app.settle_heap()
        assert gone() is None  # collected, not frozen for good
        assert gc.get_freeze_count() > 0  # the rest stays out of every collection
        assert gc.get_threshold() == (app.GC_YOUNG_THRESHOLD, *thresholds[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, "30s"),  # the outbox lease
        ({"outbox_lease_timeout": 2.0}, "15s"),  # a statement plus a pool wait
        ({"outbox_lease_timeout": 90.0}, "90s"),
    ],
)
async def test_a_transaction_idle_past_the_lease_is_ended_by_the_server(
    make_settings: Callable[..., Settings],
    tmp_path: Path,
    overrides: dict[str, float],
    expected: str,
) -> None:
    settings = make_settings(tmp_path).replace(**overrides)
    async with app.open_resources(settings) as resources:
        shown = await resources.db.pool.fetchval("SHOW idle_in_transaction_session_timeout")
    assert shown == expected
