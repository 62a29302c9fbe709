"""Shared fixtures: one PostgreSQL and one Redis per test run, a migrated database per module.

External servers can be used instead of the embedded ones:
TELESRV_TEST_DATABASE_URL (a server URL whose user may CREATE/DROP DATABASE) and
TELESRV_TEST_REDIS_URL (its logical database is flushed at the start of every module).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from telesrv.app import open_redis
from telesrv.config import Settings
from telesrv.store import db as dbmod
from telesrv.store import migrate
from telesrv.store.embedded import EmbeddedPostgres, EmbeddedRedis

# Partitions are cheap to create but every one is a table; tests need few.
TEST_PARTITION_COUNT = 4

# The gateway logs why it closes a connection at debug level. Kept, a failing test's
# captured log tells which limit or check closed a client's connection.
logging.getLogger("telesrv.gateway").setLevel(logging.DEBUG)


@pytest.fixture(scope="session")
def pg_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a PostgreSQL server (its maintenance database) for the whole run."""
    external = os.environ.get("TELESRV_TEST_DATABASE_URL")
    if external:
        yield external
        return
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg-server") / "pg")
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("TELESRV_TEST_REDIS_URL")
    if external:
        yield external
        return
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis-server") / "redis")
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture(scope="session")
async def template_database(pg_server_url: str) -> AsyncIterator[str]:
    """A database migrated once; each module's database is a copy (much faster)."""
    name = f"telesrv_template_{uuid.uuid4().hex[:12]}"
    url = await dbmod.create_database(pg_server_url, name)
    try:
        pool = await dbmod.create_pool(url, min_size=1, max_size=1)
        try:
            await migrate.migrate_pool(pool, partition_count=TEST_PARTITION_COUNT)
        finally:
            await pool.close()
        yield name
    finally:
        await dbmod.drop_database(pg_server_url, name)


def _unique_database_name(request: pytest.FixtureRequest) -> str:
    module = request.node.name.removesuffix(".py").replace("/", "_").replace("-", "_")
    stem = "".join(ch for ch in module.lower() if ch.isalnum() or ch == "_")[:30]
    return f"t_{stem}_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
async def database_url(
    request: pytest.FixtureRequest, pg_server_url: str, template_database: str
) -> AsyncIterator[str]:
    """URL of a fresh, fully migrated database for this test module."""
    name = _unique_database_name(request)
    url = await dbmod.create_database(pg_server_url, name, template=template_database)
    try:
        yield url
    finally:
        await dbmod.drop_database(pg_server_url, name)


@pytest.fixture(scope="module")
async def db(database_url: str) -> AsyncIterator[dbmod.Db]:
    """The same Db object the server builds, on this module's database."""
    defaults = Settings()
    database = await dbmod.open_db(
        database_url, min_size=defaults.pg_pool_min_size, max_size=defaults.pg_pool_max_size
    )
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture(scope="module")
async def pool(db: dbmod.Db) -> Any:
    return db.pool


@pytest.fixture(scope="module")
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A client like the server's; the Redis database starts empty in every module."""
    client = await open_redis(redis_url)
    await client.flushdb()
    try:
        yield client
    finally:
        await client.aclose()


MakeSettings = Callable[..., Settings]


@pytest.fixture
def make_settings(database_url: str, redis_url: str, redis: aioredis.Redis) -> MakeSettings:
    """`make_settings(tmp_path, **overrides)`: Settings on the test servers, any free port.

    Depends on `redis` so that Redis is flushed along with this module's fresh database.
    """

    def build(data_dir: Path, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "listen_host": "127.0.0.1",
            "listen_port": 0,
            "data_dir": data_dir,
            "database_url": database_url,
            "redis_url": redis_url,
            "partition_count": TEST_PARTITION_COUNT,
        }
        values.update(overrides)
        return Settings(**values)

    return build
