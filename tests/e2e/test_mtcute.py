"""mtcute (npm ``@mtcute/node`` 0.30.3: TypeScript, layer 227, temporary auth keys by
default) against a real gateway, chatting with a Telethon user.

mtcute lives under ``$TELESRV_CLIENT_NODE`` (default ``.client-node`` at the repository
root); ``.ci/client-node`` installs it. Without it, or without ``node``, the test skips.
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

from telesrv.mtproto.rsa import rsa_fingerprint

from .conftest import ClientFactory, RunningServer
from .test_old_layer_clients import Driver

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = Path(os.environ.get("TELESRV_CLIENT_NODE", ROOT / ".client-node"))
MODULES = NODE_DIR / "node_modules"
DRIVER = Path(__file__).parent / "clients" / "mtcute_driver.mjs"
CODE = "12345"
_phones = itertools.count(15554000)
NODE = shutil.which("node")


def _missing() -> str | None:
    if NODE is None:
        return "no `node` on PATH: the mtcute client cannot run"
    for package in ("node", "core"):
        if not (MODULES / "@mtcute" / package / "package.json").is_file():
            return f"no @mtcute/{package} at {MODULES} (install it with .ci/client-node)"
    return None


MISSING = _missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


async def test_mtcute_chats_with_telethon(
    server: RunningServer,
    make_client: ClientFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert NODE is not None
    caplog.set_level(logging.INFO, logger="telesrv")
    tele = make_client(receive_updates=True)
    await tele.start(phone=f"+{next(_phones)}", code_callback=lambda: CODE)
    tele_me = await tele.get_me()
    await tele(functions.account.UpdateUsernameRequest(f"m{tele_me.id}"))
    got: asyncio.Queue[Any] = asyncio.Queue()
    tele.add_event_handler(got.put, events.NewMessage(incoming=True))
    edits: asyncio.Queue[Any] = asyncio.Queue()
    tele.add_event_handler(edits.put, events.MessageEdited(incoming=True))

    key = server.resources.server_key
    args = {
        "modules": str(MODULES),
        "host": server.host,
        "port": server.port,
        "n": str(key.n),
        "e": str(key.e),
        "fingerprint": str(rsa_fingerprint(key.n, key.e)),
        "phone": f"+{next(_phones)}",
        "code": CODE,
        "peer": f"m{tele_me.id}",
        "name": "mtcute",
        "logLevel": 2,  # warnings and errors
    }
    proc = await asyncio.create_subprocess_exec(
        NODE,
        str(DRIVER),
        json.dumps(args),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    driver = Driver(proc)
    try:
        ready = await driver.step("ready")
        sent = await driver.step("sent")
        assert sent["text"] == "hello from mtcute" and sent["outgoing"]
        assert sent["chat"] == tele_me.id
        event = await asyncio.wait_for(got.get(), 30)
        assert event.message.text == "hello from mtcute"
        assert event.message.sender_id == ready["me"]

        await tele.get_dialogs()  # the sender's access hash, for the reply
        await tele.send_message(ready["me"], "hello from telethon")
        received = await driver.step("received")
        assert received["text"] == "hello from telethon"
        assert received["sender"] == tele_me.id == received["chat"]

        listed = await driver.step("listed")
        assert listed["history"] == ["hello from telethon", "hello from mtcute"]
        assert [chat for chat, _top in listed["dialogs"]] == [tele_me.id]

        edited = await driver.step("edited")
        assert edited["text"] == "edited by mtcute"
        edit = await asyncio.wait_for(edits.get(), 30)
        assert edit.message.text == "edited by mtcute"
        assert proc.stdin is not None
        proc.stdin.write(b"delete\n")  # only now: an edit and a delete close together race
        await proc.stdin.drain()

        deleted = await driver.step("deleted")
        assert deleted["history"] == ["hello from telethon"]
        assert await asyncio.wait_for(proc.wait(), 60) == 0
    finally:
        await driver.close()
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("telesrv")]
    declared = [m for m in messages if "declared layer" in m]
    assert any("layer 227" in m for m in declared), declared
    invalid = [m for m in messages if "INPUT_CONSTRUCTOR_INVALID" in m]
    assert not invalid, invalid
    dropped = [m for m in messages if "dropping held" in m]
    assert not dropped, dropped
    # mtcute logs warnings and errors (a bad_msg_notification, an object it cannot
    # parse, a session reset) on stderr; the run must have none.
    complaints = [
        line for line in (await driver.stderr()).splitlines() if "[WRN]" in line or "[ERR]" in line
    ]
    assert not complaints, complaints
