"""Option types and option sets shared by several commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from telesrv.config import DEFAULT_DATA_DIR, parse_host_port

F = TypeVar("F", bound=Callable[..., Any])


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
