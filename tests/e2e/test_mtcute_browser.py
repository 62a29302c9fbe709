"""mtcute's browser package (npm ``@mtcute/web`` 0.27.8, layer 221) in headless Chromium,
connected to the gateway's WebSocket listener with no relay, chatting with a Telethon
user: it signs in, sends, and receives live.

``.ci/client-browser`` installs Debian's ``chromium`` and, under
``$TELESRV_CLIENT_NODE/browser`` (default ``.client-node/browser``), @mtcute/web,
esbuild and playwright-core. The driver (``clients/mtcute_browser_driver.mjs``) bundles
the page (``clients/mtcute_browser_page.mjs``) and runs it in that Chromium. Without
Chromium, ``node`` or the packages, the test skips.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
from pathlib import Path

import pytest

from telesrv.gateway.websocket import WebSocketConnection

from .conftest import ClientFactory, RunningServer
from .drivers import (
    CODE,
    MTCUTE_DROPPED_ZERO,
    assert_served,
    chat_peer,
    exchange_texts,
    server_key_args,
    server_log,
    start_driver,
    unexplained_complaints,
)

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = Path(os.environ.get("TELESRV_CLIENT_NODE", ROOT / ".client-node"))
MODULES = NODE_DIR / "browser" / "node_modules"
DRIVER = Path(__file__).parent / "clients" / "mtcute_browser_driver.mjs"
_phones = itertools.count(15556000)
NODE = shutil.which("node")
CHROMIUM = os.environ.get("TELESRV_CHROMIUM") or shutil.which("chromium")


def _missing() -> str | None:
    if NODE is None:
        return "no `node` on PATH: the browser client's driver cannot run"
    if CHROMIUM is None:
        return "no `chromium` on PATH (install it with .ci/client-browser, or set TELESRV_CHROMIUM)"
    for package in ("@mtcute/web", "esbuild", "playwright-core"):
        if not (MODULES / package / "package.json").is_file():
            return f"no {package} at {MODULES} (install it with .ci/client-browser)"
    return None


MISSING = _missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


def _browser_connections(server: RunningServer) -> list[WebSocketConnection]:
    """The gateway's WebSocket connections that finished the upgrade and have a key."""
    return [
        conn
        for conn in server.gateway.connections
        if isinstance(conn, WebSocketConnection) and conn.upgraded and conn.auth_key is not None
    ]


async def test_mtcute_in_chromium_chats_over_websocket(
    server: RunningServer,
    make_client: ClientFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert NODE is not None and CHROMIUM is not None and server.ws_port is not None
    caplog.set_level(logging.INFO, logger="telesrv")
    peer = await chat_peer(make_client, f"+{next(_phones)}", "b")
    assert not _browser_connections(server)  # Telethon came over TCP

    url = f"ws://{server.host}:{server.ws_port}/apiws"
    args = {
        "modules": str(MODULES),
        "chromium": CHROMIUM,
        "url": url,
        **server_key_args(server),
        "phone": f"+{next(_phones)}",
        "code": CODE,
        "peer": peer.username,
        "name": "chromium",
        "logLevel": 2,  # warnings and errors
    }
    driver = await start_driver([NODE, str(DRIVER)], args, stdin=asyncio.subprocess.DEVNULL)
    proc = driver.proc
    try:
        ready = await driver.step("ready", timeout=120)  # Chromium's first start included
        assert "Chrome" in ready["agent"], ready
        # The signed-in browser is connected to the WebSocket listener, not TCP.
        assert _browser_connections(server)
        await exchange_texts(driver, peer, "chromium", ready)

        closed = await driver.step("closed")
        assert await asyncio.wait_for(proc.wait(), 60) == 0
    finally:
        await driver.close()
    # Every socket the page opened went to the listener, and carried MTProto both ways.
    sockets = closed["sockets"]
    assert sockets and all(s["url"] == url for s in sockets), sockets
    assert all(s["sent"] and s["received"] for s in sockets), sockets

    messages = server_log(caplog)
    assert_served(messages, "layer 221", "Chrome")
    # mtcute logs warnings and errors (a bad_msg_notification, an object it cannot
    # parse, a session reset) to the page's console, which the driver copies to stderr;
    # so does the page for an uncaught error. The run must have none, but for a key
    # exchange it failed on a key that began with a zero byte, and ran again.
    stderr = await driver.stderr()
    complaints = [
        line
        for line in stderr.splitlines()
        if "[WRN]" in line or "[ERR]" in line or "[page error]" in line
    ]
    complaints = unexplained_complaints(complaints, stderr, messages, MTCUTE_DROPPED_ZERO)
    assert not complaints, complaints
