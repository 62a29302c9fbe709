"""Option types and option sets shared by several commands."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from telesrv.config import (
    DEFAULT_BLOB_GC_GRACE,
    DEFAULT_DATA_DIR,
    MIN_BLOB_GC_GRACE,
    Settings,
    parse_host_port,
)

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


class HostPortOrOff(click.ParamType[tuple[str, int] | None]):
    """`HOST:PORT`, or `off` for a listener that is not started."""

    name = "HOST:PORT|off"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, int] | None:
        if value is None or isinstance(value, tuple):
            return value
        if str(value).strip().lower() == "off":
            return None
        try:
            return parse_host_port(str(value))
        except ValueError as exc:
            self.fail(f"{exc} (or 'off')", param, ctx)


HOST_PORT_OR_OFF = HostPortOrOff()


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
            help="Redis URL (redis://... or unix://...; a Redis Cluster as "
            "redis+cluster://HOST:PORT, any of its nodes). Default: embedded Redis "
            "under the data directory.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def blob_gc_grace_option(fn: F) -> F:
    """How old an unused blob must be before it is removed; shared by `serve` and
    `blobs gc`."""
    return click.option(
        "--blob-gc-grace-minutes",
        envvar="TELESRV_BLOB_GC_GRACE_MINUTES",
        show_envvar=True,
        type=click.IntRange(min=int(MIN_BLOB_GC_GRACE // 60)),
        default=int(DEFAULT_BLOB_GC_GRACE // 60),
        show_default=True,
        metavar="N",
        help="Blobs no photo or document uses are removed once last written N minutes "
        "ago (younger ones may belong to a row not committed yet).",
    )(fn)


CONFIG_ENV = "TELESRV_CONFIG"


def config_file_option(fn: F) -> F:
    """``--config FILE``: a TOML file whose keys are the command's own flags (without
    the dashes; ``ws-listen`` or ``ws_listen``). It is read first (eager) and becomes
    the command's default map, so click's own order gives the precedence: a flag on
    the command line, then its environment variable, then the file, then the built-in
    default. Every option of the command is covered without a list to keep up."""
    return click.option(
        "--config",
        envvar=CONFIG_ENV,
        show_envvar=True,
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        is_eager=True,
        expose_value=False,
        callback=_read_config_file,
        metavar="FILE",
        help="TOML file of settings: keys are this command's flags without the dashes "
        '(listen = "0.0.0.0:8443"). Flags and environment variables win over it.',
    )(fn)


def _read_config_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        ctx.default_map = {**(ctx.default_map or {}), **config_defaults(ctx.command, value, ctx)}


def config_defaults(command: click.Command, path: Path, ctx: click.Context) -> dict[str, Any]:
    """The file's settings as click parameter names -> values; raises StartupError (one
    line) on a file that cannot be read, a key no option has, or a value its option
    refuses."""
    import tomllib

    from telesrv.startup import StartupError

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise StartupError(f"--config {path}: cannot read it: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise StartupError(f"--config {path}: not valid TOML: {exc}") from exc
    options = {
        p.name: p
        for p in command.params
        if isinstance(p, click.Option) and p.name and p.expose_value
    }
    defaults: dict[str, Any] = {}
    for key, raw in data.items():
        option = options.get(key.replace("-", "_"))
        if option is None:
            raise StartupError(
                f"--config {path}: unknown setting {key!r} (keys are the flags of "
                f"`{command.name} --help` without the dashes)"
            )
        if isinstance(raw, dict | list):
            raise StartupError(f"--config {path}: {key}: expected a single value")
        try:
            option.type_cast_value(ctx, raw)
        except click.BadParameter as exc:
            raise StartupError(f"--config {path}: {key} = {raw!r}: {exc.message}") from exc
        defaults[option.name or key] = raw
    return defaults


# Settings fields set through an option of another name: an address in two fields, or
# a value given in another unit.
_OPTION_OF_FIELD = {
    "listen_host": "--listen",
    "listen_port": "--listen",
    "ws_listen_host": "--ws-listen",
    "ws_listen_port": "--ws-listen",
    "metrics_host": "--metrics-listen",
    "metrics_port": "--metrics-listen",
    "advertise_host": "--advertise",
    "advertise_port": "--advertise",
    "min_free_disk_bytes": "--min-free-disk-mb",
    "blob_gc_grace": "--blob-gc-grace-minutes",
}
_SETTINGS_FIELDS = frozenset(f.name for f in dataclasses.fields(Settings))
_WORD = re.compile(r"\b[a-z][a-z0-9_]*\b")
_FIELDISH = re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]*\b")


def settings_refusal(exc: ValueError, params: Sequence[click.Parameter]) -> click.UsageError:
    """Settings' refusal of what a command was given, each field in it named by the
    option that sets it (``params``, the command's): the operator typed those."""
    options = {
        p.name: max(p.opts, key=len)
        for p in params
        if isinstance(p, click.Option) and p.name in _SETTINGS_FIELDS
    }
    options.update(_OPTION_OF_FIELD)

    def named(word: re.Match[str]) -> str:
        return options.get(word[0], word[0]) if word[0] in _SETTINGS_FIELDS else word[0]

    def problem(text: str) -> str:
        # A field whose name is a plain word (join, workers) is the option only where a
        # problem begins with it; within a problem only names with an underscore are
        # taken for fields, so that words of a value echoed back stay as they were.
        first, space, rest = text.partition(" ")
        return _WORD.sub(named, first) + space + _FIELDISH.sub(named, rest)

    text = str(exc)
    prefix, sep, problems = text.partition(": ")
    if not sep:
        prefix, problems = "", text
    return click.UsageError(prefix + sep + "; ".join(map(problem, problems.split("; "))))
