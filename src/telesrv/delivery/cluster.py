"""Several server processes sharing one PostgreSQL and Redis.

Each process has a random id, an entry in the live-process set and, per user it
holds sessions of, an entry in that user's holder set (all expiring, renewed on a
heartbeat; see ``telesrv.store.cluster``). The outbox worker that claims a row pushes
to the sessions of this process directly and hands the rendered ``updates`` for the
other processes holding the user to this process's push writer, a task that publishes
all it was handed since its last round trip in one pipeline, in order. Neither a send's
answer nor an outbox transaction waits for that round trip (a stopping process waits
for it, briefly); the holder lookups of concurrent pushes share round trips with the
send path's other commands (``CommandBatcher``).

While no other process is alive, pushes make no Redis round trip at all, and nothing
is broadcast: the cluster then costs one heartbeat every few seconds and a
registration write when a user's first session arrives or last one leaves.

Caches (auth keys, key -> account, user projections) are kept per process; a change
made in one process is broadcast on the bus and each other process forgets what it
cached. Invalidations and pushes are best effort by design: a process that misses a
push leaves the device to catch up with getDifference (rows are in PostgreSQL before
anything is pushed), and one that misses an invalidation (its subscription was down)
starts over with empty caches when it notices.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import Counter

from telesrv.gateway.server import Gateway
from telesrv.store import cluster as cluster_store
from telesrv.store.redis_batch import CommandBatcher
from telesrv.store.redis_client import PubSubLink, RedisClient

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 5.0
# Entries live this many heartbeats: one missed renewal does not drop a live process.
TTL_HEARTBEATS = 3
RECONNECT_PAUSE = 1.0
# Pushes for other processes waiting for the push writer, in bytes: each (process,
# push) entry counts its body (again for each process it goes to) and PUSH_ENTRY_BYTES.
# Past the bound (Redis slow or away) new ones are dropped and counted: their devices
# catch up with getDifference, as after any missed push. Ephemeral pushes (typing and
# the like, whose holders are looked up when they are sent) have a smaller bound of
# their own, so that they never crowd out the pushes of stored events. The round being
# published holds as much again, and its encoded copy.
MAX_PENDING_PUSH_BYTES = 8 * 1024 * 1024
MAX_PENDING_EPHEMERAL_BYTES = 1024 * 1024
PUSH_ENTRY_BYTES = 200
# How long a stopping process waits for the pushes it was handed to be published.
STOP_PUBLISH_SECONDS = 2.0

REMOTE_PUSHES = Counter(
    "telesrv_cluster_remote_pushes_total", "Pushes published to another process."
)
RECEIVED_PUSHES = Counter(
    "telesrv_cluster_received_pushes_total", "Pushes another process published to this one."
)
DROPPED_PUSHES = Counter(
    "telesrv_cluster_dropped_pushes_total",
    "Pushes for other processes dropped: too many waiting for Redis, refused by Redis, "
    "or in a publish round that failed (per target process for stored events, per push "
    "for ephemeral ones), and those whose user's holders could not be looked up (per user "
    "of an outbox batch, per push for ephemeral ones).",
)
INVALIDATIONS = Counter(
    "telesrv_cluster_invalidations_total", "Cache invalidations broadcast, by kind.", ["kind"]
)

# kind -> handler of the message's fields, in the receiving process
BusHandler = Callable[[dict[str, Any]], None]


class Placement:
    """Where the users of one outbox batch have sessions: here, elsewhere, or nowhere."""

    def __init__(
        self,
        cluster: Cluster,
        remote: dict[int, list[str]],
        unknown: frozenset[int] = frozenset(),
    ) -> None:
        self._cluster = cluster
        self.remote = remote  # user -> the other processes holding sessions of theirs
        # Users whose holders could not be looked up: their pushes reach the sessions
        # here only (what they missed elsewhere was counted dropped by the lookup).
        self.unknown = unknown
        self._outgoing: list[tuple[str, cluster_store.RemotePush]] = []

    def online(self, user_id: int) -> bool:
        return bool(self._cluster.gateway.sessions.sessions_of_user(user_id)) or bool(
            self.remote.get(user_id)
        )

    def reaches(self, user_id: int, exclude: tuple[int, int] | None) -> bool:
        """Whether a push would reach any session but the excluded one (here or maybe
        elsewhere: another process's sessions are not known one by one)."""
        return bool(self.remote.get(user_id)) or self._cluster.gateway.would_push(user_id, exclude)

    def push(self, user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int:
        """Sessions here get it now; other holders once the batch is done (``flush``)."""
        remote = self.remote.get(user_id)
        if remote:
            push = cluster_store.RemotePush(user_id, body, exclude)
            self._outgoing.extend((process_id, push) for process_id in remote)
        return self._cluster.gateway.push_to_user(user_id, body, exclude)

    def flush(self) -> None:
        """Hand the batch's pushes for other holders to the writer task (published soon
        after, in order; nobody waits for it). The rows stay handled whatever becomes
        of them: devices that miss a push catch up with getDifference."""
        outgoing, self._outgoing = self._outgoing, []
        if outgoing:
            self._cluster.publish_later(outgoing)


class Cluster:
    def __init__(
        self,
        redis: RedisClient,
        redis_url: str,
        gateway: Gateway,
        *,
        timeout: float | None = None,
        heartbeat: float = HEARTBEAT_SECONDS,
        clock: Callable[[], float] = time.time,
        process_id: str | None = None,
        batch: CommandBatcher | None = None,
        max_pending_push_bytes: int = MAX_PENDING_PUSH_BYTES,
        max_pending_ephemeral_bytes: int = MAX_PENDING_EPHEMERAL_BYTES,
    ) -> None:
        self.redis = redis
        # Holder lookups go with the other commands of the same turn of the loop.
        self._batch = batch if batch is not None else CommandBatcher(redis)
        # Pub/sub: on a cluster, over connections of its own to one node at a time.
        self.link = PubSubLink(redis, redis_url, timeout=timeout)
        self.gateway = gateway
        self.process_id = process_id or os.urandom(8).hex()
        self.heartbeat = heartbeat
        self.ttl = heartbeat * TTL_HEARTBEATS
        self._clock = clock
        self.peers: set[str] = set()  # other live processes
        self._handlers: dict[str, BusHandler] = {}
        self._local_users: set[int] = set()
        self._to_register: set[int] = set()
        self._to_unregister: set[int] = set()
        self._changes = asyncio.Event()
        self._outgoing_bus: list[dict[str, Any]] = []
        # Pushes for the push writer: located ones (process, push) and ephemeral ones,
        # located when they are sent; the bytes they hold, each kind bounded.
        self._located: list[tuple[str, cluster_store.RemotePush]] = []
        self._ephemeral: list[cluster_store.RemotePush] = []
        self._located_bytes = 0
        self._ephemeral_bytes = 0
        self.max_pending_push_bytes = max_pending_push_bytes
        self.max_pending_ephemeral_bytes = max_pending_ephemeral_bytes
        self._pushes_waiting = asyncio.Event()
        self._publishing = False
        self._tasks: list[asyncio.Task[None]] = []
        self._subscribed = asyncio.Event()
        self._on_resubscribe: list[Callable[[], None]] = []
        gateway.sessions.on_user_presence = self._user_presence

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Join: subscribe, announce, then register as users arrive."""
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._listen(), name="cluster-listen"),
            loop.create_task(self._heartbeat(), name="cluster-heartbeat"),
            loop.create_task(self._sync(), name="cluster-sync"),
            loop.create_task(self._write_pushes(), name="cluster-pushes"),
        ]
        # Pushes and invalidations meant for us must not be missed once others see us.
        await self._subscribed.wait()
        await self._announce()
        await cluster_store.publish_bus(self.link, {"t": "hello", "p": self.process_id})

    async def stop(self) -> None:
        # The last outbox batches handed pushes over and deleted their rows: publish
        # them before leaving, if Redis lets us in time.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STOP_PUBLISH_SECONDS):
                while self._tasks and (self._located or self._ephemeral or self._publishing):
                    await asyncio.sleep(0.01)
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await cluster_store.withdraw(self.redis, self.process_id, self._local_users)
            await cluster_store.publish_bus(self.link, {"t": "bye", "p": self.process_id})
        await self.link.aclose()

    # -- pushes -------------------------------------------------------------------------

    async def locate(self, user_ids: list[int]) -> Placement:
        """The placement of an outbox batch's users: no Redis while this process is alone.
        Each user whose holders could not be looked up counts as a dropped push: their
        sessions elsewhere, if any, get nothing from this batch."""
        placement = await self._lookup(user_ids)
        if placement.unknown:
            DROPPED_PUSHES.inc(len(placement.unknown))
        return placement

    async def _lookup(self, user_ids: list[int]) -> Placement:
        if not self.peers:
            return Placement(self, {})
        try:
            looked_up = await cluster_store.holders(self._batch, user_ids, self._clock())
        except Exception:
            log.warning("cluster: looking up session holders failed", exc_info=True)
            return Placement(self, {}, frozenset(user_ids))
        if looked_up.failed:
            # Their sessions elsewhere get no push this time and catch up with
            # getDifference; the other users' lookups stand.
            log.warning(
                "cluster: looking up session holders failed for %d of %d users",
                len(looked_up.failed),
                len(user_ids),
            )
        me = self.process_id
        remote = {u: [p for p in ps if p != me] for u, ps in looked_up.found.items()}
        return Placement(
            self, {u: ps for u, ps in remote.items() if ps}, frozenset(looked_up.failed)
        )

    def push_anywhere(self, user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int:
        """A push outside the outbox (typing and the like, never stored): the sessions
        here now, those in other processes soon after; returns the sessions here."""
        if self.peers:
            size = len(body) + PUSH_ENTRY_BYTES
            if self._ephemeral_bytes + size > self.max_pending_ephemeral_bytes:
                DROPPED_PUSHES.inc()
            else:
                self._ephemeral_bytes += size
                self._ephemeral.append(cluster_store.RemotePush(user_id, body, exclude))
                self._pushes_waiting.set()
        return self.gateway.push_to_user(user_id, body, exclude)

    def publish_later(self, pushes: list[tuple[str, cluster_store.RemotePush]]) -> None:
        """Have the writer task publish these (process, push) pairs, in this order,
        after those handed to it before."""
        for process_id, push in pushes:
            size = len(push.body) + PUSH_ENTRY_BYTES
            if self._located_bytes + size > self.max_pending_push_bytes:
                DROPPED_PUSHES.inc()
                continue
            self._located_bytes += size
            self._located.append((process_id, push))
        self._pushes_waiting.set()

    async def _write_pushes(self) -> None:
        """Publish what was handed over, a round at a time: the located pushes first (in
        the order given), then the ephemeral ones to wherever their users are now. Its
        own task, so that a slow Redis holds up no registration nor invalidation."""
        while True:
            await self._pushes_waiting.wait()
            self._pushes_waiting.clear()
            located, self._located, self._located_bytes = self._located, [], 0
            ephemeral, self._ephemeral, self._ephemeral_bytes = self._ephemeral, [], 0
            self._publishing = True
            unsent = len(located)  # what a failed round loses
            try:
                await self._publish(located)
                unsent = 0
                if ephemeral:
                    unsent = len(ephemeral)
                    placement = await self._lookup(sorted({p.user_id for p in ephemeral}))
                    if placement.unknown:
                        DROPPED_PUSHES.inc(
                            sum(1 for push in ephemeral if push.user_id in placement.unknown)
                        )
                    routed = [
                        (process_id, push)
                        for push in ephemeral
                        for process_id in placement.remote.get(push.user_id, ())
                    ]
                    unsent = len(routed)
                    await self._publish(routed)
                    unsent = 0
            except asyncio.CancelledError:
                raise
            except Exception:
                # Those devices catch up with getDifference.
                DROPPED_PUSHES.inc(unsent)
                log.warning("cluster: publishing pushes failed", exc_info=True)
                await asyncio.sleep(RECONNECT_PAUSE)
            finally:
                self._publishing = False

    async def _publish(self, located: list[tuple[str, cluster_store.RemotePush]]) -> None:
        if not located:
            return
        by_process: dict[str, list[cluster_store.RemotePush]] = {}
        for process_id, push in located:
            by_process.setdefault(process_id, []).append(push)
        failed = await cluster_store.publish_pushes(self.link, by_process)
        if failed:
            # Refused one by one (the connection is fine): counted as dropped, and the
            # rest were published.
            log.warning("cluster: %d of %d pushes got an error reply", failed, len(located))
            DROPPED_PUSHES.inc(failed)
        REMOTE_PUSHES.inc(len(located) - failed)

    def _deliver(self, data: bytes) -> None:
        push = cluster_store.decode_push(data)
        RECEIVED_PUSHES.inc()
        self.gateway.push_to_user(push.user_id, push.body, push.exclude)

    # -- invalidation -------------------------------------------------------------------

    def on(self, kind: str, handler: BusHandler) -> None:
        """Run ``handler(message)`` for every ``kind`` message another process broadcasts."""
        self._handlers[kind] = handler

    def on_resubscribe(self, forget_all: Callable[[], None]) -> None:
        """Called when the subscription was down and invalidations may have been missed."""
        self._on_resubscribe.append(forget_all)

    def broadcast(self, kind: str, **fields: Any) -> None:
        """Tell the other processes (nobody to tell: nothing is sent)."""
        if not self.peers:
            return
        INVALIDATIONS.labels(kind).inc()
        self._outgoing_bus.append({"t": kind, "p": self.process_id, **fields})
        self._changes.set()

    # -- registration -------------------------------------------------------------------

    def _user_presence(self, user_id: int, present: bool) -> None:
        if present:
            self._local_users.add(user_id)
            self._to_unregister.discard(user_id)
            self._to_register.add(user_id)
        else:
            self._local_users.discard(user_id)
            self._to_register.discard(user_id)
            self._to_unregister.add(user_id)
        self._changes.set()

    async def _sync(self) -> None:
        """Write registrations and broadcasts as they come, in order, off the hot path
        (pushes have a writer of their own)."""
        while True:
            await self._changes.wait()
            self._changes.clear()
            register, self._to_register = sorted(self._to_register), set()
            unregister, self._to_unregister = sorted(self._to_unregister), set()
            messages, self._outgoing_bus = self._outgoing_bus, []
            try:
                if register:
                    await cluster_store.register(
                        self.redis, self.process_id, register, self._clock(), self.ttl
                    )
                if unregister:
                    await cluster_store.unregister(self.redis, self.process_id, unregister)
                for message in messages:
                    await cluster_store.publish_bus(self.link, message)
            except asyncio.CancelledError:
                raise
            except Exception:
                # The heartbeat renews every registration; broadcasts are best effort.
                log.warning("cluster: writing registrations failed", exc_info=True)
                await asyncio.sleep(RECONNECT_PAUSE)

    async def _announce(self) -> None:
        live = await cluster_store.announce(self.redis, self.process_id, self._clock(), self.ttl)
        self.peers = {p for p in live if p != self.process_id}

    async def _heartbeat(self) -> None:
        failing = False  # one line when the heartbeats start failing, one when they work
        while True:
            await asyncio.sleep(self.heartbeat)
            try:
                await self._announce()
                await cluster_store.register(
                    self.redis, self.process_id, sorted(self._local_users), self._clock(), self.ttl
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if not failing:
                    log.warning("cluster: heartbeat failed (%r); retrying", e)
                log.debug("cluster: heartbeat failed", exc_info=True)
                failing = True
            else:
                if failing:
                    log.info("cluster: heartbeats work again")
                failing = False

    # -- the subscription ---------------------------------------------------------------

    async def _listen(self) -> None:
        first = True
        lost = False  # one line when the subscription is lost, one when it is back
        while True:
            # Its own client without a read timeout: a quiet channel is not a dead Redis.
            client = self.link.subscriber()
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.subscribe(
                        cluster_store.proc_channel(self.process_id), cluster_store.BUS_CHANNEL
                    )
                    if not first:
                        for forget in self._on_resubscribe:
                            forget()
                    if lost:
                        log.info("cluster: subscribed again")
                    first = lost = False
                    self._subscribed.set()
                    own = cluster_store.proc_channel(self.process_id).encode()
                    async for message in pubsub.listen():
                        if message.get("type") != "message":
                            continue
                        try:
                            if message["channel"] == own:
                                self._deliver(message["data"])
                            else:
                                self._on_bus(cluster_store.decode_bus(message["data"]))
                        except Exception:
                            log.exception("cluster: bad message on %r", message.get("channel"))
            except asyncio.CancelledError:
                raise
            except Exception as e:
                # Redis away for a while fails every attempt: said once, not each second.
                if not lost:
                    log.warning("cluster: subscription lost (%r); subscribing again", e)
                log.debug("cluster: subscribing failed", exc_info=True)
                lost = True
                await asyncio.sleep(RECONNECT_PAUSE)
            finally:
                with contextlib.suppress(Exception):
                    await client.aclose()

    def _on_bus(self, message: dict[str, Any]) -> None:
        sender = message.get("p")
        if sender == self.process_id or not isinstance(sender, str):
            return
        kind = message.get("t")
        if kind == "hello":
            self.peers.add(sender)
            return
        if kind == "bye":
            self.peers.discard(sender)
            return
        handler = self._handlers.get(str(kind))
        if handler is not None:
            handler(message)


def keys_of(message: dict[str, Any], field: str = "ids") -> Iterable[int]:
    """The integer ids a bus message carries (anything else is ignored)."""
    values = message.get(field)
    if not isinstance(values, list):
        return ()
    return [v for v in values if isinstance(v, int)]
