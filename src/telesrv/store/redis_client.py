"""The Redis client: one server (``redis://``, ``unix://``) or a Redis Cluster
(``redis+cluster://host:port``, any node as the seed).

Every key the server writes carries its user's (or token's) hash tag and every script
touches one slot, so a cluster client routes each command by its key. What a cluster
client cannot route is pub/sub: PUBLISH reaches the subscribers of every node of the
cluster, whichever node it is sent to, but a cluster pipeline refuses it, and two
PUBLISHes sent through different nodes may arrive out of order. So pub/sub goes over
plain connections to one node at a time (``PubSubLink``), moved to another node when
the one in use fails.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence
from typing import Any

from redis.asyncio.client import Redis
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.asyncio.connection import BlockingConnectionPool, parse_url
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from telesrv.store.metrics import REDIS_ERRORS, MeteredRedis
from telesrv.store.redis_round_trips import RoundTrips

# The client the stores are given: a server or a cluster.
RedisClient = Redis | RedisCluster

# URL scheme naming a cluster -> the scheme of its nodes.
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
# Connections per cluster node. A cluster node's pool does not wait for a free
# connection (it raises past its size), so it is larger than one server's pool.
CLUSTER_NODE_CONNECTIONS = 256


class ClusterNodeURLError(ValueError):
    """A plain Redis URL names a node of a cluster."""


def is_cluster_url(url: str) -> bool:
    return url.partition("://")[0].lower() in CLUSTER_SCHEMES


def node_url(url: str) -> str:
    """A cluster URL as the URL of its seed node (other URLs as they are)."""
    scheme, sep, rest = url.partition("://")
    return CLUSTER_SCHEMES.get(scheme.lower(), scheme) + sep + rest


class _MeteredClusterPipeline(ClusterPipeline):
    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> Any:
        try:
            return await super().execute(raise_on_error, allow_redirections)
        except RedisError:
            REDIS_ERRORS.inc()
            raise


class ServerRedis(MeteredRedis):
    """The client of one Redis server (not a cluster), with ``round_trips``: connections
    of its own for the batcher's round trips, closed with the client."""

    def __init__(self, *, connection_pool: BlockingConnectionPool, timeout: float | None) -> None:
        super().__init__(connection_pool=connection_pool)
        self.round_trips = RoundTrips(connection_pool, self.response_callbacks, timeout=timeout)

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await self.round_trips.aclose()
        await super().aclose(close_connection_pool)


