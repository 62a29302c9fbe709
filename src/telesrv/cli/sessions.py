"""`telesrv sessions`: the logged-in devices of an account."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from telesrv.cli.admin import admin_settings, run_admin_service
from telesrv.cli.options import storage_options


@click.group()
def sessions() -> None:
    """Logged-in devices of an account."""


@sessions.command("list")
@storage_options
@click.argument("user")
def sessions_list(
    data_dir: Path, database_url: str | None, redis_url: str | None, user: str
) -> None:
    """List the devices of USER (a user id, or a phone with a leading +)."""

    async def job(admin: Any) -> Any:
        user_id = await admin.find_user(user)
        return user_id, await admin.devices(user_id)

    user_id, devices = run_admin_service(admin_settings(data_dir, database_url, redis_url), job)
    if not devices:
        click.echo(f"user {user_id}: no devices logged in")
        return
    click.echo(f"{'hash':>20}  {'active (UTC)':19}  {'layer':>5}  device")
    for d in devices:
        active = datetime.fromtimestamp(d.active_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        what = " / ".join(x for x in (d.device_model, d.system_version, d.app_version) if x)
        click.echo(f"{_unsigned(d.hash):>20}  {active}  {d.layer or '-':>5}  {what or '-'}")


# Device hashes are signed 64-bit; shown unsigned, so that none looks like an option.
_U64 = 1 << 64


def _unsigned(value: int) -> int:
    return value % _U64


def _signed(value: int) -> int:
    return value - _U64 if value >= _U64 >> 1 else value


@sessions.command("end")
@storage_options
@click.argument("user")
@click.argument("hash", type=click.IntRange(min=-(_U64 >> 1), max=_U64 - 1))
def sessions_end(
    data_dir: Path, database_url: str | None, redis_url: str | None, user: str, hash: int
) -> None:
    """Log out the device HASH (from `sessions list`) of USER; a running server closes
    its connections at once."""

    async def job(admin: Any) -> Any:
        return await admin.end_device(await admin.find_user(user), _signed(hash))

    run_admin_service(admin_settings(data_dir, database_url, redis_url), job)
    click.echo(f"device {hash} logged out")
