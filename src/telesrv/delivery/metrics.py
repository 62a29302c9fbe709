"""The outbox's backlog as gauges, sampled from the database when metrics are scraped
(the claimed/delivered/failed counters are counted by the workers themselves)."""

from __future__ import annotations

from prometheus_client import Gauge

from telesrv.store import outbox as outbox_store
from telesrv.store.db import Executor

BACKLOG = Gauge(
    "telesrv_outbox_backlog_rows",
    "Outbox rows by status: 'pending' (waiting for a worker) or 'failed' (given up).",
    ["status"],
    multiprocess_mode="livesum",
)
OLDEST_DUE = Gauge(
    "telesrv_outbox_oldest_due_seconds",
    "How long the oldest due pending outbox row has waited for a worker.",
    multiprocess_mode="livesum",
)


async def sample_backlog(db: Executor) -> None:
    found = await outbox_store.backlog(db)
    BACKLOG.labels("pending").set(found.pending)
    BACKLOG.labels("failed").set(found.failed)
    OLDEST_DUE.set(found.oldest_due_seconds)
