"""`telesrv serve` and the hidden `telesrv worker` it starts for `--workers N`."""

from __future__ import annotations

from pathlib import Path

import click

from telesrv.cli.login_code_options import login_code_options
from telesrv.cli.options import (
    HOST_PORT,
    HOST_PORT_OR_OFF,
    blob_gc_grace_option,
    config_file_option,
    settings_refusal,
    storage_options,
)
from telesrv.config import (
    DEFAULT_LISTEN_HOST,
    DEFAULT_LISTEN_PORT,
    DEFAULT_MEDIA_RATE_LIMIT,
    DEFAULT_PARTITION_COUNT,
    DEFAULT_PHONE_LOOKUP_DAILY_LIMIT,
    DEFAULT_PHONE_LOOKUP_RATE_LIMIT,
    DEFAULT_SEND_RATE_LIMIT,
    DEFAULT_WS_LISTEN_HOST,
    DEFAULT_WS_LISTEN_PORT,
    MAX_OUTBOX_BATCH,
    Settings,
    format_host_port,
)
from telesrv.delivery.outbox import BATCH_GROWTH

_defaults = Settings()


# `telesrv check` runs serve's own option parsing and settings checks, then stops here.
CHECK_ONLY = "telesrv.check_only"
CHECKED_SETTINGS = "telesrv.checked_settings"


