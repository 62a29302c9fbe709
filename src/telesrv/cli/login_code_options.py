"""The options of how login codes reach people, their limits and the dev code."""

from __future__ import annotations

import click

from telesrv.cli.options import F
from telesrv.config import (
    DEFAULT_LOGIN_CODE_HOOK_CONCURRENCY,
    DEFAULT_LOGIN_CODE_HOOK_RETRIES,
    DEFAULT_LOGIN_CODE_HOOK_TIMEOUT,
    DEFAULT_LOGIN_CODE_WINDOW,
    DEFAULT_LOGIN_CODES_PER_IP,
    DEFAULT_LOGIN_CODES_PER_PHONE,
    LOGIN_CODE_ENV,
    LOGIN_PHONE_ENV,
    MAX_LOGIN_CODE_HOOK_CONCURRENCY,
    MAX_LOGIN_CODE_HOOK_RETRIES,
)


def login_code_options(fn: F) -> F:
    """`serve`'s login code options, in the order `--help` lists them."""
    options = [
        click.option(
            "--dev-login-code",
            envvar="TELESRV_DEV_LOGIN_CODE",
            show_envvar=True,
            default=None,
            metavar="CODE",
            help="Every login code equals CODE. For development and tests only.",
        ),
        click.option(
            "--login-codes-per-phone",
            envvar="TELESRV_LOGIN_CODES_PER_PHONE",
            show_envvar=True,
            type=click.IntRange(min=0),
            default=None,
            metavar="N",
            help=f"Login codes one phone may be sent per --login-code-window; 0 turns the limit "
            f"off. [default: {DEFAULT_LOGIN_CODES_PER_PHONE}; off with --dev-login-code]",
        ),
        click.option(
            "--login-codes-per-ip",
            envvar="TELESRV_LOGIN_CODES_PER_IP",
            show_envvar=True,
            type=click.IntRange(min=0),
            default=None,
            metavar="N",
            help=f"Login codes one client address may ask for per --login-code-window, whatever "
            f"the phones; 0 turns the limit off. [default: {DEFAULT_LOGIN_CODES_PER_IP}; off "
            "with --dev-login-code]",
        ),
        click.option(
            "--login-code-window",
            envvar="TELESRV_LOGIN_CODE_WINDOW",
            show_envvar=True,
            type=click.FloatRange(min=0, min_open=True),
            default=DEFAULT_LOGIN_CODE_WINDOW,
            show_default=True,
            metavar="SECONDS",
            help="The window over which --login-codes-per-phone counts.",
        ),
        click.option(
            "--login-code-command",
            envvar="TELESRV_LOGIN_CODE_COMMAND",
            show_envvar=True,
            default=None,
            metavar="CMD",
            help="Run CMD (split like a shell would, run without one) to deliver each login "
            f"code; it gets the phone and the code in ${LOGIN_PHONE_ENV} and ${LOGIN_CODE_ENV}; "
            "exit status 0 means delivered.",
        ),
        click.option(
            "--login-code-webhook",
            envvar="TELESRV_LOGIN_CODE_WEBHOOK",
            show_envvar=True,
            default=None,
            metavar="URL",
            help='POST {"phone": ..., "code": ...} as JSON to URL (http or https) to deliver each '
            "login code; a 2xx answer means delivered.",
        ),
        click.option(
            "--login-code-hook-timeout",
            envvar="TELESRV_LOGIN_CODE_HOOK_TIMEOUT",
            show_envvar=True,
            type=click.FloatRange(min=0, min_open=True),
            default=DEFAULT_LOGIN_CODE_HOOK_TIMEOUT,
            show_default=True,
            metavar="SECONDS",
            help="Seconds one run of a delivery hook may take (a command is then killed).",
        ),
        click.option(
            "--login-code-hook-retries",
            envvar="TELESRV_LOGIN_CODE_HOOK_RETRIES",
            show_envvar=True,
            type=click.IntRange(min=0, max=MAX_LOGIN_CODE_HOOK_RETRIES),
            default=DEFAULT_LOGIN_CODE_HOOK_RETRIES,
            show_default=True,
            metavar="N",
            help="Runs of a delivery hook after one that failed (pausing 1, 2, 4... seconds).",
        ),
        click.option(
            "--login-code-hook-concurrency",
            envvar="TELESRV_LOGIN_CODE_HOOK_CONCURRENCY",
            show_envvar=True,
            type=click.IntRange(min=1, max=MAX_LOGIN_CODE_HOOK_CONCURRENCY),
            default=DEFAULT_LOGIN_CODE_HOOK_CONCURRENCY,
            show_default=True,
            metavar="N",
            help="Delivery hook runs at a time per process; further deliveries wait.",
        ),
        click.option(
            "--log-login-codes/--no-log-login-codes",
            envvar="TELESRV_LOG_LOGIN_CODES",
            show_envvar=True,
            default=False,
            show_default=True,
            help="Write each login code to the log at DEBUG (needs --log-level debug). Codes "
            "are secrets: for development only.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn
