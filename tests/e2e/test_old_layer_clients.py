"""Clients at older layers against a real gateway: Telethon 1.24.0 (layer 133),
Pyrogram 2.0.106 (158), hydrogram (181), telethon-v1-24 (214), pyrofork (220) and
pyrotgfork (227), each in its own venv (they cannot share ours: most are the
``pyrogram`` package, two an old ``telethon``), chatting with a Telethon 1.45 user.

The venvs live under ``$TELESRV_CLIENT_VENVS`` (default ``.client-venvs`` at the
repository root); ``.ci/client-venvs`` creates them. Without one, its test is skipped.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import ClientFactory, RunningServer
from .drivers import (
    CODE,
    Driver,
    assert_served,
    chat_peer,
    exchange_texts,
    server_key_args,
    server_log,
    start_driver,
)

ROOT = Path(__file__).resolve().parents[2]
VENVS = Path(os.environ.get("TELESRV_CLIENT_VENVS", ROOT / ".client-venvs"))
DRIVERS = Path(__file__).parent / "clients"
_phones = itertools.count(15553000)

# venv name -> (the layer its library declares, its module)
CLIENTS = {
    "telethon-1-24-0": (133, "telethon"),
    "pyrogram": (158, "pyrogram"),
    "hydrogram": (181, "hydrogram"),
    "telethon-v1-24": (214, "telethon"),
    "pyrofork": (220, "pyrogram"),
    "pyrotgfork": (227, "pyrogram"),
}


async def test_driver_reads_a_chatty_stderr() -> None:
    # More log than a pipe holds, then a step: the step arrives.
    script = (
        "import sys\n"
        "for _ in range(600): sys.stderr.write('x' * 1000 + '\\n')\n"
        "sys.stderr.flush()\n"
        'print(\'{"step": "ready"}\', flush=True)\n'
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    driver = Driver(proc)
    try:
        assert await driver.step("ready", timeout=30) == {"step": "ready"}
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert (await driver.stderr()).count("\n") == 600
    finally:
        await driver.close()


async def test_driver_close_does_not_hang_on_unread_output() -> None:
    # A driver killed mid-run with much unread output on both pipes.
    script = (
        "import sys\n"
        "for _ in range(600): sys.stdout.write('y' * 1000 + '\\n')\n"
        "for _ in range(600): sys.stderr.write('x' * 1000 + '\\n')\n"
        "sys.stdin.read()\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    driver = Driver(proc)
    assert proc.stdout is not None
    await proc.stdout.readline()  # it runs
    await asyncio.wait_for(driver.close(), 120)
    assert proc.returncode is not None


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
    peer = await chat_peer(make_client, f"+{next(_phones)}", "o")
    args = {
        "host": server.host,
        "port": server.port,
        **server_key_args(server),
        "phone": f"+{next(_phones)}",
        "code": CODE,
        "peer": peer.username,
        "name": venv,
        "module": CLIENTS[venv][1],
    }
    script = DRIVERS / ("telethon_driver.py" if venv.startswith("telethon") else "pyro_driver.py")
    driver = await start_driver([str(python), str(script)], args)
    proc = driver.proc
    try:
        await exchange_texts(driver, peer, venv, await driver.step("ready"))

        listed = await driver.step("listed")
        assert listed["history"] == ["hello from telethon", f"hello from {venv}"]
        assert [chat for chat, _top in listed["dialogs"]] == [peer.me.id]

        edited = await driver.step("edited")
        assert edited["text"] == f"edited by {venv}"
        edit = await asyncio.wait_for(peer.edits.get(), 30)
        assert edit.message.text == f"edited by {venv}"
        assert proc.stdin is not None
        proc.stdin.write(b"delete\n")  # only now: an edit and a delete close together race
        await proc.stdin.drain()

        deleted = await driver.step("deleted")
        assert deleted["count"] == 1
        assert deleted["history"] == ["hello from telethon"]
        assert await asyncio.wait_for(proc.wait(), 60) == 0
    finally:
        await driver.close()
    assert_served(server_log(caplog), f"layer {CLIENTS[venv][0]}")


TELETHON_MEDIA_DRIVER = DRIVERS / "telethon_media_driver.py"
# The Telethon-family venvs that also send and receive photos and catch up after being
# offline.
TELETHON_MEDIA = ["telethon-1-24-0", "telethon-v1-24"]


def _largest(photo: Any) -> list[int]:
    """The [w, h] of a photo's largest rendition, as the drivers report it."""
    sizes = [s for s in photo.sizes if isinstance(getattr(s, "w", None), int)]
    best = max(sizes, key=lambda s: s.w * s.h)
    return [best.w, best.h]


