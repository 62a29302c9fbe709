"""`telesrv outbox`: outbox rows whose push kept failing."""

from __future__ import annotations

from pathlib import Path

import click

from telesrv.cli.admin import admin_settings, run_admin_service
from telesrv.cli.options import F, storage_options


@click.group()
def outbox() -> None:
    """Outbox rows whose push kept failing (their updates stay in the users' logs)."""


def _outbox_user_option(fn: F) -> F:
    return click.option(
        "--user-id", type=int, default=None, help="Only rows for this target user."
    )(fn)


@outbox.command("list")
@storage_options
@_outbox_user_option
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
def outbox_list(
    data_dir: Path, database_url: str | None, redis_url: str | None, user_id: int | None, limit: int
) -> None:
    """List failed rows, oldest first."""
    rows = run_admin_service(
        admin_settings(data_dir, database_url, redis_url),
        lambda admin: admin.failed_outbox(user_id, limit),
    )
    if not rows:
        click.echo("no failed outbox rows")
        return
    click.echo(f"{'user':>10}  {'row':>8}  {'event':>12}  {'tries':>5}  last error")
    for r in rows:
        event = f"pts {r.pts}" if r.pts is not None else f"state {r.state_id}"
        error = (r.last_error or "-").splitlines()[0][:80] if r.last_error else "-"
        click.echo(f"{r.target_user_id:>10}  {r.id:>8}  {event:>12}  {r.attempts:>5}  {error}")


@outbox.command("requeue")
@storage_options
@_outbox_user_option
def outbox_requeue(
    data_dir: Path, database_url: str | None, redis_url: str | None, user_id: int | None
) -> None:
    """Make failed rows pending again, due now, attempts reset."""
    n = run_admin_service(
        admin_settings(data_dir, database_url, redis_url),
        lambda admin: admin.requeue_failed(user_id),
    )
    click.echo(f"requeued {n} failed row(s)")


@outbox.command("purge")
@storage_options
@_outbox_user_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def outbox_purge(
    data_dir: Path, database_url: str | None, redis_url: str | None, user_id: int | None, yes: bool
) -> None:
    """Delete failed rows (clients still get their updates through getDifference)."""
    if not yes:
        click.confirm("Delete the failed outbox rows?", abort=True)
    n = run_admin_service(
        admin_settings(data_dir, database_url, redis_url),
        lambda admin: admin.purge_failed(user_id),
    )
    click.echo(f"purged {n} failed row(s)")
