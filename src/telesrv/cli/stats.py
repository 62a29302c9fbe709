"""`telesrv stats`: what the server has recorded."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import Any

import click

from telesrv.cli.admin import admin_settings, run_admin_service
from telesrv.cli.options import storage_options


def _when(value: Any) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else "-"


@click.group()
def stats() -> None:
    """What the server has recorded."""


@stats.command("unknown-methods")
@storage_options
def stats_unknown_methods(data_dir: Path, database_url: str | None, redis_url: str | None) -> None:
    """Methods clients called that the server does not implement, most called first."""
    rows = run_admin_service(
        admin_settings(data_dir, database_url, redis_url), lambda admin: admin.unknown_methods()
    )
    if not rows:
        click.echo("no unknown methods recorded")
        return
    click.echo(f"{'calls':>8}  {'last seen (UTC)':19}  {'layer':>5}  method (last app version)")
    for r in rows:
        app = f" ({r.last_app_version})" if r.last_app_version else ""
        click.echo(f"{r.calls:>8}  {_when(r.last_seen)}  {r.last_layer or '-':>5}  {r.method}{app}")
