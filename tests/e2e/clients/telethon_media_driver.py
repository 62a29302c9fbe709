"""Drive an older Telethon-family client through photos and an offline catch-up (run
with that client's own venv's python).

argv[1]: JSON {host, port, pem, phone, code, peer, name, photo}, ``photo`` a JPEG file
to send. The runtime patches are those of ``telethon_driver.py``. Prints one JSON line
per step on stdout: sign in (``ready``); a photo to ``peer``, downloaded back
(``photo_sent``); a photo from it live, downloaded (``photo_received``); then the
client disconnects (``offline``) and, after a line on stdin (the test has sent
messages meanwhile), connects again and calls ``catch_up()`` (updates.getDifference
from the pts it last saw), saying what arrived (``caught_up``).
"""

import asyncio
import hashlib
import json
import sys
from typing import Any

import telethon
from telethon import TelegramClient, events
from telethon.crypto import rsa
from telethon.sessions import StringSession
from telethon.tl.alltlobjects import LAYER

ARGS = json.loads(sys.argv[1])


def say(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


def largest(photo: Any) -> list[int]:
    """The [w, h] of a photo's largest rendition."""
    sizes = [s for s in photo.sizes if isinstance(getattr(s, "w", None), int)]
    best = max(sizes, key=lambda s: s.w * s.h)
    return [best.w, best.h]


def describe(message: Any, data: bytes | None) -> dict[str, Any]:
    return {
        "caption": message.text,
        "media": type(message.media).__name__ if message.media else None,
        "size": largest(message.photo) if message.photo else None,
        "sha256": hashlib.sha256(data).hexdigest() if data else None,
    }


def known_pts(client: Any) -> int | None:
    """The pts the client's update state holds (what catch_up() starts from)."""
    pts: int | None = client._state_cache[None][0]
    return pts


async def main() -> None:
    rsa.add_key(ARGS["pem"], old=False)
    session = StringSession()
    session.set_dc(2, ARGS["host"], int(ARGS["port"]))
    client = TelegramClient(session, api_id=1, api_hash="0" * 32, receive_updates=True)
    incoming: asyncio.Queue[Any] = asyncio.Queue()

    async def on_message(event: Any) -> None:
        await incoming.put(event.message)

    client.add_event_handler(on_message, events.NewMessage(incoming=True))
    await client.start(phone=ARGS["phone"], code_callback=lambda: ARGS["code"])
    me = await client.get_me()
    say(step="ready", me=me.id, version=telethon.__version__, layer=LAYER)

    peer = await client.get_entity(ARGS["peer"])
    sent = await client.send_file(peer, ARGS["photo"], caption="photo from " + ARGS["name"])
    own = await client.download_media(sent, bytes)
    say(step="photo_sent", id=sent.id, **describe(sent, own))

    got = await asyncio.wait_for(incoming.get(), 30)
    data = await client.download_media(got, bytes)
    say(step="photo_received", **describe(got, data))

    from_pts = known_pts(client)
    await client.disconnect()
    say(step="offline", pts=from_pts)
    expected = json.loads(
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    )["sent"]
    if not from_pts:
        raise SystemExit(f"no update state to catch up from (pts {from_pts!r})")
    await client.connect()
    await client.catch_up()
    texts: list[str] = []
    try:
        while len(texts) < expected:
            texts.append((await asyncio.wait_for(incoming.get(), 30)).text)
    except TimeoutError:
        pass  # fewer than sent: the test shows which
    say(step="caught_up", texts=texts, from_pts=from_pts, pts=known_pts(client))
    await client.disconnect()


asyncio.run(main())
