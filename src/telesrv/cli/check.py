"""`telesrv check`: validate a configuration without starting the server.

It takes exactly `serve`'s options (flags, environment variables, `--config`), builds
the settings the way `serve` does, then runs each start-up check on its own and
prints one line per check: ``ok: ...`` or ``FAIL: ...``. The exit status is 0 when
every check passed, 1 otherwise (2 for options click itself refuses).
"""

from __future__ import annotations

import asyncio
import fcntl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from telesrv.cli.serve import CHECK_ONLY, CHECKED_SETTINGS, serve
from telesrv.config import Settings
from telesrv.startup import (
    POSTGRES_SCHEMES,
    REDIS_SCHEMES,
    StartupError,
    check_data_dir,
    check_key_files,
    check_url,
    database_failure,
    listeners,
    redact,
    redis_failure,
    trial_bind,
)

# Seconds to wait for an external PostgreSQL or Redis to answer.
CONNECT_TIMEOUT = 10.0


class Report:
    def __init__(self) -> None:
        self.failed = 0

    def run(self, check: Callable[[], str]) -> bool:
        try:
            text = check()
        except StartupError as exc:
            self.failed += 1
            click.echo(f"FAIL: {exc}")
            return False
        click.echo(f"ok: {text}")
        return True


def _run_checks(settings: Settings, connect: bool) -> int:
    report = Report()
    report.run(lambda: _describe(settings))
    database_url_ok = report.run(lambda: _database_url(settings))
    redis_url_ok = report.run(lambda: _redis_url(settings))

    report.run(lambda: _login_codes(settings))
    report.run(lambda: check_data_dir(settings.data_dir, create=False))
    report.run(lambda: _data_dir_free(settings))
    report.run(lambda: check_key_files(settings.data_dir))
    for listener in listeners(settings):

        def bind(listener: Any = listener) -> str:
            trial_bind(listener)
            return f"{listener.flag} {listener.address} can be bound"

        report.run(bind)
    # An external server is logged in to only when its URL parsed (else it already failed).
    if connect and database_url_ok and settings.database_url is not None:
        url = settings.database_url
        report.run(lambda: asyncio.run(_connect_postgres(url)))
    if connect and redis_url_ok and settings.redis_url is not None:
        url = settings.redis_url
        report.run(lambda: asyncio.run(_connect_redis(url, settings.db_statement_timeout)))
    return report.failed


def _describe(settings: Settings) -> str:
    ws = settings.ws_listen or "off"
    metrics = "off"
    if settings.metrics_host is not None and settings.metrics_port is not None:
        metrics = f"{settings.metrics_host}:{settings.metrics_port}"
    return (
        f"settings: listen {settings.listen}, websocket {ws}, metrics {metrics}, "
        f"workers {settings.workers}"
    )


def _login_codes(settings: Settings) -> str:
    """How login codes reach people; the development code is refused where other
    machines can connect (`serve` starts with it, under an ERROR banner)."""
    if settings.dev_login_code is not None:
        if settings.listens_beyond_loopback:
            raise StartupError(
                "--dev-login-code with a listener beyond loopback: anyone who can reach "
                "the server can sign in as any user"
            )
        return "login codes: --dev-login-code on loopback only (development and tests)"
    hooks = [
        flag
        for flag, value in (
            ("--login-code-command", settings.login_code_command),
            ("--login-code-webhook", settings.login_code_webhook),
        )
        if value is not None
    ]
    if not hooks:
        return "login codes: no delivery hook; codes reach people only through `telesrv codes`"
    return f"login codes: delivered by {' and '.join(hooks)}"


def _data_dir_free(settings: Settings) -> str:
    """No running serve holds the data directory (its lock), nor a process joined to
    one, unless this one joins. Only looked at: the lock files are opened for reading,
    never made or written."""
    from telesrv.workers import JOIN_LOCK_FILE, LOCK_FILE

    holder = _held(settings.data_dir / LOCK_FILE, fcntl.LOCK_SH)
    if holder is not None:
        if settings.join:
            return f"--join: joins the server holding --data-dir (pid {holder})"
        raise StartupError(
            f"--data-dir {settings.data_dir} is in use by a running telesrv serve "
            f"(pid {holder}); stop it, or pass --join to add to it"
        )
    if _held(settings.data_dir / JOIN_LOCK_FILE, fcntl.LOCK_EX) is not None and not settings.join:
        raise StartupError(
            f"--data-dir {settings.data_dir} is in use by processes that joined an earlier "
            "telesrv serve (--join); stop them, or pass --join"
        )
    return f"--data-dir {settings.data_dir} is not held by a running server"


def _held(path: Path, operation: int) -> str | None:
    """What a lock file says of its holder when ``operation`` cannot be had on it now
    (a lock that is held), else None."""
    try:
        file = open(path)  # noqa: SIM115 (closed below; closing drops the trial lock)
    except FileNotFoundError:
        return None
    with file:
        try:
            fcntl.flock(file.fileno(), operation | fcntl.LOCK_NB)
        except BlockingIOError:
            return file.read().strip()
    return None


def _database_url(settings: Settings) -> str:
    if settings.database_url is None:
        return f"embedded PostgreSQL in {settings.embedded_postgres_dir}"
    check_url("--database-url", settings.database_url, POSTGRES_SCHEMES)
    return f"--database-url {redact(settings.database_url)} parses"


def _redis_url(settings: Settings) -> str:
    if settings.redis_url is None:
        return f"embedded Redis in {settings.embedded_redis_dir}"
    check_url("--redis-url", settings.redis_url, REDIS_SCHEMES)
    return f"--redis-url {redact(settings.redis_url)} parses"


async def _connect_postgres(url: str) -> str:
    from telesrv.store import db as dbmod
    from telesrv.store import migrate

    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            pool = await dbmod.create_pool(url, min_size=1, max_size=1)
            try:
                pending = await migrate.pending_versions(pool)
            finally:
                await pool.close()
    except Exception as exc:
        raise database_failure(exc, url) from exc
    state = f"{len(pending)} migrations to apply at start" if pending else "schema up to date"
    return f"PostgreSQL {redact(url)} accepts the login ({state})"


async def _connect_redis(url: str, timeout: float) -> str:
    from telesrv.store.redis_client import open_redis

    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            client = await open_redis(url, timeout=timeout)
            await client.aclose()
    except Exception as exc:
        raise redis_failure(exc, url) from exc
    return f"Redis {redact(url)} answers"


def _check(**options: Any) -> None:
    ctx = click.get_current_context()
    connect = bool(options.pop("connect"))
    ctx.meta[CHECK_ONLY] = True
    try:
        assert serve.callback is not None
        ctx.invoke(serve.callback, **options)
    except click.UsageError as exc:
        click.echo(f"FAIL: settings: {exc.format_message()}")
        ctx.exit(1)
    settings = ctx.meta[CHECKED_SETTINGS]
    assert isinstance(settings, Settings)
    failed = _run_checks(settings, connect)
    ctx.exit(1 if failed else 0)


check_command = click.Command(
    "check",
    # serve's own options, whatever they are: what is checked is what serve would run.
    params=[
        *serve.params,
        click.Option(
            ["--connect/--no-connect"],
            default=True,
            show_default=True,
            help="Log in to an external PostgreSQL and Redis (--database-url, --redis-url).",
        ),
    ],
    callback=_check,
    help="Validate a configuration (the options of `serve`) without starting the server: "
    "one line per check; exit status 0 when all pass.",
)
