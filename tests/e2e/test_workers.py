"""`telesrv serve --workers 2`: two processes on one port, found by each other in Redis."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from gateway.ws_client import ObfuscatedIntermediate, WsClient, req_pq_packet, res_pq_of
from serve_process import STOP_TIMEOUT, dev_flags, serve_args, start
from telethon import TelegramClient, events, functions
from telethon.crypto import rsa as telethon_rsa
from telethon.network import ConnectionTcpFull
from telethon.sessions import StringSession

from telesrv.store import cluster as cluster_store

from .conftest import API_HASH, API_ID

CODE = "12345"
GUARD = 30.0  # only against a hang
_phones = itertools.count(15559300)


async def test_two_workers_share_one_port_and_push_to_each_other(
    tmp_path: Path, database_url: str, redis_url: str, redis: Any
) -> None:
    data_dir = tmp_path / "data"
    args = serve_args(
        data_dir,
        "--workers", "2",
        *dev_flags(CODE),
        database_url=database_url,
        redis_url=redis_url,
        ws_listen="127.0.0.1:0",
    )  # fmt: skip
    serve = await start(args, tmp_path / "stderr.log")
    clients: list[TelegramClient] = []
    try:
        port = serve.port
        # The WebSocket port (0: picked by the first process) is shared the same way:
        # every connection is served, whichever process it lands on.
        ws_port = serve.ws_port
        for nonce in range(6):
            ws = await WsClient.open("127.0.0.1", ws_port, "/apiws")
            try:
                transport = ObfuscatedIntermediate()
                ws.send(transport.header + transport.encode(req_pq_packet(nonce)))
                assert res_pq_of(transport.decode_one(await ws.recv_message())).nonce == nonce
            finally:
                await ws.close()
        # Both processes announced themselves before the ready line.
        assert await redis.zcard(cluster_store.PROCS_KEY) == 2
        telethon_rsa.add_key((data_dir / "server_key.pub.pem").read_text(), old=False)

        async def signed_in() -> TelegramClient:
            client = TelegramClient(
                StringSession(), API_ID, API_HASH, connection=ConnectionTcpFull,
                receive_updates=True, request_retries=2, connection_retries=5, timeout=10,
            )  # fmt: skip
            client.session.set_dc(2, "127.0.0.1", port)
            clients.append(client)
            await client.start(phone=f"+{next(_phones)}", code_callback=lambda: CODE)
            await client.get_dialogs()
            return client

        # Several pairs: whichever process each connection lands on, pushes arrive.
        pairs = [(await signed_in(), await signed_in()) for _ in range(3)]
        for sender, receiver in pairs:
            me = await receiver.get_me()
            await receiver(functions.account.UpdateUsernameRequest(f"w{me.id}"))
            async with asyncio.timeout(GUARD):
                while not await redis.zcard(cluster_store.holders_key(me.id)):
                    await asyncio.sleep(0.01)
            got: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

            async def on_message(e: Any, got: asyncio.Future[Any] = got) -> None:
                if not got.done():
                    got.set_result(e.message.text)

            receiver.add_event_handler(on_message, events.NewMessage(incoming=True))
            await sender.send_message(await sender.get_input_entity(f"w{me.id}"), "hi")
            assert await asyncio.wait_for(got, GUARD) == "hi"
        for client in clients:
            await client.disconnect()

        await serve.stop(STOP_TIMEOUT * 2)
        # Both left the live set on the way out.
        assert await redis.zcard(cluster_store.PROCS_KEY) == 0
    finally:
        for client in clients:
            await client.disconnect()
        await serve.kill()
