"""The real command line: `python -m telesrv serve` in a subprocess, Telethon against it."""

from __future__ import annotations

from pathlib import Path

from gateway.ws_client import ObfuscatedIntermediate, WsClient, req_pq_packet, res_pq_of
from serve_process import READY, free_port, serve_args, serving
from telethon import TelegramClient, functions, types
from telethon.crypto import rsa as telethon_rsa
from telethon.network import ConnectionTcpFull
from telethon.sessions import StringSession


async def test_serve_accepts_telethon_and_stops_on_sigterm(
    tmp_path: Path, database_url: str, redis_url: str, redis: object
) -> None:
    port = free_port()
    data_dir = tmp_path / "data"
    args = serve_args(
        data_dir,
        database_url=database_url,
        redis_url=redis_url,
        listen=f"127.0.0.1:{port}",
        ws_listen="127.0.0.1:0",
    )
    async with serving(args, tmp_path / "stderr.log") as serve:
        assert serve.lines[-1] == f"{READY}127.0.0.1:{port}"
        # A browser's first message (obfuscated2 header and req_pq_multi) is answered
        # in one message on the WebSocket port it printed.
        ws = await WsClient.open("127.0.0.1", serve.ws_port, "/apiws")
        try:
            transport = ObfuscatedIntermediate()
            ws.send(transport.header + transport.encode(req_pq_packet(11)))
            assert res_pq_of(transport.decode_one(await ws.recv_message())).nonce == 11
        finally:
            await ws.close()

        pem_path = data_dir / "server_key.pub.pem"
        pem = pem_path.read_text()
        assert pem.startswith("-----BEGIN RSA PUBLIC KEY-----")
        telethon_rsa.add_key(pem, old=False)

        client = TelegramClient(
            StringSession(), 1, "0" * 32, connection=ConnectionTcpFull,
            receive_updates=False, request_retries=1, connection_retries=5, timeout=10,
        )  # fmt: skip
        client.session.set_dc(2, "127.0.0.1", port)
        try:
            await client.connect()
            config = await client(functions.help.GetConfigRequest())
            assert isinstance(config, types.Config)
            assert [(o.ip_address, o.port) for o in config.dc_options] == [("127.0.0.1", port)]
        finally:
            await client.disconnect()

        await serve.stop()
        # It said at start which TL/MTProto path it ran (compiled or pure, and why).
        assert "TL/MTProto path: " in serve.log()
