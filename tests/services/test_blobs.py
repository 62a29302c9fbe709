"""Garbage collection of the blob store on real directories and a real database: blobs
in use by a photo size, a document or a document thumbnail stay; unused ones go once
past the grace period (mtimes set with os.utime, the clock passed in); keys are checked
in bounded batches; a blob stored again while being collected survives; the limits at
and past their bounds; stale uploads from a previous process go at start."""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from telesrv.cli import main
from telesrv.config import Settings
from telesrv.services.blobs import MAX_BATCH, MIN_GRACE, BlobCollector, BlobGcLimits
from telesrv.services.uploads import UploadLimits, Uploads
from telesrv.store import files as file_store
from telesrv.store.blobs import LocalBlobStore
from telesrv.store.db import Db
from telesrv.store.files import DocumentRow, PhotoRow, SizeRow
from telesrv.store.uploads import UploadArea

NOW = 1_900_000_000.0
GRACE = 3600.0
CUTOFF = NOW - GRACE


async def stored(blobs: LocalBlobStore, mtime: float) -> str:
    """A new blob of random content, last written at ``mtime``."""
    blob = await blobs.put_bytes(secrets.token_bytes(100))
    os.utime(blobs.path_of(blob.key), (mtime, mtime))
    return blob.key


def size_json(key: str) -> dict[str, object]:
    return SizeRow("m", 10, 10, 100, key).to_json()


async def insert_document(db: Db, blob: str, thumbs: list[str]) -> None:
    row = DocumentRow(
        id=secrets.randbits(62) + 1,
        access_hash=1,
        file_reference=b"r",
        owner_user_id=1,
        date=1,
        dc_id=2,
        mime_type="application/octet-stream",
        size=100,
        blob=blob,
        attributes=[],
        thumbs=[size_json(k) for k in thumbs],
        stripped=None,
    )
    await file_store.insert_document(db.pool, row)


async def insert_photo(db: Db, sizes: list[str]) -> None:
    row = PhotoRow(
        id=secrets.randbits(62) + 1,
        access_hash=1,
        file_reference=b"r",
        owner_user_id=1,
        date=1,
        dc_id=2,
        has_stickers=False,
        stripped=None,
        sizes=[size_json(k) for k in sizes],
    )
    await file_store.insert_photo(db.pool, row)


def collector(db: Db, blobs: LocalBlobStore, batch: int = 1000) -> BlobCollector:
    return BlobCollector(db, blobs, BlobGcLimits(grace=GRACE, batch=batch))


async def test_gc_keeps_used_and_fresh_blobs_and_removes_old_unused_ones(
    db: Db, tmp_path: Path
) -> None:
    blobs = LocalBlobStore(tmp_path / "files")
    old = CUTOFF - 1
    document_blob = await stored(blobs, old)
    thumb_blob = await stored(blobs, old)
    photo_small, photo_big = await stored(blobs, old), await stored(blobs, old)
    await insert_document(db, document_blob, [thumb_blob])
    await insert_photo(db, [photo_small, photo_big])
    orphan = await stored(blobs, old)
    at_cutoff = await stored(blobs, CUTOFF)  # written exactly a grace period ago: kept
    fresh = await stored(blobs, NOW - 1)
    tmp_dir = tmp_path / "files" / "tmp"
    stale_tmp, fresh_tmp = tmp_dir / "crashed", tmp_dir / "writing"
    for path, mtime in ((stale_tmp, old), (fresh_tmp, NOW)):
        path.write_bytes(b"partial")
        os.utime(path, (mtime, mtime))

    report = await collector(db, blobs).collect(NOW)

    assert (report.old, report.referenced, report.removed) == (5, 4, 1)
    assert report.rewritten == 0 and report.temporaries == 1 and report.batches == 1
    assert not await blobs.exists(orphan)
    for key in (document_blob, thumb_blob, photo_small, photo_big, at_cutoff, fresh):
        assert await blobs.exists(key), key
    assert not stale_tmp.exists() and fresh_tmp.exists()
    # A second pass finds nothing more to do.
    again = await collector(db, blobs).collect(NOW)
    assert (again.old, again.removed, again.temporaries) == (4, 0, 0)
    # Once past the grace period, the blob at the cutoff goes too.
    later = await collector(db, blobs).collect(NOW + 1)
    assert later.removed == 1 and not await blobs.exists(at_cutoff)


async def test_a_dry_run_counts_and_removes_nothing(db: Db, tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "files")
    orphans = [await stored(blobs, CUTOFF - 10) for _ in range(3)]
    stale_tmp = tmp_path / "files" / "tmp" / "crashed"
    stale_tmp.write_bytes(b"x")
    os.utime(stale_tmp, (0, 0))
    report = await collector(db, blobs).collect(NOW, dry_run=True)
    assert (report.old, report.referenced, report.removed, report.temporaries) == (3, 0, 3, 0)
    for key in orphans:
        assert await blobs.exists(key)
    assert stale_tmp.exists()