@pytest.mark.parametrize("venv", TELETHON_MEDIA)
async def test_old_telethon_exchanges_photos_and_catches_up_after_being_offline(
    venv: str,
    server: RunningServer,
    make_client: ClientFactory,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """A photo each way with a Telethon 1.45 user (both download the same bytes), then
    the client disconnects, is sent two texts, reconnects and gets them from
    ``catch_up()`` (updates.getDifference)."""
    import hashlib
    import io

    from PIL import Image

    from .test_media_files import _jpeg

    python = VENVS / venv / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no {venv} venv at {VENVS / venv} (create it with .ci/client-venvs)")
    caplog.set_level(logging.INFO, logger="telesrv")
    peer = await chat_peer(make_client, f"+{next(_phones)}", "p")
    tele, got = peer.client, peer.incoming

    photo_out = tmp_path / "from-client.jpg"
    photo_out.write_bytes(_jpeg(640, 480))
    args = {
        "host": server.host,
        "port": server.port,
        **server_key_args(server),
        "phone": f"+{next(_phones)}",
        "code": CODE,
        "peer": peer.username,
        "name": venv,
        "photo": str(photo_out),
    }
    driver = await start_driver([str(python), str(TELETHON_MEDIA_DRIVER)], args)
    proc = driver.proc
    try:
        ready = await driver.step("ready")
        assert ready["layer"] == CLIENTS[venv][0], ready

        # A photo from the client: Telethon 1.45 downloads the bytes the client does.
        photo_sent = await driver.step("photo_sent")
        assert photo_sent["media"] == "MessageMediaPhoto", photo_sent
        assert photo_sent["caption"] == f"photo from {venv}"
        event = await asyncio.wait_for(got.get(), 30)
        assert event.message.text == f"photo from {venv}" and event.message.photo is not None
        assert event.message.sender_id == ready["me"]
        data = await tele.download_media(event.message, bytes)
        assert hashlib.sha256(data).hexdigest() == photo_sent["sha256"]
        assert _largest(event.message.photo) == photo_sent["size"]
        assert list(Image.open(io.BytesIO(data)).size) == photo_sent["size"]

        # A photo to the client: it downloads the bytes Telethon 1.45 does.
        await tele.get_dialogs()  # the client's access hash, from its photo
        with_photo = io.BytesIO(_jpeg(480, 640))
        with_photo.name = "to-client.jpg"
        mine = await tele.send_file(ready["me"], with_photo, caption="photo from telethon")
        own = await tele.download_media(mine, bytes)
        photo_received = await driver.step("photo_received")
        assert photo_received["media"] == "MessageMediaPhoto", photo_received
        assert photo_received["caption"] == "photo from telethon"
        assert photo_received["sha256"] == hashlib.sha256(own).hexdigest()
        assert photo_received["size"] == _largest(mine.photo)
        assert list(Image.open(io.BytesIO(own)).size) == photo_received["size"]

        # Offline: what is sent meanwhile comes with catch_up() (updates.getDifference).
        offline = await driver.step("offline")
        assert offline["pts"], offline
        missed = ["while you were away 1", "while you were away 2"]
        for text in missed:
            await tele.send_message(ready["me"], text)
        assert proc.stdin is not None
        proc.stdin.write(b"%s\n" % json.dumps({"sent": len(missed)}).encode())
        await proc.stdin.drain()
        caught_up = await driver.step("caught_up")
        assert caught_up["texts"] == missed, (caught_up, await driver.stderr(timeout=0))
        assert caught_up["pts"] > caught_up["from_pts"], caught_up
        assert await asyncio.wait_for(proc.wait(), 60) == 0, await driver.stderr()
    finally:
        await driver.close()
    assert_served(server_log(caplog), f"layer {CLIENTS[venv][0]}")


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
    peer = await chat_peer(make_client, f"+{next(_phones)}", "o")
    tele = peer.client
    args = {
        "host": server.host,
        "port": server.port,
        **server_key_args(server),
        "phone": f"+{next(_phones)}",
        "code": CODE,
        "peer": peer.username,
        "module": CLIENTS[venv][1],
    }
    driver = await start_driver(
        [str(python), str(MEDIA_DRIVER)], args, stdin=asyncio.subprocess.DEVNULL
    )
    proc = driver.proc
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
