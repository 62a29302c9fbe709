"""GramJS (npm ``telegram`` 2.26.22: TypeScript, layer 198, the library inside Telegram
Web A) on Node over TCP against a real gateway, with a Telethon 1.45 user: sign in, get
me, a text each way live, history and dialogs, a photo each way, and catching up with
updates.getDifference after being offline.

GramJS lives under ``$TELESRV_CLIENT_NODE/gramjs`` (default ``.client-node/gramjs`` at
the repository root); ``.ci/client-node`` installs it. Without it, or without ``node``,
the test skips.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import itertools
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from .conftest import ClientFactory, RunningServer
from .drivers import (
    CODE,
    GRAMJS_DROPPED_ZERO,
    assert_served,
    chat_peer,
    exchange_texts,
    server_key_args,
    server_log,
    start_driver,
    unexplained_complaints,
)
from .test_media_files import _jpeg

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = Path(os.environ.get("TELESRV_CLIENT_NODE", ROOT / ".client-node"))
MODULES = NODE_DIR / "gramjs" / "node_modules"
DRIVER = Path(__file__).parent / "clients" / "gramjs_driver.mjs"
LAYER = 198
_phones = itertools.count(15555000)
NODE = shutil.which("node")


def _missing() -> str | None:
    if NODE is None:
        return "no `node` on PATH: the GramJS client cannot run"
    if not (MODULES / "telegram" / "package.json").is_file():
        return f"no GramJS (npm `telegram`) at {MODULES} (install it with .ci/client-node)"
    return None


MISSING = _missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


def _largest(photo: Any) -> list[int]:
    """The [w, h] of a photo's largest rendition, as the driver reports it."""
    sizes = [s for s in photo.sizes if isinstance(getattr(s, "w", None), int)]
    best = max(sizes, key=lambda s: s.w * s.h)
    return [best.w, best.h]


async def test_gramjs_chats_sends_photos_and_catches_up_with_telethon(
    server: RunningServer,
    make_client: ClientFactory,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    assert NODE is not None
    caplog.set_level(logging.INFO, logger="telesrv")
    peer = await chat_peer(make_client, f"+{next(_phones)}", "g")
    tele, got = peer.client, peer.incoming

    photo_out = tmp_path / "from-gramjs.jpg"
    photo_out.write_bytes(_jpeg(640, 480))
    args = {
        "modules": str(MODULES),
        "host": server.host,
        "port": server.port,
        **server_key_args(server),
        "phone": f"+{next(_phones)}",
        "code": CODE,
        "peer": peer.username,
        "name": "gramjs",
        "photo": str(photo_out),
        "logLevel": "info",
    }
    driver = await start_driver([NODE, str(DRIVER)], args)
    proc = driver.proc
    try:
        ready = await driver.step("ready")
        assert ready["layer"] == LAYER and ready["version"] == "2.26.22", ready
        await exchange_texts(driver, peer, "gramjs", ready)

        listed = await driver.step("listed")
        assert listed["history"] == ["hello from telethon", "hello from gramjs"]
        assert [chat for chat, _top in listed["dialogs"]] == [peer.me.id]

        # A photo from GramJS: Telethon downloads the same bytes GramJS does.
        photo_sent = await driver.step("photo_sent")
        assert photo_sent["media"] == "MessageMediaPhoto", photo_sent
        assert photo_sent["caption"] == "photo from gramjs"
        event = await asyncio.wait_for(got.get(), 30)
        assert event.message.text == "photo from gramjs" and event.message.photo is not None
        data = await tele.download_media(event.message, bytes)
        assert hashlib.sha256(data).hexdigest() == photo_sent["sha256"]
        assert _largest(event.message.photo) == photo_sent["size"]
        assert list(Image.open(io.BytesIO(data)).size) == photo_sent["size"]

        # A photo to GramJS: it downloads the bytes Telethon does.
        with_photo = io.BytesIO(_jpeg(480, 640))
        with_photo.name = "to-gramjs.jpg"
        mine = await tele.send_file(ready["me"], with_photo, caption="photo from telethon")
        own = await tele.download_media(mine, bytes)
        photo_received = await driver.step("photo_received")
        assert photo_received["media"] == "MessageMediaPhoto", photo_received
        assert photo_received["caption"] == "photo from telethon"
        assert photo_received["sha256"] == hashlib.sha256(own).hexdigest()
        assert photo_received["size"] == _largest(mine.photo)
        assert list(Image.open(io.BytesIO(own)).size) == photo_received["size"]

        # Offline: what is sent meanwhile comes with updates.getDifference.
        await driver.step("offline")
        missed = ["while you were away 1", "while you were away 2"]
        for text in missed:
            await tele.send_message(ready["me"], text)
        assert proc.stdin is not None
        proc.stdin.write(b"%s\n" % json.dumps({"sent": len(missed)}).encode())
        await proc.stdin.drain()
        caught_up = await driver.step("caught_up")
        assert caught_up["texts"] == missed, caught_up
        assert caught_up["pts"] > caught_up["from_pts"], caught_up
        assert await asyncio.wait_for(proc.wait(), 60) == 0, await driver.stderr()
    finally:
        await driver.close()
    messages = server_log(caplog)
    assert_served(messages, f"layer {LAYER}")
    # GramJS logs an object it cannot parse ("Could not find a matching Constructor ID"),
    # a security error, a broken auth key or a reconnect as warnings or errors on
    # stderr; the run must have none, but for a key exchange it failed on a key that
    # began with a zero byte, and ran again. It warns "Disconnecting..." whenever it
    # disconnects, which the driver does on purpose (offline, and at the end).
    stderr = await driver.stderr()
    complaints = [
        line
        for line in stderr.splitlines()
        if ("[WARN]" in line or "[ERROR]" in line or "Constructor ID" in line)
        and "[Disconnecting...]" not in line
    ]
    complaints = unexplained_complaints(complaints, stderr, messages, GRAMJS_DROPPED_ZERO)
    assert not complaints, complaints
