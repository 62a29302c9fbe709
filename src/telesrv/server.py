"""The serving process as built: start its listeners and background work, serve
/metrics, and stop in order. ``wiring.build_server`` makes one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, CollectorRegistry

from telesrv.delivery.cluster import Cluster
from telesrv.delivery.metrics import sample_backlog
from telesrv.delivery.outbox import OutboxDelivery
from telesrv.gateway.metrics import CHECK_TIMEOUT, MetricsServer
from telesrv.gateway.server import Gateway
from telesrv.parts import AccountServices, Parts
from telesrv.services.blobs import BlobCollector
from telesrv.services.uploads import Uploads
from telesrv.serving import readiness
from telesrv.store import admin_events
from telesrv.store.counters import Counters
from telesrv.store.rate_limits import RateLimits
from telesrv.workers import WorkersCollector

if TYPE_CHECKING:
    from telesrv.app import Resources


# How long a stopping server waits for finished uploads' removals (parts and places).
UPLOAD_REMOVALS_GRACE = 5.0


@dataclass
class Server:
    gateway: Gateway
    outbox: OutboxDelivery
    counters: Counters
    rate_limits: RateLimits
    cluster: Cluster
    resources: Resources
    # An admin command ended this key's authorization: forget it, close its sessions.
    on_ended_elsewhere: Callable[[int], None]
    parts: Parts | None = None  # what it is made of (tests and benchmarks use them)
    accounts: AccountServices | None = None  # the account half of the parts, whole
    metrics: MetricsServer | None = None
    uploads: Uploads | None = None
    blob_gc: BlobCollector | None = None
    _admin_listener: asyncio.Task[None] | None = field(default=None, init=False)
    _cleanup: asyncio.Task[None] | None = field(default=None, init=False)
    _blob_gc: asyncio.Task[None] | None = field(default=None, init=False)

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> tuple[str, int]:
        await self.counters.load_scripts()
        await self.rate_limits.load_scripts()
        # Subscribed and announced before the first client: pushes for it reach us.
        await self.cluster.start()
        bound = await self.gateway.start(host, port, reuse_port=reuse_port)
        self.outbox.start()
        subscribed = asyncio.Event()
        self._admin_listener = asyncio.create_task(
            admin_events.listen_ended(self.cluster.link, self.on_ended_elsewhere, subscribed.set)
        )
        # Subscribed before the server reports ready, so no admin message is missed.
        waiter = asyncio.ensure_future(subscribed.wait())
        await asyncio.wait(
            [waiter, self._admin_listener],
            timeout=CHECK_TIMEOUT,
            return_when=asyncio.FIRST_COMPLETED,
        )
        waiter.cancel()
        if self.uploads is not None:
            self._cleanup = asyncio.get_running_loop().create_task(self.uploads.run_cleanup())
        if self.blob_gc is not None:
            self._blob_gc = asyncio.get_running_loop().create_task(self.blob_gc.run_periodic())
        return bound

    async def start_metrics(
        self, host: str, port: int, *, workers_dir: Path | None = None
    ) -> tuple[str, int]:
        """Serve /metrics, /healthz and /readyz on their own port; ``workers_dir``: add
        the metrics the workers keep there."""
        db = self.resources.db
        registry = REGISTRY
        if workers_dir is not None:
            registry = CollectorRegistry(auto_describe=False)
            registry.register(WorkersCollector(REGISTRY, workers_dir))
        watch = self.resources.watch
        self.metrics = MetricsServer(
            readiness(self.resources),
            refresh=lambda: sample_backlog(db.pool),
            health=watch.health if watch is not None else dict,
            registry=registry,
        )
        return await self.metrics.start(host, port)

    async def stop(self) -> None:
        if self._admin_listener is not None:
            self._admin_listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._admin_listener
        if self.metrics is not None:
            await self.metrics.stop()
        if self._cleanup is not None:
            self._cleanup.cancel()
        if self._blob_gc is not None:
            self._blob_gc.cancel()
        if self.parts is not None:
            self.parts.profile_pushes.close()
        await self.gateway.stop()
        if self.accounts is not None:
            # Deliveries of codes still running are cut off: a stopped server's codes
            # can still be read with `telesrv codes`.
            await self.accounts.login.close()
        if self.uploads is not None:
            # Removals the stopped requests left running free their shared places now;
            # cut off at shutdown, those places would stay taken for the idle time.
            await self.uploads.wait_removals(timeout=UPLOAD_REMOVALS_GRACE)
        await self.outbox.stop()
        await self.cluster.stop()
