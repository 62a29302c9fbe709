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
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from telethon import events, functions

from telesrv.gateway.websocket import WebSocketConnection
from telesrv.mtproto.rsa import rsa_fingerprint

from .conftest import ClientFactory, RunningServer
from .test_old_layer_clients import Driver

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = Path(os.environ.get("TELESRV_CLIENT_NODE", ROOT / ".client-node"))
MODULES = NODE_DIR / "browser" / "node_modules"
DRIVER = Path(__file__).parent / "clients" / "mtcute_browser_driver.mjs"
CODE = "12345"
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
    tele = make_client(receive_updates=True)
    await tele.start(phone=f"+{next(_phones)}", code_callback=lambda: CODE)
    tele_me = await tele.get_me()
    await tele(functions.account.UpdateUsernameRequest(f"b{tele_me.id}"))
    got: asyncio.Queue[Any] = asyncio.Queue()
    tele.add_event_handler(got.put, events.NewMessage(incoming=True))
    assert not _browser_connections(server)  # Telethon came over TCP

    key = server.resources.server_key
    url = f"ws://{server.host}:{server.ws_port}/apiws"
    args = {
        "modules": str(MODULES),
        "chromium": CHROMIUM,
        "url": url,
        "n": str(key.n),
        "e": str(key.e),
        "fingerprint": str(rsa_fingerprint(key.n, key.e)),
        "phone": f"+{next(_phones)}",
        "code": CODE,
        "peer": f"b{tele_me.id}",
        "name": "chromium",
        "logLevel": 2,  # warnings and errors
    }
    proc = await asyncio.create_subprocess_exec(
        NODE,
        str(DRIVER),
        json.dumps(args),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    driver = Driver(proc)
    try:
        ready = await driver.step("ready", timeout=120)  # Chromium's first start included
        assert "Chrome" in ready["agent"], ready
        # The signed-in browser is connected to the WebSocket listener, not TCP.
        assert _browser_connections(server)

        sent = await driver.step("sent")
        assert sent["text"] == "hello from chromium" and sent["outgoing"]
        assert sent["chat"] == tele_me.id
        event = await asyncio.wait_for(got.get(), 30)
        assert event.message.text == "hello from chromium"
        assert event.message.sender_id == ready["me"]

        await tele.get_dialogs()  # the sender's access hash, for the reply
        await tele.send_message(ready["me"], "hello from telethon")
        received = await driver.step("received")
        assert received["text"] == "hello from telethon"
        assert received["sender"] == tele_me.id == received["chat"]

        closed = await driver.step("closed")
        assert await asyncio.wait_for(proc.wait(), 60) == 0
    finally:
        await driver.close()
    # Every socket the page opened went to the listener, and carried MTProto both ways.
    sockets = closed["sockets"]
    assert sockets and all(s["url"] == url for s in sockets), sockets
    assert all(s["sent"] and s["received"] for s in sockets), sockets

    messages = [r.getMessage() for r in caplog.records if r.name.startswith("telesrv")]
    declared = [m for m in messages if "declared layer" in m]
    assert any("layer 221" in m and "Chrome" in m for m in declared), declared
    invalid = [m for m in messages if "INPUT_CONSTRUCTOR_INVALID" in m]
    assert not invalid, invalid
    # mtcute logs warnings and errors (a bad_msg_notification, an object it cannot
    # parse, a session reset) to the page's console, which the driver copies to stderr;
    # so does the page for an uncaught error. The run must have none.
    complaints = [
        line
        for line in (await driver.stderr()).splitlines()
        if "[WRN]" in line or "[ERR]" in line or "[page error]" in line
    ]
    assert not complaints, complaints
