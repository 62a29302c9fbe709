"""The `telesrv` group itself: its global options and how it sets up logging."""

from __future__ import annotations

import logging
from typing import Any

import click
from click.exceptions import NoArgsIsHelpError

from telesrv import __version__
from telesrv.logs import JsonFormatter, configure, refusal
from telesrv.startup import StartupError

__all__ = ["JsonFormatter", "main"]

# The traceback of a refused start, at DEBUG (the refusal itself is one line).
log = logging.getLogger("telesrv")


class Group(click.Group):
    """The root group: a start-up refusal (`StartupError`) of any command is one line
    on stderr (an ERROR line in the log's format) and exit status 1; its traceback is
    logged at DEBUG. A refused option is one line too (exit status 2),
    naming the help to read instead of printing the usage."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except StartupError as exc:
            log.debug("start-up failed", exc_info=exc)
            refusal(str(exc))
            ctx.exit(1)
        except click.UsageError as exc:
            # A group called bare shows its help; a command name unknown to this group
            # is refused before logging is set up: click says both as usual.
            if isinstance(exc, NoArgsIsHelpError) or exc.ctx is None or exc.ctx is ctx:
                raise
            refusal(f"{exc.format_message()} (see '{exc.ctx.command_path} --help')")
            ctx.exit(exc.exit_code)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
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
    help="json: one JSON object per line (time, level, pid, logger, message, exception).",
)
def main(log_level: str, log_format: str) -> None:
    """telesrv: a Telegram-compatible server (MTProto 2.0, API layer 229)."""
    configure(log_level, log_format)
