"""The operator's HTTP endpoint: Prometheus ``/metrics``, ``/healthz`` and ``/readyz``.

A deliberately small HTTP/1.0 server on its own listening socket: one request per
connection, GET or HEAD only, nothing on the MTProto path. ``/healthz`` answers 200
while the process can serve, and 503 with the reasons while the injected health says
it cannot (an embedded database it runs is down); ``/readyz`` asks the injected
readiness check (the process knows what its dependencies are) and answers 503 with
the problems when any. Before ``/metrics`` renders, the injected refresh samples what
is only known by asking the database (the outbox backlog), so nothing polls while
nobody scrapes.

The gateway's own gauges and counters live here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

log = logging.getLogger(__name__)

# Summed over the processes of `serve --workers N` (see workers.py).
CONNECTIONS = Gauge(
    "telesrv_connections", "Open client (MTProto) connections.", multiprocess_mode="livesum"
)
SESSIONS = Gauge(
    "telesrv_sessions", "MTProto sessions held in memory.", multiprocess_mode="livesum"
)
HANDSHAKES = Counter(
    "telesrv_handshakes_total",
    "Auth key exchanges that ended: 'created' (a new key), 'failed' (aborted).",
    ["outcome"],
)

# check name -> the problem, or None when it passed
Readiness = Callable[[], Awaitable[dict[str, str | None]]]
Refresh = Callable[[], Awaitable[None]]
# what cannot serve now -> why (empty: healthy); cheap, asks nothing
Health = Callable[[], dict[str, str]]

# A request line and headers larger than this, or slower than READ_TIMEOUT, is dropped.
MAX_REQUEST_BYTES = 8192
READ_TIMEOUT = 5.0
# Neither a probe nor a scrape waits longer for a dependency than this.
CHECK_TIMEOUT = 2.0


async def _nothing() -> None:
    return None


def _healthy() -> dict[str, str]:
    return {}


class MetricsServer:
    def __init__(
        self,
        ready: Readiness,
        *,
        refresh: Refresh = _nothing,
        health: Health = _healthy,
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        self._ready = ready
        self._refresh = refresh
        self._health = health
        self._registry = registry
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        sock = self._server.sockets[0].getsockname()
        return sock[0], sock[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
            except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                return
            if len(head) > MAX_REQUEST_BYTES:
                return
            status, content_type, body, head_only = await self._answer(head)
            writer.write(
                f"HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            )
            if not head_only:
                writer.write(body)
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, head: bytes) -> tuple[str, str, bytes, bool]:
        text = "text/plain; charset=utf-8"
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3:
            return "400 Bad Request", text, b"bad request\n", False
        method, target, _ = parts
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", text, b"GET or HEAD only\n", False
        head_only = method == "HEAD"
        path = target.split("?", 1)[0]
        if path == "/healthz":
            down = self._health()
            if down:
                body = "".join(f"{name}: {problem}\n" for name, problem in down.items())
                return "503 Service Unavailable", text, body.encode(), head_only
            return "200 OK", text, b"ok\n", head_only
        if path == "/readyz":
            problems = await self._problems()
            if problems:
                body = "".join(f"{name}: {problem}\n" for name, problem in problems.items())
                return "503 Service Unavailable", text, body.encode(), head_only
            return "200 OK", text, b"ready\n", head_only
        if path == "/metrics":
            try:
                await asyncio.wait_for(self._refresh(), CHECK_TIMEOUT)
            except Exception as e:  # the scrape still shows everything else
                log.warning("metrics refresh failed: %s", e or type(e).__name__)
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self._registry), head_only
        return "404 Not Found", text, b"not found\n", head_only

    async def _problems(self) -> dict[str, str]:
        try:
            checks = await asyncio.wait_for(self._ready(), CHECK_TIMEOUT * 2)
        except Exception as e:
            return {"readiness": str(e) or type(e).__name__}
        return {name: problem for name, problem in checks.items() if problem}