@click.command()
@config_file_option
@click.option(
    "--listen",
    envvar="TELESRV_LISTEN",
    show_envvar=True,
    type=HOST_PORT,
    default=format_host_port(DEFAULT_LISTEN_HOST, DEFAULT_LISTEN_PORT),
    show_default=True,
    help="Address to accept MTProto clients on (port 0: any free port).",
)
@click.option(
    "--ws-listen",
    envvar="TELESRV_WS_LISTEN",
    show_envvar=True,
    type=HOST_PORT_OR_OFF,
    default=format_host_port(DEFAULT_WS_LISTEN_HOST, DEFAULT_WS_LISTEN_PORT),
    show_default=True,
    help="Address to accept MTProto over WebSocket on, for browsers "
    "(ws://HOST:PORT/apiws; port 0: any free port); 'off' turns it off.",
)
@click.option(
    "--ws-tls-cert",
    envvar="TELESRV_WS_TLS_CERT",
    show_envvar=True,
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="PEM certificate chain: the WebSocket listener speaks wss://. Needs --ws-tls-key.",
)
@click.option(
    "--ws-tls-key",
    envvar="TELESRV_WS_TLS_KEY",
    show_envvar=True,
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="PEM private key of --ws-tls-cert.",
)
@click.option(
    "--ws-trusted-proxies",
    envvar="TELESRV_WS_TRUSTED_PROXIES",
    show_envvar=True,
    default="",
    metavar="ADDRESSES",
    help="Reverse proxies in front of the WebSocket listener, comma-separated addresses "
    "or networks (10.0.0.0/8): their X-Forwarded-For names the client, whose address "
    "is then the one limited and logged. Others' X-Forwarded-For is ignored.",
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
@login_code_options
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
    "--media-rate-limit",
    envvar="TELESRV_MEDIA_RATE_LIMIT",
    show_envvar=True,
    type=click.IntRange(min=0),
    default=DEFAULT_MEDIA_RATE_LIMIT,
    show_default=True,
    metavar="N",
    help="Uploads made into photos or documents per user per minute; 0 turns the limit off.",
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
    help="Workers delivering the outbox to online sessions.",
)
@click.option(
    "--send-group-size",
    envvar="TELESRV_SEND_GROUP_SIZE",
    show_envvar=True,
    type=click.IntRange(min=1),
    default=_defaults.send_group_size,
    show_default=True,
    help="Sends written in one statement while another is in flight (1: each alone).",
)
@click.option(
    "--outbox-batch-size",
    envvar="TELESRV_OUTBOX_BATCH_SIZE",
    show_envvar=True,
    type=click.IntRange(min=1, max=MAX_OUTBOX_BATCH),
    default=_defaults.outbox_batch_size,
    show_default=True,
    help="Outbox rows one worker claims at a time. While its claims come back full (a "
    f"backlog), a worker doubles them, up to {BATCH_GROWTH} times this and at most "
    f"{MAX_OUTBOX_BATCH}.",
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
    help=(
        "Seconds an outbox worker may keep its claim waiting before the database ends it "
        "(the rows are due again; PostgreSQL's idle_in_transaction_session_timeout for "
        "every pooled connection, at least the statement plus the acquire timeout), that "
        "a writer's own pushes hold their rows, and the "
        "longest backoff of an outbox batch that raised."
    ),
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
    "--min-free-disk-mb",
    envvar="TELESRV_MIN_FREE_DISK_MB",
    show_envvar=True,
    type=click.IntRange(min=0),
    default=_defaults.min_free_disk_bytes // (1024 * 1024),
    show_default=True,
    help="/readyz answers 503 below this many free MiB on the data directory's disk.",
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
@click.option(
    "--join",
    envvar="TELESRV_JOIN",
    show_envvar=True,
    is_flag=True,
    default=False,
    help="Run alongside a `telesrv serve` already using this data directory (another "
    "process of the same server) instead of refusing to start.",
)
@blob_gc_grace_option
def serve(
    listen: tuple[str, int],
    ws_listen: tuple[str, int] | None,
    ws_tls_cert: str | None,
    ws_tls_key: str | None,
    ws_trusted_proxies: str,
    data_dir: Path,
    database_url: str | None,
    redis_url: str | None,
    metrics_listen: tuple[str, int] | None,
    dev_login_code: str | None,
    login_codes_per_phone: int | None,
    login_codes_per_ip: int | None,
    login_code_window: float,
    login_code_command: str | None,
    login_code_webhook: str | None,
    login_code_hook_timeout: float,
    login_code_hook_retries: int,
    login_code_hook_concurrency: int,
    log_login_codes: bool,
    auto_register: bool,
    send_rate_limit: int,
    media_rate_limit: int,
    phone_lookup_rate_limit: int,
    phone_lookup_daily_limit: int,
    advertise: tuple[str, int] | None,
    workers: int,
    outbox_workers: int,
    send_group_size: int,
    outbox_batch_size: int,
    outbox_poll_interval: float,
    outbox_lease_timeout: float,
    pg_pool_min_size: int,
    pg_pool_max_size: int,
    db_statement_timeout: float,
    db_acquire_timeout: float,
    min_free_disk_mb: int,
    frame_timeout: float,
    idle_timeout: float,
    max_connections_per_ip: int,
    handshakes_per_ip_per_second: float,
    partition_count: int,
    blob_gc_grace_minutes: int,
    join: bool,
) -> None:
    """Run the server (embedded PostgreSQL and Redis unless URLs are given)."""
    from telesrv import app
    from telesrv.startup import StartupError
    from telesrv.workers import WorkersFailed

    try:
        settings = Settings(
            listen_host=listen[0],
            listen_port=listen[1],
            ws_listen_host=ws_listen[0] if ws_listen else None,
            ws_listen_port=ws_listen[1] if ws_listen else None,
            ws_tls_cert=ws_tls_cert or None,
            ws_tls_key=ws_tls_key or None,
            ws_trusted_proxies=ws_trusted_proxies,
            data_dir=data_dir,
            database_url=database_url or None,
            redis_url=redis_url or None,
            metrics_host=metrics_listen[0] if metrics_listen else None,
            metrics_port=metrics_listen[1] if metrics_listen else None,
            dev_login_code=dev_login_code or None,
            login_codes_per_phone=login_codes_per_phone,
            login_codes_per_ip=login_codes_per_ip,
            login_code_window=login_code_window,
            login_code_command=login_code_command or None,
            login_code_webhook=login_code_webhook or None,
            login_code_hook_timeout=login_code_hook_timeout,
            login_code_hook_retries=login_code_hook_retries,
            login_code_hook_concurrency=login_code_hook_concurrency,
            log_login_codes=log_login_codes,
            auto_register=auto_register,
            send_rate_limit=send_rate_limit,
            media_rate_limit=media_rate_limit,
            phone_lookup_rate_limit=phone_lookup_rate_limit,
            phone_lookup_daily_limit=phone_lookup_daily_limit,
            advertise_host=advertise[0] if advertise else None,
            advertise_port=advertise[1] if advertise else None,
            workers=workers,
            outbox_workers=outbox_workers,
            send_group_size=send_group_size,
            outbox_batch_size=outbox_batch_size,
            outbox_poll_interval=outbox_poll_interval,
            outbox_lease_timeout=outbox_lease_timeout,
            pg_pool_min_size=pg_pool_min_size,
            pg_pool_max_size=pg_pool_max_size,
            db_statement_timeout=db_statement_timeout,
            db_acquire_timeout=db_acquire_timeout,
            min_free_disk_bytes=min_free_disk_mb * 1024 * 1024,
            frame_timeout=frame_timeout,
            idle_timeout=idle_timeout,
            max_connections_per_ip=max_connections_per_ip,
            handshakes_per_ip_per_second=handshakes_per_ip_per_second,
            partition_count=partition_count,
            blob_gc_grace=blob_gc_grace_minutes * 60.0,
            join=join,
        )
    except ValueError as exc:
        raise settings_refusal(exc, click.get_current_context().command.params) from exc
    if settings.ws_tls_cert is not None and settings.ws_tls_key is not None:
        _check_tls(settings.ws_tls_cert, settings.ws_tls_key)
    ctx = click.get_current_context()
    if ctx.meta.get(CHECK_ONLY):
        ctx.meta[CHECKED_SETTINGS] = settings
        return
    try:
        app.run(settings)
    except (app.GatewayUnavailable, WorkersFailed) as exc:
        # Said as every refused start is: one line in the log's format, exit status 1.
        raise StartupError(str(exc)) from exc


def _check_tls(cert: str, key: str) -> None:
    """Fail at once, before any database starts, on a certificate that does not load."""
    import ssl

    from telesrv.gateway.websocket import tls_context

    try:
        tls_context(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise click.UsageError(f"--ws-tls-cert/--ws-tls-key do not load: {exc}") from exc


@click.command("worker", hidden=True)
def worker_command() -> None:
    """One further process of `serve --workers N` (its settings come from the first)."""
    import os

    from telesrv.workers import SETTINGS_ENV, follow_parent, settings_from_json

    text = os.environ.get(SETTINGS_ENV)
    if not text:
        raise click.ClickException(f"{SETTINGS_ENV} is not set: started by `serve --workers`")
    follow_parent()
    from telesrv import app

    app.run(settings_from_json(text))
