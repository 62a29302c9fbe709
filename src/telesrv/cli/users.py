"""`telesrv users` (accounts and blocked logins) and `telesrv codes` (pending login codes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from telesrv.cli.admin import account_error_text, admin_settings, run_admin, run_admin_service
from telesrv.cli.options import storage_options


@click.group()
def users() -> None:
    """Manage accounts."""


@users.command("add")
@storage_options
@click.option("--phone", required=True, help="International format, e.g. +15550001.")
@click.option("--first-name", required=True)
@click.option("--last-name", default="")
@click.option("--username", default=None)
def users_add(
    data_dir: Path,
    database_url: str | None,
    redis_url: str | None,
    phone: str,
    first_name: str,
    last_name: str,
    username: str | None,
) -> None:
    """Create an account."""
    from telesrv.services.errors import DomainError
    from telesrv.services.users import UserService

    async def job(db: Any) -> Any:
        return await UserService(db).create(phone, first_name, last_name, username)

    try:
        account = run_admin(admin_settings(data_dir, database_url, redis_url), job)
    except DomainError as exc:
        raise click.ClickException(account_error_text(exc)) from None
    click.echo(f"created user {account.user_id} {_describe(account)}")


@users.command("list")
@storage_options
def users_list(data_dir: Path, database_url: str | None, redis_url: str | None) -> None:
    """List accounts."""
    from telesrv.services.users import UserService

    async def job(db: Any) -> Any:
        service = UserService(db)
        found: list[Any] = []
        while True:
            page = await service.list_accounts(after_id=found[-1].user_id if found else 0)
            found += page
            if not page:
                return found

    accounts = run_admin(admin_settings(data_dir, database_url, redis_url), job)
    if not accounts:
        click.echo("no users")
        return
    click.echo(f"{'id':>10}  account")
    for account in accounts:
        click.echo(f"{account.user_id:>10}  {_describe(account)}")


def _describe(account: Any) -> str:
    name = f"{account.first_name} {account.last_name}".strip()
    username = f" @{account.username}" if account.username else ""
    return f"+{account.phone} {name}{username}"


@users.command("block-login")
@storage_options
@click.argument("phone")
@click.option(
    "--end-sessions/--keep-sessions",
    default=True,
    show_default=True,
    help="Also log out every device of the account now.",
)
def users_block_login(
    data_dir: Path, database_url: str | None, redis_url: str | None, phone: str, end_sessions: bool
) -> None:
    """Prevent PHONE from signing in (auth.sendCode/signIn answer PHONE_NUMBER_BANNED)."""
    result = run_admin_service(
        admin_settings(data_dir, database_url, redis_url),
        lambda admin: admin.block_login(phone, end_sessions=end_sessions),
    )
    state = "blocked" if result.newly_blocked else "already blocked"
    click.echo(f"{phone}: login {state}; {result.ended_devices} device(s) logged out")


@users.command("unblock-login")
@storage_options
@click.argument("phone")
def users_unblock_login(
    data_dir: Path, database_url: str | None, redis_url: str | None, phone: str
) -> None:
    """Let PHONE sign in again."""
    was = run_admin_service(
        admin_settings(data_dir, database_url, redis_url),
        lambda admin: admin.unblock_login(phone),
    )
    click.echo(f"{phone}: login unblocked" if was else f"{phone}: was not blocked")


@users.command("blocked-logins")
@storage_options
def users_blocked_logins(data_dir: Path, database_url: str | None, redis_url: str | None) -> None:
    """List the phones blocked from signing in."""
    phones = run_admin_service(
        admin_settings(data_dir, database_url, redis_url), lambda admin: admin.blocked_logins()
    )
    click.echo("\n".join(f"+{p}" for p in phones) if phones else "no blocked logins")


@users.command("remove-password")
@storage_options
@click.argument("who")
def users_remove_password(
    data_dir: Path, database_url: str | None, redis_url: str | None, who: str
) -> None:
    """Remove the two-step verification password of WHO (+PHONE or a user id)."""
    had = run_admin_service(
        admin_settings(data_dir, database_url, redis_url),
        lambda admin: admin.remove_password(who),
    )
    click.echo(f"{who}: password removed" if had else f"{who}: had no password")


@click.command("codes")
@storage_options
@click.argument("phone")
def codes(data_dir: Path, database_url: str | None, redis_url: str | None, phone: str) -> None:
    """Show pending login codes for PHONE (when no dev login code is set)."""
    import time

    from telesrv.services.errors import DomainError
    from telesrv.services.login import pending_codes

    now = time.time()

    async def job(db: Any) -> Any:
        return await pending_codes(db, phone, now)

    try:
        pending = run_admin(admin_settings(data_dir, database_url, redis_url), job)
    except DomainError as exc:
        raise click.ClickException(account_error_text(exc)) from None
    if not pending:
        click.echo(f"no pending login codes for {phone}")
        return
    for code in pending:
        left = max(0, int(code.expires_at.timestamp() - now))
        click.echo(f"{code.code}  expires in {left}s  wrong attempts {code.attempts}")