class MeteredRedisCluster(RedisCluster):
    """A cluster client counting the errors of every command and pipeline it runs."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().execute_command(*args, **kwargs)
        except RedisError:
            REDIS_ERRORS.inc()
            raise

    def pipeline(
        self, transaction: Any | None = None, shard_hint: Any | None = None
    ) -> ClusterPipeline:
        if shard_hint:
            raise ValueError("shard hints do not apply to a cluster")
        # The base class makes its pipelines the same way; the attribute mypy calls
        # abstract is set by the pipeline's constructor.
        return _MeteredClusterPipeline(self, transaction)  # type: ignore[abstract]


async def open_redis(
    url: str, *, max_connections: int = 64, timeout: float | None = None
) -> RedisClient:
    """A client of the server or cluster at ``url``, checked with a first command.

    Callers wait for a free connection instead of failing past the pool size (on a
    cluster: past a node's much larger pool). No automatic retries: a retried counter
    script could hand out pts nobody writes. On a cluster, a redirection (MOVED, ASK)
    is still followed: the command did not run where it was refused. With
    ``timeout``, a Redis that does not answer fails the call instead of hanging it
    (blocking commands and pub/sub listeners need a client of their own without it).
    """
    if is_cluster_url(url):
        cluster = MeteredRedisCluster.from_url(
            node_url(url),
            max_connections=max(max_connections, CLUSTER_NODE_CONNECTIONS),
            retry=Retry(NoBackoff(), 0),
            socket_timeout=timeout,
            socket_connect_timeout=timeout if timeout is not None else 10,
        )
        try:
            await cluster.initialize()
            await cluster.ping()
        except BaseException:
            await cluster.aclose()
            raise
        return cluster
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=10 if timeout is None else timeout,
        retry=Retry(NoBackoff(), 0),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )
    client = ServerRedis(connection_pool=pool, timeout=timeout)
    try:
        # A node of a cluster answers a plain client too, until the first key of
        # another node's slots: say at start what to write instead.
        if (await client.info("cluster")).get("cluster_enabled"):
            raise ClusterNodeURLError(_cluster_hint(url))
    except BaseException:
        await client.aclose()
        raise
    return client


def _cluster_hint(url: str) -> str:
    # Host and port only: the URL may hold a password.
    options = parse_url(url)
    scheme = "rediss+cluster" if url.lower().startswith("rediss:") else "redis+cluster"
    where = f"{options.get('host', '?')}:{options.get('port', 6379)}"
    return (
        f"the Redis at {where} is a node of a Redis Cluster: name the cluster with a "
        f"{scheme}:// URL, e.g. {scheme}://{where}"
    )


class PubSubLink:
    """Where this process publishes and subscribes.

    On one server: the server itself (publishing on the shared client). On a cluster:
    plain connections to one node, the same node for every publish so that the
    messages of a channel keep their order; after a failure the next publish or
    subscription goes to the next node the cluster client knows of."""

    def __init__(self, redis: RedisClient, url: str, *, timeout: float | None = None) -> None:
        self._redis = redis
        self._url = url
        self._timeout = timeout
        self._publisher: Redis | None = None
        self._turn = itertools.count()

    def _node_client(self, *, timeout: float | None) -> Redis:
        assert isinstance(self._redis, RedisCluster)
        nodes = sorted(self._redis.get_nodes(), key=lambda n: (n.server_type != "primary", n.name))
        if not nodes:
            raise RedisConnectionError("the cluster client knows no node")
        node = nodes[next(self._turn) % len(nodes)]
        options: dict[str, Any] = dict(parse_url(node_url(self._url)))
        options.update(host=node.host, port=node.port)
        return MeteredRedis(
            **options,
            retry=Retry(NoBackoff(), 0),
            socket_timeout=timeout,
            socket_connect_timeout=10 if self._timeout is None else self._timeout,
        )

    def subscriber(self) -> Redis:
        """A new client for one subscription, without a read timeout (a quiet channel is
        not a dead Redis); the caller closes it."""
        if isinstance(self._redis, RedisCluster):
            return self._node_client(timeout=None)
        return Redis.from_url(self._url)

    async def publish(self, channel: str, message: bytes | str) -> int:
        """PUBLISH; the number of subscribers that got it (on a cluster: those of the
        node published on)."""
        if not isinstance(self._redis, RedisCluster):
            return int(await self._redis.publish(channel, message))
        (reply,) = await self.publish_many([(channel, message)], raise_on_error=True)
        return int(reply)

    async def publish_many(
        self, messages: Sequence[tuple[str, bytes | str]], *, raise_on_error: bool = False
    ) -> list[Any]:
        """Every message in one round trip, in order; an error reply is returned in its
        place (raised with ``raise_on_error``)."""
        client: RedisClient = self._redis
        if isinstance(self._redis, RedisCluster):
            if self._publisher is None:
                self._publisher = self._node_client(timeout=self._timeout)
            client = self._publisher
        pipe = client.pipeline(transaction=False)
        for channel, message in messages:
            pipe.publish(channel, message)
        try:
            replies: list[Any] = await pipe.execute(raise_on_error=raise_on_error)
        except (RedisConnectionError, RedisTimeoutError):
            await self._drop_publisher()
            raise
        return replies

    async def _drop_publisher(self) -> None:
        publisher, self._publisher = self._publisher, None
        if publisher is not None:
            with contextlib.suppress(Exception):
                await publisher.aclose()

    async def aclose(self) -> None:
        await self._drop_publisher()
