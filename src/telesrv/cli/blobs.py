"""`telesrv blobs`: the blob store (file contents of photos and documents)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from telesrv.cli.admin import admin_settings, run_admin
from telesrv.cli.options import blob_gc_grace_option, storage_options


@click.group()
def blobs() -> None:
    """The blob store: file contents of photos and documents, by SHA-256."""


@blobs.command("gc")
@storage_options
@blob_gc_grace_option
@click.option("--dry-run", is_flag=True, help="Count what would be removed; remove nothing.")
def blobs_gc(
    data_dir: Path,
    database_url: str | None,
    redis_url: str | None,
    blob_gc_grace_minutes: int,
    dry_run: bool,
) -> None:
    """Remove photos and documents never sent within a day and blobs no photo or
    document uses (a running server does this periodically)."""
    from telesrv.services.blobs import (
        BlobCollector,
        BlobGcLimits,
        UnsentMediaCollector,
        UnsentMediaLimits,
    )
    from telesrv.store.blobs import LocalBlobStore

    settings = admin_settings(data_dir, database_url, redis_url)
    limits = BlobGcLimits(grace=blob_gc_grace_minutes * 60.0, batch=settings.blob_gc_batch)

    async def job(db: Any) -> Any:
        unsent = UnsentMediaCollector(db, UnsentMediaLimits())
        collector = BlobCollector(db, LocalBlobStore(settings.files_dir), limits, unsent)
        return await collector.collect(time.time(), dry_run=dry_run)

    report = run_admin(settings, job)
    verb = "would remove" if dry_run else "removed"
    click.echo(
        f"{report.old} blobs older than {blob_gc_grace_minutes} min, "
        f"{report.referenced} in use; {verb} {report.removed}"
    )
    if not dry_run:
        click.echo(
            f"kept {report.rewritten} written again meanwhile; "
            f"removed {report.temporaries} stale temporary files; "
            f"deleted {report.unsent_media} photos and documents never sent"
        )
