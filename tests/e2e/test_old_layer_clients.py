"""Clients at older layers against a real gateway: Pyrogram 2.0.106 (layer 158),
hydrogram (181), telethon-v1-24 (214), pyrofork (220) and pyrotgfork (227), each in
its own venv (they cannot share ours: most are the ``pyrogram`` package, one an old
``telethon``), chatting with a Telethon 1.45 user.

The venvs live under ``$TELESRV_CLIENT_VENVS`` (default ``.client-venvs`` at the
repository root); ``.ci/client-venvs`` creates them. Without one, its test is skipped.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from telethon import events, functions

from telesrv.mtproto.rsa import rsa_fingerprint

from .conftest import ClientFactory, RunningServer

ROOT = Path(__file__).resolve().parents[2]
VENVS = Path(os.environ.get("TELESRV_CLIENT_VENVS", ROOT / ".client-venvs"))
DRIVERS = Path(__file__).parent / "clients"
CODE = "12345"
_phones = itertools.count(15553000)

# venv name -> (the layer its library declares, its module)
CLIENTS = {
    "pyrogram": (158, "pyrogram"),
    "hydrogram": (181, "hydrogram"),
    "telethon-v1-24": (214, "telethon"),
    "pyrofork": (220, "pyrogram"),
    "pyrotgfork": (227, "pyrogram"),
}


class Driver:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def step(self, name: str, timeout: float = 60) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            if not line:
                assert self.proc.stderr is not None
                err = (await self.proc.stderr.read()).decode(errors="replace")
                raise AssertionError(f"driver ended before {name!r}:\n{err[-4000:]}")
            if line.startswith(b"{"):
                break  # the libraries print banners of their own
        data: dict[str, Any] = json.loads(line)
        assert data["step"] == name, data
        return data


@pytest.mark.parametrize("venv", sorted(CLIENTS))
async def test_old_layer_client_chats_with_telethon(
    venv: str,
    server: RunningServer,
    make_client: ClientFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    python = VENVS / venv / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no {venv} venv at {VENVS / venv} (create it with .ci/client-venvs)")
    caplog.set_level(logging.INFO, logger="telesrv")
    tele = make_client(receive_updates=True)
    await tele.start(phone=f"+{next(_phones)}", code_callback=lambda: CODE)
    tele_me = await tele.get_me()
    await tele(functions.account.UpdateUsernameRequest(f"o{tele_me.id}"))
    got: asyncio.Queue[Any] = asyncio.Queue()
    tele.add_event_handler(got.put, events.NewMessage(incoming=True))
    edits: asyncio.Queue[Any] = asyncio.Queue()
    tele.add_event_handler(edits.put, events.MessageEdited(incoming=True))

    key = server.resources.server_key
    args = {
        "host": server.host,
        "port": server.port,
        "n": str(key.n),
        "e": str(key.e),
        "fingerprint": str(rsa_fingerprint(key.n, key.e)),
        "pem": key.public_pem,
        "phone": f"+{next(_phones)}",
        "code": CODE,
        "peer": f"o{tele_me.id}",
        "name": venv,
        "module": CLIENTS[venv][1],
    }
    proc = await asyncio.create_subprocess_exec(
        str(python),
        str(DRIVERS / ("telethon_driver.py" if venv.startswith("telethon") else "pyro_driver.py")),
        json.dumps(args),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
    )
    driver = Driver(proc)
    try:
        ready = await driver.step("ready")
        sent = await driver.step("sent")
        assert sent["text"] == f"hello from {venv}" and sent["outgoing"]
        assert sent["chat"] == tele_me.id
        event = await asyncio.wait_for(got.get(), 30)
        assert event.message.text == f"hello from {venv}"
        assert event.message.sender_id == ready["me"]

        await tele.get_dialogs()  # the sender's access hash, for the reply
        await tele.send_message(ready["me"], "hello from telethon")
        received = await driver.step("received")
        assert received["text"] == "hello from telethon"
        assert received["sender"] == tele_me.id == received["chat"]

        listed = await driver.step("listed")
        assert listed["history"] == ["hello from telethon", f"hello from {venv}"]
        assert [chat for chat, _top in listed["dialogs"]] == [tele_me.id]

        edited = await driver.step("edited")
        assert edited["text"] == f"edited by {venv}"
        edit = await asyncio.wait_for(edits.get(), 30)
        assert edit.message.text == f"edited by {venv}"
        assert proc.stdin is not None
        proc.stdin.write(b"delete\n")  # only now: an edit and a delete close together race
        await proc.stdin.drain()

        deleted = await driver.step("deleted")
        assert deleted["count"] == 1
        assert deleted["history"] == ["hello from telethon"]
        assert await asyncio.wait_for(proc.wait(), 60) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    declared = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("telesrv") and "declared layer" in r.getMessage()
    ]
    assert any(f"layer {CLIENTS[venv][0]}" in m for m in declared), declared
    invalid = [
        r.getMessage() for r in caplog.records if "INPUT_CONSTRUCTOR_INVALID" in r.getMessage()
    ]
    assert not invalid, invalid


MEDIA_DRIVER = Path(__file__).parent / "clients" / "pyro_media_driver.py"


async def test_a_layer_158_client_receives_and_downloads_a_photo_and_a_document(
    server: RunningServer, make_client: ClientFactory
) -> None:
    """Pyrogram 2.0.106 (layer 158) is sent a photo and a document: both arrive as
    media it knows (not as unsupported), download intact, and list in history."""
    import hashlib
    import io

    from .test_media_files import _jpeg

    venv = "pyrogram"
    python = VENVS / venv / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no {venv} venv at {VENVS / venv} (create it with .ci/client-venvs)")
    tele = make_client(receive_updates=True)
    await tele.start(phone=f"+{next(_phones)}", code_callback=lambda: CODE)
    tele_me = await tele.get_me()
    await tele(functions.account.UpdateUsernameRequest(f"o{tele_me.id}"))
    key = server.resources.server_key
    args = {
        "host": server.host,
        "port": server.port,
        "n": str(key.n),
        "e": str(key.e),
        "fingerprint": str(rsa_fingerprint(key.n, key.e)),
        "phone": f"+{next(_phones)}",
        "code": CODE,
        "peer": f"o{tele_me.id}",
        "module": CLIENTS[venv][1],
    }
    proc = await asyncio.create_subprocess_exec(
        str(python),
        str(MEDIA_DRIVER),
        json.dumps(args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
    )
    driver = Driver(proc)
    try:
        ready = await driver.step("ready")
        await tele.get_dialogs()  # the client's access hash, from its first text
        photo = io.BytesIO(_jpeg(640, 480))
        photo.name = "view.jpg"
        await tele.send_file(ready["me"], photo, caption="a photo")
        got_photo = await driver.step("received")
        assert got_photo["media"] == "PHOTO" and got_photo["caption"] == "a photo"
        assert got_photo["photo"] == [640, 480] and got_photo["sha256"]
        content = os.urandom(5000)
        document = io.BytesIO(content)
        document.name = "notes.bin"
        await tele.send_file(ready["me"], document, force_document=True)
        got_document = await driver.step("received")
        assert got_document["media"] == "DOCUMENT"
        assert got_document["file_name"] == "notes.bin"
        assert got_document["sha256"] == hashlib.sha256(content).hexdigest()
        listed = await driver.step("listed")
        assert [m["media"] for m in listed["history"]] == ["DOCUMENT", "PHOTO", None]
        assert await asyncio.wait_for(proc.wait(), 60) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
