"""Telegram's own web app, Web K 2.2 (build 597, layer 213), in headless Chromium against
the gateway's WebSocket listener with no relay, used as a person would: the QR login page,
sign-up by phone and code, a chat with a Telethon user's history, live messages, and
profile photos both ways (the Telethon user's in the chat list, the account's own set in
the app's settings and seen by the Telethon user).

The app is test data next to the repository (``../shared/webapp/``, not part of telesrv):
``.ci/webapp`` unpacks it into ``.webapp/`` (or ``$TELESRV_WEBAPP``), applies its
configuration patch and installs its node modules; ``.ci/client-browser`` installs
Debian's ``chromium`` and playwright-core. The app's Vite dev server runs once for the
module, with the WebSocket URL and the server's RSA key in its environment (the patched
configuration reads them). The driver (``clients/webapp_driver.mjs``) clicks and types
on commands from the test and takes a screenshot at every step; a failing run keeps the
screenshots, the app's console and the server log, and names them in the failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from telethon import TelegramClient, events, functions, types
from telethon.crypto import rsa as telethon_rsa
from telethon.errors import PhoneNumberUnoccupiedError

from telesrv.app import open_resources
from telesrv.gateway.websocket import WebSocketConnection
from telesrv.store.login_tokens import current_key
from telesrv.wiring import build_server

from .conftest import ClientFactory, RunningServer, e2e_settings
from .drivers import Driver

ROOT = Path(__file__).resolve().parents[2]
WEBAPP = Path(os.environ.get("TELESRV_WEBAPP", ROOT / ".webapp")) / "tweb"
NODE_DIR = Path(os.environ.get("TELESRV_CLIENT_NODE", ROOT / ".client-node"))
MODULES = NODE_DIR / "browser" / "node_modules"
DRIVER = Path(__file__).parent / "clients" / "webapp_driver.mjs"
SHARED = ROOT.parent / "shared" / "webapp"
CODE = "12345"
NODE = shutil.which("node")
CHROMIUM = os.environ.get("TELESRV_CHROMIUM") or shutil.which("chromium")
HISTORY = 150
TELE_COLOUR = (220, 40, 150)  # the Telethon user's profile photo
WEBK_COLOUR = (40, 180, 90)  # the app's account's
BURST = 20


def _missing() -> str | None:
    if not SHARED.is_dir() and not WEBAPP.is_dir():
        return f"no web app: {SHARED} is absent"
    if NODE is None:
        return "no `node` on PATH: the web app and its driver cannot run"
    if CHROMIUM is None:
        return "no `chromium` on PATH (install it with .ci/client-browser, or set TELESRV_CHROMIUM)"
    if not (MODULES / "playwright-core" / "package.json").is_file():
        return f"no playwright-core at {MODULES} (install it with .ci/client-browser)"
    if not (WEBAPP / "node_modules" / ".bin" / "vite").exists():
        return f"the web app is not installed at {WEBAPP} (install it with .ci/webapp)"
    return None


MISSING = _missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


@pytest.fixture(scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, redis: Any
) -> AsyncIterator[RunningServer]:
    """The e2e server, but a new phone number signs up (the app's sign-up page) instead
    of being registered by auth.signIn."""
    settings = e2e_settings(
        tmp_path_factory.mktemp("telesrv-data"), database_url, redis_url, auto_register=False
    )
    async with open_resources(settings) as resources:
        built = build_server(settings, resources)
        host, port = await built.start(settings.listen_host, settings.listen_port)
        _, ws_port = await built.gateway.start_websocket(host, 0)
        running = RunningServer(settings, resources, built, host, port, ws_port)
        telethon_rsa.add_key(resources.server_key.public_pem, old=False)
        try:
            yield running
        finally:
            await running.server.stop()


@dataclass
class DevServer:
    url: str  # the app's page, with ?noSharedWorker=1
    log: Path


# The dev server's configuration for the test: the app's own, with the packages that
# only its workers import bundled at start. Found later (on a first run, with no cache
# yet), each makes the dev server reload the page under the test, and once its bundler
# crashed while doing so.
VITE_CONFIG = WEBAPP / "vite.telesrv.config.ts"
_VITE_CONFIG = """// Written by telesrv's web app test (tests/e2e/test_webapp.py); not the app's.
import {mergeConfig} from 'vite';
import base from './vite.config';

export default mergeConfig(base, {
  optimizeDeps: {
    include: ['tinyld', 'pako/dist/pako_inflate.min.js', '@cryptography/aes', 'js-md5'],
  },
});
"""

_LOCAL = re.compile(rb"Local:\s+(?:\x1b\[[0-9;]*m)*(http://127\.0\.0\.1:[0-9]+/)")


@pytest.fixture(scope="module")
async def app(
    server: RunningServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[DevServer]:
    """The app's Vite dev server, once for the module. Vite binds the port itself: it
    starts at 5173 and takes the next one while a port is taken, and prints the one it
    got. The app's config runs a type checker and linter beside the dev server unless
    VITEST is set; they are not needed here and would take a core."""
    key = server.resources.server_key
    env = dict(os.environ)
    env.update(
        VITE_TELESRV_WS_URL=f"ws://{server.host}:{server.ws_port}/apiws",
        VITE_TELESRV_RSA_MODULUS=format(key.n, "x"),
        VITE_TELESRV_RSA_EXPONENT=_hex_bytes(key.e),
        VITEST="1",
        BROWSER="none",
        NO_COLOR="1",
    )
    log = tmp_path_factory.mktemp("vite") / "vite.log"
    VITE_CONFIG.write_text(_VITE_CONFIG)
    proc = await asyncio.create_subprocess_exec(
        str(WEBAPP / "node_modules" / ".bin" / "vite"),
        "--config",
        VITE_CONFIG.name,
        "--host",
        "127.0.0.1",
        "--port",
        "5173",
        cwd=WEBAPP,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    out = bytearray()
    url = None
    with log.open("wb") as sink:
        try:
            while url is None:
                line = await asyncio.wait_for(proc.stdout.readline(), 120)
                if not line:
                    raise AssertionError(f"vite ended:\n{out.decode(errors='replace')}")
                out += line
                sink.write(line)
                if found := _LOCAL.search(line):
                    url = found.group(1).decode()
            drain = asyncio.ensure_future(_copy(proc.stdout, sink))
            yield DevServer(f"{url}?noSharedWorker=1", log)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 15)
            await asyncio.wait_for(proc.wait(), 30)
    drain.cancel()


async def _copy(stream: asyncio.StreamReader, sink: Any) -> None:
    while chunk := await stream.read(1 << 16):
        sink.write(chunk)
        sink.flush()


def _picture(path: Path, size: tuple[int, int], colour: tuple[int, int, int]) -> None:
    """A JPEG with something to see: a gradient over ``colour``."""
    image = Image.new("RGB", size, colour)
    for x in range(0, size[0], 10):
        image.paste((x % 256, colour[1], 255 - x % 256), (x, 0, x + 5, size[1]))
    image.save(path, "JPEG", quality=85)


def _solid(path: Path, colour: tuple[int, int, int]) -> None:
    """A square JPEG of one colour, to be known again in a small avatar."""
    Image.new("RGB", (640, 640), colour).save(path, "JPEG", quality=90)


def _near(seen: Any, colour: tuple[int, int, int]) -> bool:
    """Loosely the same colour (JPEG, scaling and the app's crop move it a little)."""
    return len(seen) == 3 and all(abs(int(a) - b) <= 24 for a, b in zip(seen, colour, strict=True))


def _average(data: bytes) -> tuple[int, int, int]:
    with Image.open(io.BytesIO(data)) as image:
        pixel = image.convert("RGB").resize((1, 1), Image.Resampling.BOX).getpixel((0, 0))
    assert isinstance(pixel, tuple), pixel
    return (int(pixel[0]), int(pixel[1]), int(pixel[2]))


def _hex_bytes(value: int) -> str:
    """Whole bytes of hex, big-endian, as the app's key list has them (65537: 010001)."""
    return value.to_bytes((value.bit_length() + 7) // 8, "big").hex()


class WebApp:
    """The driver process; every step is checked for an error as it comes."""

    def __init__(self, driver: Driver, proc: asyncio.subprocess.Process, shots: Path) -> None:
        self.driver = driver
        self.proc = proc
        self.shots = shots
        self.done: list[tuple[str, str]] = []  # (step, screenshot)

    async def do(self, name: str, timeout: float = 60, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        command = {"do": name, "timeout": int(timeout * 1000), **args}
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        await self.proc.stdin.drain()
        answer = await self.driver.step(name, timeout=timeout + 60)
        assert "error" not in answer, f"{name} failed ({answer.get('shot')}): {answer['error']}"
        self.done.append((name, str(answer.get("shot"))))
        return answer


def _browser_keys(server: RunningServer) -> set[int]:
    return {
        conn.auth_key.auth_key_id
        for conn in server.gateway.connections
        if isinstance(conn, WebSocketConnection) and conn.upgraded and conn.auth_key is not None
    }


async def _telethon_user(make_client: ClientFactory, phone: str, name: str) -> TelegramClient:
    """A Telethon user that signs up with `name` (auth.signUp, which Telethon's start()
    does not call), then a client of that session receiving updates."""
    first = make_client()
    await first.connect()
    sent = await first.send_code_request(phone)
    try:
        await first.sign_in(phone, CODE, phone_code_hash=sent.phone_code_hash)
    except PhoneNumberUnoccupiedError:
        await first(functions.auth.SignUpRequest(phone, sent.phone_code_hash, name, ""))
    session = first.session.save()
    await first.disconnect()
    client = make_client(session=session, receive_updates=True)
    await client.start(phone=phone, code_callback=lambda: CODE)
    return client


KEEP = os.environ.get("TELESRV_WEBAPP_SHOTS")  # keep a passing run's screenshots there
# How long the app is left alone on its chat list at the end (what it asks when idle).
IDLE_SECONDS = float(os.environ.get("TELESRV_WEBAPP_IDLE", "15"))


@pytest.fixture
def shots() -> Iterator[Path]:
    """The screenshots and console of a run; removed when the test passes, unless
    TELESRV_WEBAPP_SHOTS names a directory to keep them in."""
    if KEEP:
        path = Path(KEEP)
        path.mkdir(parents=True, exist_ok=True)
    else:
        path = Path(tempfile.mkdtemp(prefix="telesrv-webapp-"))
    yield path


async def test_webapp_in_chromium(
    server: RunningServer,
    app: DevServer,
    make_client: ClientFactory,
    shots: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert NODE is not None and CHROMIUM is not None
    caplog.set_level(logging.INFO, logger="telesrv")
    args = {"modules": str(MODULES), "chromium": CHROMIUM, "app": app.url, "shots": str(shots)}
    proc = await asyncio.create_subprocess_exec(
        NODE,
        str(DRIVER),
        json.dumps(args),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    web = WebApp(Driver(proc), proc, shots)
    passed = False
    try:
        await _scenario(server, web, make_client)
        passed = True
    except BaseException as exc:
        (shots / "server.log").write_text(
            "\n".join(f"{r.levelname} {r.name}: {r.getMessage()}" for r in caplog.records)
        )
        steps = ", ".join(f"{step} ({shot})" for step, shot in web.done)
        raise AssertionError(
            f"web app scenario failed; screenshots, the app's console (console.log) and the "
            f"server log (server.log) are kept in {shots}, the vite log at {app.log}; "
            f"steps done: {steps}"
        ) from exc
    finally:
        with contextlib.suppress(Exception):
            methods = await web.do("methods", timeout=10)
            (shots / "methods.json").write_text(json.dumps(methods["methods"], indent=1))
        with contextlib.suppress(Exception):
            assert proc.stdin is not None
            proc.stdin.write(b'{"do": "close"}\n')
            await proc.stdin.drain()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 30)
        await web.driver.close()
        if passed and not KEEP:
            shutil.rmtree(shots, ignore_errors=True)


async def _scenario(server: RunningServer, web: WebApp, make_client: ClientFactory) -> None:
    # Two Telethon users: one shows the app the way in by QR, the other chats with the
    # account the app signs up.
    scanner = await _telethon_user(make_client, "+15559100001", "Scanner")
    tele = await _telethon_user(make_client, "+15559100002", "Tele")
    # The Telethon user has a profile photo before the app's account first sees them.
    tele_face = web.shots / "tele-face.jpg"
    _solid(tele_face, TELE_COLOUR)
    await tele(functions.photos.UploadProfilePhotoRequest(file=await tele.upload_file(tele_face)))

    # (a) The first screen is the QR login page with a code drawn. The test stands in for
    # the phone's camera: the token the page shows is the one its key exported.
    opened = await web.do("open", timeout=180)  # the dev server compiles the app first
    assert "QR" in opened["title"], opened
    keys = _browser_keys(server)
    assert keys, "the app is not connected to the WebSocket listener"
    token = None
    for key_id in keys:
        if shown := await server.resources.redis.get(current_key(key_id)):
            token = bytes.fromhex(shown.decode() if isinstance(shown, bytes) else shown)
    assert token is not None, "no login token exported by the app's key"
    accepted = await scanner(functions.auth.AcceptLoginTokenRequest(token))
    assert isinstance(accepted, types.Authorization)
    listed = await web.do("chatList", timeout=120, shot="qr-logged-in")
    assert listed["chats"] == 0, listed

    # (b) Log out (a clean browser) and sign up a new account by phone and code.
    phone = "+15559100003"
    await web.do("signUp", timeout=120, phone=phone, code=CODE, first="Webk", last="User")

    # (c) The Telethon user has 150 messages of history with the new account.
    found = await tele(
        functions.contacts.ImportContactsRequest(
            [types.InputPhoneContact(client_id=0, phone=phone, first_name="Webk", last_name="User")]
        )
    )
    web_user = found.users[0]
    # Sent while the app is closed, as history is: the app catches up when it opens.
    await web.do("leave")
    for i in range(1, HISTORY + 1):
        await tele.send_message(web_user, f"history {i:03d}")
    last = f"history {HISTORY:03d}"
    await web.do("reopen", timeout=120, title="Tele", last=last)
    # The chat list shows the Telethon user's photo as the chat's avatar.
    avatar = await web.do("chatAvatar", title="Tele", shot="tele-avatar")
    assert avatar["w"] > 0 and _near(avatar["colour"], TELE_COLOUR), avatar
    opened = await web.do("openChat", title="Tele", last=last)
    assert f"history {HISTORY:03d}" in opened["preview"], opened
    scrolled = await web.do("scrollHistory", timeout=120, first="history 001", shot="history-top")
    history = [t for t in scrolled["byId"] if t.startswith("history ")]
    want = [f"history {i:03d}" for i in range(1, HISTORY + 1)]
    assert history == want, (sorted(set(want) - set(history)), scrolled["ids"])
    in_dom = [t for t in scrolled["inDom"] if t.startswith("history ")]
    assert in_dom == sorted(in_dom) and in_dom[0] == "history 001", in_dom

    tele_id = (await tele.get_me()).id

    # (d) A text each way, live; the app's read receipt reaches the Telethon user.
    got: asyncio.Queue[Any] = asyncio.Queue()
    tele.add_event_handler(got.put, events.NewMessage(incoming=True))
    read: asyncio.Queue[Any] = asyncio.Queue()
    tele.add_event_handler(read.put, events.MessageRead(inbox=False))
    # The text is typed first: the Telethon user sees the app typing.
    typing: asyncio.Queue[Any] = asyncio.Queue()
    tele.add_event_handler(typing.put, events.UserUpdate(chats=[web_user.id]))
    await web.do("typeDraft", text="hello from web k", shot="typing-sent")
    update = await asyncio.wait_for(typing.get(), 30)
    assert update.typing, update
    await web.do("send", text="hello from web k")
    event = await asyncio.wait_for(got.get(), 30)
    assert event.message.text == "hello from web k"
    assert event.message.sender_id == web_user.id
    reply = await tele.send_message(web_user, "hello from telethon")
    await web.do("waitText", text="hello from telethon", shot="reply-shown")
    receipt = await asyncio.wait_for(read.get(), 30)
    assert receipt.max_id >= reply.id, receipt

    # A burst from the Telethon user into the open chat, sent all at once (their updates
    # may be committed in any order): every message shows, in their order (the app
    # places a message by its id, so this shows none is missing, not the push order).
    burst = [f"burst {i:02d}" for i in range(1, BURST + 1)]
    await asyncio.gather(*(tele.send_message(web_user, text) for text in burst))
    burst_shown = await web.do("texts", prefix="burst ", last=burst[-1], shot="burst")
    sent_order = [m.text for m in reversed(await tele.get_messages(web_user, limit=BURST))]
    assert burst_shown["texts"] == sent_order and sorted(sent_order) == burst, (
        burst_shown,
        sent_order,
    )

    # (e) Typing the other way (the app's was above).
    await tele(functions.messages.SetTypingRequest(web_user, types.SendMessageTypingAction()))
    await web.do("seeTyping", timeout=30, shot="typing-shown")

    # (e) Edit, reply and delete for both, from a message's menu in the app; the Telethon
    # user sees each live.
    edited: asyncio.Queue[Any] = asyncio.Queue()
    tele.add_event_handler(edited.put, events.MessageEdited(chats=[web_user.id]))
    deleted: asyncio.Queue[Any] = asyncio.Queue()
    tele.add_event_handler(deleted.put, events.MessageDeleted())
    await web.do("edit", text="hello from web k", newText="hello again, edited", shot="edited")
    event = await asyncio.wait_for(edited.get(), 30)
    assert event.message.text == "hello again, edited", event.message
    answered = await web.do(
        "reply", text="hello from telethon", replyText="a reply from web k", shot="replied"
    )
    assert "hello from telethon" in answered["quoted"], answered
    event = await asyncio.wait_for(got.get(), 30)
    assert event.message.text == "a reply from web k"
    assert event.message.reply_to_msg_id == reply.id, event.message
    gone_id = event.message.id
    removed = await web.do("deleteForBoth", text="a reply from web k", shot="deleted")
    assert removed["checked"], removed
    event = await asyncio.wait_for(deleted.get(), 30)
    assert gone_id in event.deleted_ids, event
    assert not await tele.get_messages(web_user, ids=[gone_id]) or (
        (await tele.get_messages(web_user, ids=[gone_id]))[0] is None
    )

    # (f) A photo from the app; a photo and a document from the Telethon user, shown (the
    # picture in the chat, then its full size) and downloaded byte for byte in the app.
    picture = web.shots / "from-web-k.jpg"
    _picture(picture, (900, 600), (200, 80, 40))
    await web.do(
        "attach",
        timeout=90,
        file=str(picture),
        item="Photo or Video",
        caption="a photo from web k",
        shot="photo-sent",
    )
    event = await asyncio.wait_for(got.get(), 30)
    assert event.message.text == "a photo from web k", event.message
    assert isinstance(event.message.media, types.MessageMediaPhoto), event.message.media
    largest = max(
        (s for s in event.message.photo.sizes if isinstance(s, types.PhotoSize)),
        key=lambda s: s.w * s.h,
    )
    with Image.open(io.BytesIO(await tele.download_media(event.message, file=bytes))) as image:
        assert image.size == (largest.w, largest.h) == (900, 600), (image.size, largest)
    theirs = web.shots / "from-telethon.jpg"
    _picture(theirs, (1000, 700), (40, 90, 200))
    sent_photo = await tele.send_file(web_user, str(theirs), caption="a photo from telethon")
    seen = await web.do("seePhoto", caption="a photo from telethon", shot="photo-received")
    # The app picks the sizes that fit its window: the chat's picture and the viewer's
    # are each one the server made, the viewer's no smaller.
    sizes = {(s.w, s.h) for s in sent_photo.photo.sizes if isinstance(s, types.PhotoSize)}
    thumb, full = (seen["thumb"]["w"], seen["thumb"]["h"]), (seen["full"]["w"], seen["full"]["h"])
    assert thumb in sizes and full in sizes and full >= thumb, (seen, sizes)
    payload = os.urandom(300_000)  # three of the app's download parts
    document = web.shots / "notes.bin"
    document.write_bytes(payload)
    await tele.send_file(web_user, str(document), force_document=True, caption="a file")
    saved = await web.do("download", timeout=90, doc="notes.bin", shot="document-downloaded")
    assert Path(saved["path"]).read_bytes() == payload, saved

    # (g) Search in the chat: the app lists the messages that match.
    searched = await web.do("searchChat", query="history 14", shot="searched")
    # Both words, each anywhere in the text: 014, 114 and 140-149.
    matching = {f"history {i:03d}" for i in range(1, HISTORY + 1) if "14" in f"{i:03d}"}
    hits = {h for t in searched["found"] for h in re.findall(r"history \d{3}", t)}
    assert hits == matching, searched
    await web.do("closeSearch")

    # (g) Pin, mute and (after the reload) archive the chat from the chat list; a second
    # device of the account (Telethon) sees each on the server.
    device = make_client()
    await device.start(phone=phone, code_callback=lambda: CODE)
    await web.do("chatMenu", title="Tele", item="Pin", shot="pinned")
    pinned = await device(functions.messages.GetPinnedDialogsRequest(folder_id=0))
    assert [d.peer.user_id for d in pinned.dialogs] == [tele_id], pinned
    await web.do(
        "chatMenu", title="Tele", item="Mute", then="Forever", confirm="Mute", shot="muted"
    )
    peer = types.InputNotifyPeer(await device.get_input_entity(tele_id))
    settings = await device(functions.account.GetNotifySettingsRequest(peer))
    assert settings.mute_until, settings

    # The account's own profile photo, set in the app's settings; the Telethon user's
    # dialogs carry it, and the picture downloads.
    face = web.shots / "web-k-face.jpg"
    _solid(face, WEBK_COLOUR)
    own = await web.do("setProfilePhoto", timeout=90, file=str(face), shot="profile-photo-set")
    assert _near(own["shown"]["colour"], WEBK_COLOUR), own  # the settings tab shows it
    dialogs = await tele.get_dialogs()
    seen_user = next(d.entity for d in dialogs if d.id == web_user.id)
    assert isinstance(seen_user.photo, types.UserProfilePhoto), seen_user.photo
    assert seen_user.photo.photo_id, seen_user.photo
    downloaded = await tele.download_profile_photo(seen_user, file=bytes)
    assert isinstance(downloaded, bytes), downloaded
    assert _near(_average(downloaded), WEBK_COLOUR), _average(downloaded)

    # (h) Reload: the session survives and the chat list is the same.
    before = await web.do("chatTitles")
    reloaded = await web.do("reload", timeout=120, title="Tele", shot="reloaded")
    assert reloaded["login"] == 0, reloaded
    after = await web.do("chatTitles")
    assert after["titles"] == before["titles"] and "Tele" in after["titles"], (before, after)

    # Left alone, the app asks only what the server answers (no method it retries
    # because of an error).
    idle = await web.do("idle", timeout=IDLE_SECONDS + 30, seconds=IDLE_SECONDS)
    failing = {name: m["errors"] for name, m in idle["during"].items() if m["errors"]}
    assert not failing, idle

    # Last, archiving (from the chat list, as above): the chat leaves the main list.
    await web.do("chatMenu", title="Tele", item="Archive", shot="archived")
    archived = await device.get_dialogs(folder=1)
    assert [d.id for d in archived] == [tele_id], archived
