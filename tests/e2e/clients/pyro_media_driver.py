"""Drive an older Pyrogram-family client receiving media (run with that client's venv).

argv[1]: JSON as for pyro_driver.py. Signs in, sends ``peer`` a text, says ``ready``,
then for each message from ``peer`` that arrives (a photo, then a document) says what
the client made of it and downloads it; then lists the history with ``listed``.
"""

import asyncio
import hashlib
import importlib
import json
import sys
from typing import Any

ARGS = json.loads(sys.argv[1])
MODULE = ARGS.get("module", "pyrogram")
pyrogram = importlib.import_module(MODULE)
rsa = importlib.import_module(f"{MODULE}.crypto.rsa")
data_center = importlib.import_module(f"{MODULE}.session.internals.data_center")
Client, filters, handlers = pyrogram.Client, pyrogram.filters, pyrogram.handlers


def say(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


def patch() -> None:
    key = rsa.PublicKey(int(ARGS["n"]), int(ARGS["e"]))
    rsa.server_public_keys[int(ARGS["fingerprint"])] = key
    address = (ARGS["host"], int(ARGS["port"]))
    data_center.DataCenter.__new__ = lambda cls, *a, **k: address


def describe(message: Any) -> dict[str, Any]:
    media = message.media
    return {
        "media": getattr(media, "name", None) if media is not None else None,
        "caption": message.caption,
        "photo": [message.photo.width, message.photo.height] if message.photo else None,
        "file_name": message.document.file_name if message.document else None,
        "grouped": message.media_group_id,
    }


async def main() -> None:
    patch()
    client = Client(
        "driver",
        api_id=1,
        api_hash="0" * 32,
        phone_number=ARGS["phone"],
        phone_code=ARGS["code"],
        in_memory=True,
        sleep_threshold=0,
    )
    incoming: asyncio.Queue[Any] = asyncio.Queue()

    async def on_message(_: Any, message: Any) -> None:
        await incoming.put(message)

    client.add_handler(handlers.MessageHandler(on_message, filters.incoming))
    await client.start()
    me = await client.get_me()
    peer = await client.get_users(ARGS["peer"])
    await client.send_message(peer.id, "ready")  # the peer learns of this user
    say(step="ready", me=me.id)
    for _ in range(int(ARGS.get("count", 2))):
        message = await asyncio.wait_for(incoming.get(), 30)
        got = describe(message)
        data = await client.download_media(message, in_memory=True)
        got["sha256"] = hashlib.sha256(bytes(data.getbuffer())).hexdigest() if data else None
        say(step="received", **got)
    history = [describe(m) async for m in client.get_chat_history(peer.id)]
    say(step="listed", history=history)
    await client.stop()


asyncio.run(main())