async def test_keys_are_listed_and_checked_in_bounded_batches(db: Db, tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "files")
    keys = sorted([await stored(blobs, CUTOFF - 1) for _ in range(5)])
    used = keys[1]
    await insert_document(db, used, [])
    listed = [batch async for batch in blobs.keys_older_than(CUTOFF, 2)]
    assert [len(b) for b in listed] == [2, 2, 1]
    assert sorted(k for b in listed for k in b) == keys
    assert [batch async for batch in blobs.keys_older_than(CUTOFF - 1, 2)] == []
    report = await collector(db, blobs, batch=2).collect(NOW)
    assert (report.batches, report.old, report.referenced, report.removed) == (3, 5, 1, 4)
    assert [k for k in keys if await blobs.exists(k)] == [used]


async def test_a_blob_stored_again_after_listing_is_kept(db: Db, tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "files")
    content = secrets.token_bytes(64)
    key = (await blobs.put_bytes(content)).key
    path = blobs.path_of(key)
    os.utime(path, (CUTOFF - 1, CUTOFF - 1))
    [listed] = [batch async for batch in blobs.keys_older_than(CUTOFF, 10)]
    assert listed == [key]
    # A new row shares the content: storing it again marks it as just written, so
    # the collector, which found it unused a moment ago, leaves it in place.
    before = time.time()
    again = await blobs.put_bytes(content)
    assert again.key == key
    assert again.md5 == ""  # no MD5 to check: none computed
    assert path.stat().st_mtime >= before - 1
    assert not await blobs.remove_unless_newer(key, before - 1)
    assert await blobs.read(key, 0, 100) == content
    assert list((tmp_path / "files" / "tmp").iterdir()) == []
    # Not written since: it goes.
    assert await blobs.remove_unless_newer(key, time.time() + 1)
    assert not await blobs.exists(key)
    assert not await blobs.remove_unless_newer(key, time.time() + 1)  # already gone


async def test_referenced_blobs_reports_each_kind_of_use(db: Db) -> None:
    doc, thumb, photo = (secrets.token_hex(32) for _ in range(3))
    await insert_document(db, doc, [thumb])
    await insert_photo(db, [photo])
    unused = secrets.token_hex(32)
    found = await file_store.referenced_blobs(db.pool, [doc, thumb, photo, unused])
    assert found == {doc, thumb, photo}
    assert await file_store.referenced_blobs(db.pool, []) == set()


def test_gc_limits_at_and_past_their_bounds() -> None:
    BlobGcLimits(grace=MIN_GRACE, batch=1)
    BlobGcLimits(batch=MAX_BATCH)
    with pytest.raises(ValueError, match="grace"):
        BlobGcLimits(grace=MIN_GRACE - 0.5)
    for batch in (0, MAX_BATCH + 1):
        with pytest.raises(ValueError, match="batch"):
            BlobGcLimits(batch=batch)
    with pytest.raises(ValueError, match="interval"):
        BlobGcLimits(interval=0)
    Settings(blob_gc_grace=MIN_GRACE, blob_gc_batch=MAX_BATCH)
    for bad in (
        {"blob_gc_grace": MIN_GRACE - 0.5},
        {"blob_gc_batch": 0},
        {"blob_gc_batch": MAX_BATCH + 1},
        {"blob_gc_interval": 0.0},
    ):
        with pytest.raises(ValueError, match="blob_gc"):
            Settings(**bad)


def test_blobs_gc_command(database_url: str, redis_url: str, tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "data" / "files")
    orphan = asyncio.run(stored(blobs, time.time() - 120))
    fresh = asyncio.run(stored(blobs, time.time()))
    common = [
        "blobs", "gc",
        "--data-dir", str(tmp_path / "data"),
        "--database-url", database_url,
        "--redis-url", redis_url,
        "--blob-gc-grace-minutes", "1",
    ]  # fmt: skip
    dry = CliRunner().invoke(main, [*common, "--dry-run"], catch_exceptions=False)
    assert dry.exit_code == 0, dry.output
    assert "would remove 1" in dry.output
    assert blobs.path_of(orphan).exists()
    real = CliRunner().invoke(main, common, catch_exceptions=False)
    assert real.exit_code == 0, real.output
    assert "removed 1" in real.output
    assert not blobs.path_of(orphan).exists() and blobs.path_of(fresh).exists()
    # The grace period has a floor of a minute.
    refused = CliRunner().invoke(main, [*common[:-1], "0"])
    assert refused.exit_code != 0 and "--blob-gc-grace-minutes" in refused.output


async def test_upload_cleanup_runs_at_start_for_uploads_of_a_previous_process(
    tmp_path: Path,
) -> None:
    area = UploadArea(tmp_path / "uploads")
    uploads = Uploads(
        area, LocalBlobStore(tmp_path / "files"), UploadLimits(idle_ttl=60.0, cleanup_interval=1e6)
    )
    leftover = tmp_path / "uploads" / "5" / "6"
    leftover.mkdir(parents=True)
    (leftover / "0").write_bytes(b"old part")
    os.utime(leftover, (NOW - 61, NOW - 61))
    recent = tmp_path / "uploads" / "5" / "7"
    recent.mkdir()
    os.utime(recent, (NOW - 60, NOW - 60))  # idle exactly idle_ttl: kept
    task = asyncio.create_task(uploads.run_cleanup(clock=lambda: NOW))
    try:
        async with asyncio.timeout(30):
            while leftover.exists():
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert recent.exists()
