"""Garbage collection of the blob store: blobs that no photo or document uses.

A blob loses its last row when rows are deleted, or never gets one when a request fails
between storing the bytes and committing the row. Such blobs are removed once they are
older than a grace period: a blob written within it may belong to a row that is not
committed yet (a blob shared by a new row is touched when stored again, so it counts as
written then). Keys are listed and checked against the database in batches, so memory
stays bounded whatever the store's size. Every server process may run the collector;
concurrent runs only repeat work.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from telesrv.config import MAX_BLOB_GC_BATCH, MIN_BLOB_GC_GRACE
from telesrv.store import files as file_store
from telesrv.store.blobs import BlobStore
from telesrv.store.db import Db

log = logging.getLogger(__name__)

# A blob younger than MIN_GRACE may still be waiting for its row. Keys per database
# query: many, to pass over the tables rarely, but at most MAX_BATCH, to keep a query short.
MIN_GRACE = MIN_BLOB_GC_GRACE
MAX_BATCH = MAX_BLOB_GC_BATCH
# An uploaded photo or document is kept at least this long for a message to carry it.
MIN_UNSENT_MEDIA_TTL = 3600.0


@dataclass(frozen=True)
class BlobGcLimits:
    grace: float = 3600.0  # seconds since a blob's last write before it may go
    interval: float = 3600.0  # seconds between two runs in a server
    batch: int = 1000  # keys per database query

    def __post_init__(self) -> None:
        if not self.grace >= MIN_GRACE:
            raise ValueError(f"blob GC grace must be >= {MIN_GRACE:g} seconds")
        if not self.interval > 0:
            raise ValueError("blob GC interval must be > 0")
        if not 1 <= self.batch <= MAX_BATCH:
            raise ValueError(f"blob GC batch must be between 1 and {MAX_BATCH}")


@dataclass
class BlobGcReport:
    old: int = 0  # blobs past the grace period when listed
    referenced: int = 0  # of those, in use by a row
    removed: int = 0  # unused ones removed (dry run: that would be removed)
    rewritten: int = 0  # unused when checked, written again before removal: kept
    unsent_media: int = 0  # photos and documents deleted because no message carried them
    temporaries: int = 0  # stale temporary files removed
    batches: int = 0  # database queries


class BlobCollector:
    def __init__(
        self,
        db: Db,
        blobs: BlobStore,
        limits: BlobGcLimits,
        unsent_media: UnsentMediaCollector | None = None,
    ) -> None:
        self._db = db
        self._blobs = blobs
        self.limits = limits
        # Rows deleted first, so the blobs they leave unused go in the same pass.
        self._unsent_media = unsent_media

    async def collect(self, now: float, *, dry_run: bool = False) -> BlobGcReport:
        """One pass: remove blobs no row uses that were last written more than the grace
        period before ``now`` (epoch seconds), and stale temporary files."""
        cutoff = now - self.limits.grace
        report = BlobGcReport()
        if self._unsent_media is not None and not dry_run:
            report.unsent_media = await self._unsent_media.collect(now)
        async for keys in self._blobs.keys_older_than(cutoff, self.limits.batch):
            report.batches += 1
            report.old += len(keys)
            used = await file_store.referenced_blobs(self._db.pool, keys)
            report.referenced += len(used)
            for key in keys:
                if key in used:
                    continue
                if dry_run:
                    report.removed += 1
                elif await self._blobs.remove_unless_newer(key, cutoff):
                    report.removed += 1
                else:
                    report.rewritten += 1
        if not dry_run:
            report.temporaries = await self._blobs.remove_stale_temporaries(cutoff)
        return report

    async def run_periodic(self, clock: Callable[[], float] = time.time) -> None:
        """The server's task: a pass every ``interval`` seconds."""
        while True:
            await asyncio.sleep(self.limits.interval)
            try:
                report = await self.collect(clock())
            except Exception:
                log.warning("blob garbage collection failed; trying again later", exc_info=True)
                continue
            if report.removed or report.temporaries or report.unsent_media:
                log.info(
                    "removed %d never-sent photos and documents, %d unused blobs and %d"
                    " stale temporary files",
                    report.unsent_media,
                    report.removed,
                    report.temporaries,
                )


# -- photos and documents never sent --------------------------------------------------


@dataclass(frozen=True)
class UnsentMediaLimits:
    # An uploadMedia result is kept this long for a message to carry it.
    ttl: float = 24 * 3600.0
    batch: int = 1000  # rows of each table deleted per transaction

    def __post_init__(self) -> None:
        if not self.ttl >= MIN_UNSENT_MEDIA_TTL:
            raise ValueError(f"unsent media ttl must be >= {MIN_UNSENT_MEDIA_TTL:g} seconds")
        if not 1 <= self.batch <= MAX_BATCH:
            raise ValueError(f"unsent media batch must be between 1 and {MAX_BATCH}")


class UnsentMediaCollector:
    """Deletes photos and documents no message carries once older than ``ttl`` (results
    of messages.uploadMedia never sent); the blob collector then removes their blobs.

    Messages name the object they carry (``private_messages.media_id``); a send that
    names one share-locks its row, so a row is deleted only when no message carries it
    and none is being sent with it."""

    def __init__(self, db: Db, limits: UnsentMediaLimits) -> None:
        self._db = db
        self.limits = limits

    async def collect(self, now: float) -> int:
        """Delete in batches until a batch finds fewer rows than it could take."""
        dated_before = int(now - self.limits.ttl)
        total = 0
        while True:
            deleted = await self._db.run_txn(
                "delete_unsent_media",
                file_store.delete_unsent_media_txn,
                dated_before,
                self.limits.batch,
            )
            total += deleted
            if deleted < self.limits.batch:
                return total
