"""Drive an older Pyrogram-family client (run with that client's own venv's python).

argv[1]: JSON {host, port, n, e, fingerprint, phone, code, peer, name, module}. The
two runtime patches the family needs: the server's RSA key in
``pyrogram.crypto.rsa.server_public_keys``, and every DC address pointed at the server
(``DataCenter``). Prints one JSON line per step on stdout. Steps: sign in, send to
``peer`` (a username), wait for a message from it, history, dialogs, edit, then (after
a line on stdin: the test has seen the edit) delete.
"""

import asyncio
import importlib
import json
import sys
from typing import Any

ARGS = json.loads(sys.argv[1])
# "pyrogram" for Pyrogram and its forks; hydrogram is the same code under its own name.
MODULE = ARGS.get("module", "pyrogram")
pyrogram = importlib.import_module(MODULE)
rsa = importlib.import_module(f"{MODULE}.crypto.rsa")
data_center = importlib.import_module(f"{MODULE}.session.internals.data_center")
Client, filters, handlers = pyrogram.Client, pyrogram.filters, pyrogram.handlers


def say(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


def patch() -> None:
    n, e = int(ARGS["n"]), int(ARGS["e"])
    key = rsa.PublicKey(n, e)
    rsa.server_public_keys[int(ARGS["fingerprint"])] = key
    address = (ARGS["host"], int(ARGS["port"]))
    data_center.DataCenter.__new__ = lambda cls, *a, **k: address


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
    incoming: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def on_message(_: Any, message: Any) -> None:
        if not incoming.done():
            incoming.set_result(message)

    client.add_handler(handlers.MessageHandler(on_message, filters.incoming))
    await client.start()
    me = await client.get_me()
    say(step="ready", me=me.id, version=pyrogram.__version__)
    peer = await client.get_users(ARGS["peer"])
    sent = await client.send_message(peer.id, "hello from " + ARGS["name"])
    say(step="sent", id=sent.id, text=sent.text, chat=sent.chat.id, outgoing=sent.outgoing)
    got = await asyncio.wait_for(incoming, 30)
    say(step="received", text=got.text, sender=got.from_user.id, chat=got.chat.id)
    history = [m.text async for m in client.get_chat_history(peer.id)]
    dialogs = [(d.chat.id, d.top_message.id) async for d in client.get_dialogs()]
    say(step="listed", history=history, dialogs=dialogs)
    edited = await client.edit_message_text(peer.id, sent.id, "edited by " + ARGS["name"])
    say(step="edited", text=edited.text)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    deleted = await client.delete_messages(peer.id, [sent.id])
    after = [m.text async for m in client.get_chat_history(peer.id)]
    say(step="deleted", count=deleted, history=after)
    await client.stop()


asyncio.run(main())
