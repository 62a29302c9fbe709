"""The outbox's metrics: what its workers and the pushes of held rows count as they go,
and its backlog as gauges, sampled from the database when metrics are scraped."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from telesrv.store import outbox as outbox_store
from telesrv.store.db import Executor

CLAIMED = Counter("telesrv_outbox_claimed_total", "Outbox rows claimed by a worker.")
DELIVERED = Counter(
    "telesrv_outbox_delivered_total",
    "Outbox rows handled and deleted (pushed, or nobody online to push to).",
)
FAILED = Counter(
    "telesrv_outbox_failed_total",
    "Outbox rows whose push raised: put back for a retry ('retry'), 'failed' for good"
    " ('terminal'), or put back with a whole batch that raised ('batch').",
    ["outcome"],
)
PUSHES = Counter("telesrv_outbox_pushes_total", "Sessions an outbox push reached.")
BATCH_SECONDS = Histogram(
    "telesrv_outbox_batch_seconds",
    "Duration of one outbox batch: claim, load, push, delete.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
HELD_PUSHED = Counter(
    "telesrv_outbox_held_pushed_total",
    "Outbox rows pushed by the process that wrote them, without a worker's claim.",
)

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
