"""`telesrv serve --workers N`: N server processes on one port.

The first process starts the embedded PostgreSQL and Redis (when no URLs are given),
migrates, binds the port with SO_REUSEPORT and then starts N-1 more processes
(``telesrv worker``) on the same port, database, Redis and data directory; the kernel
spreads new connections among the listeners. Each worker is a fresh interpreter
(not a fork): the event loop, the pools and the key exchange thread are its own.
The workers find each other through Redis like processes on separate machines do.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from telesrv import logs
from telesrv.config import Settings

log = logging.getLogger(__name__)

# The settings of a worker, as JSON, in its environment.
SETTINGS_ENV = "TELESRV_WORKER_SETTINGS"
READY = "telesrv listening on "
START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0


def settings_to_json(settings: Settings) -> str:
    values: dict[str, Any] = {}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        values[field.name] = str(value) if isinstance(value, Path) else value
    return json.dumps(values)


def settings_from_json(text: str) -> Settings:
    values = json.loads(text)
    if not isinstance(values, dict):
        raise ValueError("worker settings must be a JSON object")
    known = {f.name for f in dataclasses.fields(Settings)}
    values = {k: v for k, v in values.items() if k in known}
    if "data_dir" in values:
        values["data_dir"] = Path(values["data_dir"])
    return Settings(**values)


def worker_settings(
    settings: Settings,
    host: str,
    port: int,
    database_url: str,
    redis_url: str,
    partition_count: int,
    *,
    ws: tuple[str, int] | None = None,
) -> Settings:
    """What each further worker runs with: the bound ports and the running databases.
    The first process alone serves the metrics endpoint (one port, one scrape target;
    its database-wide figures cover every worker). ``ws`` is the WebSocket address the
    first process bound (None: no WebSocket listener)."""
    return settings.replace(
        listen_host=host,
        listen_port=port,
        ws_listen_host=ws[0] if ws is not None else None,
        ws_listen_port=ws[1] if ws is not None else None,
        database_url=database_url,
        redis_url=redis_url,
        partition_count=partition_count,
        workers=1,
        reuse_port=True,
        metrics_host=None,
        metrics_port=None,
    )


class WorkerGroup:
    """The further worker processes of one `telesrv serve --workers N`."""

    def __init__(self) -> None:
        self.processes: list[asyncio.subprocess.Process] = []

    async def start(self, settings: Settings, count: int) -> None:
        env = {k: v for k, v in os.environ.items() if k != SETTINGS_ENV}
        env[SETTINGS_ENV] = settings_to_json(settings)
        env.update(logs.child_environment())
        try:
            for _ in range(count):
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "telesrv",
                    "worker",
                    stdout=asyncio.subprocess.PIPE,
                    env=env,
                )
                self.processes.append(process)
            async with asyncio.timeout(START_TIMEOUT):
                await asyncio.gather(*(self._ready(p) for p in self.processes))
        except BaseException:
            await self.stop()
            raise

    @staticmethod
    async def _ready(process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while True:
            line = await process.stdout.readline()
            if not line:
                raise RuntimeError(f"worker {process.pid} exited before it was ready")
            if line.decode(errors="replace").startswith(READY):
                return

    async def stop(self) -> None:
        for process in self.processes:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                async with asyncio.timeout(STOP_TIMEOUT):
                    await process.wait()
            except TimeoutError:
                log.warning("worker %d did not stop; killing it", process.pid)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        self.processes = []
