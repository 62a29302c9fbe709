"""Drive an older Telethon-family client (run with that client's own venv's python).

argv[1]: JSON {host, port, pem, phone, code, peer, name}. The two runtime patches the
family needs: the server's RSA key through ``telethon.crypto.rsa.add_key``, and the
server's address in the session (``StringSession.set_dc``). Prints one JSON line per
step on stdout, the same steps as ``pyro_driver.py``.
"""

import asyncio
import json
import sys
from typing import Any

import telethon
from telethon import TelegramClient, events
from telethon.crypto import rsa
from telethon.sessions import StringSession

ARGS = json.loads(sys.argv[1])


def say(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


async def main() -> None:
    rsa.add_key(ARGS["pem"], old=False)
    session = StringSession()
    session.set_dc(2, ARGS["host"], int(ARGS["port"]))
    client = TelegramClient(session, api_id=1, api_hash="0" * 32, receive_updates=True)
    incoming: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def on_message(event: Any) -> None:
        if not incoming.done():
            incoming.set_result(event.message)

    client.add_event_handler(on_message, events.NewMessage(incoming=True))
    await client.start(phone=ARGS["phone"], code_callback=lambda: ARGS["code"])
    me = await client.get_me()
    say(step="ready", me=me.id, version=telethon.__version__)
    peer = await client.get_entity(ARGS["peer"])
    sent = await client.send_message(peer, "hello from " + ARGS["name"])
    say(step="sent", id=sent.id, text=sent.text, chat=sent.chat_id, outgoing=sent.out)
    got = await asyncio.wait_for(incoming, 30)
    say(step="received", text=got.text, sender=got.sender_id, chat=got.chat_id)
    history = [m.text async for m in client.iter_messages(peer)]
    dialogs = [(d.id, d.message.id) async for d in client.iter_dialogs()]
    say(step="listed", history=history, dialogs=dialogs)
    edited = await client.edit_message(peer, sent.id, "edited by " + ARGS["name"])
    say(step="edited", text=edited.text)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    deleted = await client.delete_messages(peer, [sent.id])
    after = [m.text async for m in client.iter_messages(peer)]
    say(step="deleted", count=sum(d.pts_count for d in deleted), history=after)
    await client.disconnect()


asyncio.run(main())
