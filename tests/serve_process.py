"""`telesrv serve` as a subprocess, for the tests that drive the real command line.

One place builds the command, starts it with none of the caller's TELESRV_* variables
(the server takes its settings from the arguments the test gives), waits for the line
that says it listens and stops it. Waits are on that line or on the process ending,
each with a generous guard only against a hang."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

READY = "telesrv listening on "
WS_READY = "telesrv websocket listening on "
METRICS_LINE = "telesrv metrics on http://"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0


def free_port() -> int:
    """A port nobody listens on now, for a test that checks the address it asked for."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dev_flags(code: str) -> tuple[str, ...]:
    """Sign-in with a fixed code, an account made at first sign-in, sends not rate limited."""
    return ("--dev-login-code", code, "--auto-register", "--send-rate-limit", "0")


def serve_args(
    data_dir: Path,
    *flags: str,
    database_url: str | None = None,
    redis_url: str | None = None,
    listen: str = "127.0.0.1:0",
    ws_listen: str = "off",
    before: Sequence[str] = (),
) -> list[str]:
    """The command line; ``before`` goes ahead of `serve` (--log-level, --log-format), and
    a database left out is the embedded one in ``data_dir``."""
    args = [sys.executable, "-m", "telesrv", *before, "serve"]
    args += ["--listen", listen, "--ws-listen", ws_listen, "--data-dir", str(data_dir)]
    if database_url is not None:
        args += ["--database-url", database_url]
    if redis_url is not None:
        args += ["--redis-url", redis_url]
    return [*args, *flags]


def port_in(line: str, prefix: str = READY) -> int:
    """The port at the end of an announced address."""
    return int(line.removeprefix(prefix).rpartition(":")[2])


def ws_port_in(lines: list[str]) -> int:
    """The WebSocket port announced before the ready line."""
    [announced] = [line for line in lines if line.startswith(WS_READY)]
    host, _, port = announced.removeprefix(WS_READY).rpartition(":")
    assert host == "127.0.0.1"
    return int(port)


async def lines_until_ready(process: asyncio.subprocess.Process, log_path: Path) -> list[str]:
    """Every line printed up to the ready line (the last); fails if the process exits
    or stays silent too long."""
    assert process.stdout is not None
    seen: list[str] = []
    async with asyncio.timeout(START_TIMEOUT):
        while True:
            raw = await process.stdout.readline()
            if not raw:
                log = log_path.read_text(errors="replace")[-4000:]
                raise AssertionError(f"telesrv exited before it was ready: {seen}\n{log}")
            line = raw.decode().rstrip("\n")
            seen.append(line)
            if line.startswith(READY):
                return seen


async def wait_ready(process: asyncio.subprocess.Process, log_path: Path) -> str:
    """The ready line; fails if the process exits or stays silent too long."""
    return (await lines_until_ready(process, log_path))[-1]


@dataclass
class Serve:
    """One started `telesrv serve`: its process, its stderr log and what it printed."""

    process: asyncio.subprocess.Process
    log_path: Path
    lines: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return port_in(self.lines[-1])

    @property
    def ws_port(self) -> int:
        return ws_port_in(self.lines)

    @property
    def metrics_port(self) -> int:
        [line] = [x for x in self.lines if x.startswith(METRICS_LINE)]
        return port_in(line.removesuffix("/metrics"), METRICS_LINE)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def ready(self) -> list[str]:
        self.lines = await lines_until_ready(self.process, self.log_path)
        return self.lines

    async def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, and it must exit cleanly (status 0) within ``timeout``."""
        self.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(timeout):
            code = await self.process.wait()
        assert code == 0, self.log()[-4000:]

    async def kill(self) -> None:
        """SIGKILL if it still runs (the way out of a test, whatever happened)."""
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


async def spawn(args: list[str], log_path: Path, env: Mapping[str, str] | None = None) -> Serve:
    """Started, not yet ready; stderr is appended to ``log_path`` (a restart on the same
    log keeps what the earlier process wrote)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TELESRV_")}
    environment.update(env or {})
    with open(log_path, "ab") as log:
        process = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=log, env=environment
        )
    return Serve(process, log_path)


async def start(args: list[str], log_path: Path, env: Mapping[str, str] | None = None) -> Serve:
    """Started and ready; killed again if it never got ready."""
    serve = await spawn(args, log_path, env)
    try:
        await serve.ready()
    except BaseException:
        await serve.kill()
        raise
    return serve


@asynccontextmanager
async def serving(
    args: list[str], log_path: Path, env: Mapping[str, str] | None = None
) -> AsyncIterator[Serve]:
    """Started and ready; killed on the way out if it still runs."""
    serve = await start(args, log_path, env)
    try:
        yield serve
    finally:
        await serve.kill()
