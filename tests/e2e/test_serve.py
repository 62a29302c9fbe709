"""The real command line: `python -m telesrv serve` in a subprocess, Telethon against it."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

from gateway.ws_client import ObfuscatedIntermediate, WsClient, req_pq_packet, res_pq_of
from telethon import TelegramClient, functions, types
from telethon.crypto import rsa as telethon_rsa
from telethon.network import ConnectionTcpFull
from telethon.sessions import StringSession

READY = "telesrv listening on "
WS_READY = "telesrv websocket listening on "
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_ready(process: asyncio.subprocess.Process, log_path: Path) -> str:
    """The ready line; fails if the process exits or stays silent too long."""
    return (await lines_until_ready(process, log_path))[-1]


def ws_port_in(lines: list[str]) -> int:
    """The WebSocket port announced before the ready line."""
    [announced] = [line for line in lines if line.startswith(WS_READY)]
    host, _, port = announced.removeprefix(WS_READY).rpartition(":")
    assert host == "127.0.0.1"
    return int(port)


async def lines_until_ready(process: asyncio.subprocess.Process, log_path: Path) -> list[str]:
    """Every line printed up to the ready line (the last)."""
    assert process.stdout is not None
    seen: list[str] = []
    async with asyncio.timeout(START_TIMEOUT):
        while True:
            raw = await process.stdout.readline()
            if not raw:
                log = log_path.read_text(errors="replace")[-4000:]
                raise AssertionError(f"telesrv exited before it was ready: {seen}\n{log}")
            line = raw.decode().rstrip("\n")
            seen.append(line)
            if line.startswith(READY):
                return seen


async def test_serve_accepts_telethon_and_stops_on_sigterm(
    tmp_path: Path, database_url: str, redis_url: str, redis: object
) -> None:
    port = free_port()
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TELESRV_")}
    log_path = tmp_path / "stderr.log"
    with open(log_path, "wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "telesrv", "serve",
            "--listen", f"127.0.0.1:{port}",
            "--ws-listen", "127.0.0.1:0",
            "--data-dir", str(data_dir),
            "--database-url", database_url,
            "--redis-url", redis_url,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env=env,
        )  # fmt: skip
    try:
        lines = await lines_until_ready(process, log_path)
        assert lines[-1] == f"{READY}127.0.0.1:{port}"
        # A browser's first message (obfuscated2 header and req_pq_multi) is answered
        # in one message on the WebSocket port it printed.
        ws = await WsClient.open("127.0.0.1", ws_port_in(lines), "/apiws")
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

        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(STOP_TIMEOUT):
            code = await process.wait()
        assert code == 0, log_path.read_text(errors="replace")[-4000:]
        # It said at start which TL/MTProto path it ran (compiled or pure, and why).
        assert "TL/MTProto path: " in log_path.read_text(errors="replace")
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
