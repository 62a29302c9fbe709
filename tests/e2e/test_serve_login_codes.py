"""Login codes through the real command line: `telesrv serve --login-code-command`
hands each code to the operator's command, Telethon signs in with what the command
got, and the server's log (at DEBUG) never holds the code; the per-address limit
holds; `--dev-login-code` on an
address beyond loopback starts with a loud banner."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import pytest
from telethon import TelegramClient, errors, functions
from telethon.crypto import rsa as telethon_rsa
from telethon.network import ConnectionTcpFull
from telethon.sessions import StringSession
from telethon.tl.types import CodeSettings

from .test_serve import READY, STOP_TIMEOUT, free_port, lines_until_ready

PHONE = "+15550880001"
# Generous: the hook runs in the background after auth.sendCode answered.
HOOK_DEADLINE = 30.0

HOOK = """
import os, sys, pathlib
line = os.environ["TELESRV_LOGIN_PHONE"] + " " + os.environ["TELESRV_LOGIN_CODE"] + "\\n"
with pathlib.Path(sys.argv[1]).open("a") as f:
    f.write(line)
"""


async def start(
    tmp_path: Path, database_url: str, redis_url: str, *args: str
) -> tuple[asyncio.subprocess.Process, Path, list[str], int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TELESRV_")}
    log_path = tmp_path / "stderr.log"
    with open(log_path, "wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "telesrv", "--log-level", "debug", "serve",
            "--ws-listen", "off",
            "--data-dir", str(tmp_path / "data"),
            "--database-url", database_url,
            "--redis-url", redis_url,
            *args,
            *(() if "--listen" in args else ("--listen", f"127.0.0.1:{port}")),
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env=env,
        )  # fmt: skip
    lines = await lines_until_ready(process, log_path)
    port = int(lines[-1].removeprefix(READY).rpartition(":")[2])
    return process, log_path, lines, port


async def stop(process: asyncio.subprocess.Process, log_path: Path) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(STOP_TIMEOUT):
            code = await process.wait()
        assert code == 0, log_path.read_text(errors="replace")[-4000:]


async def code_from(out: Path, count: int) -> str:
    """The phone and code of the hook's `count`-th run, once it wrote them."""
    async with asyncio.timeout(HOOK_DEADLINE):
        while True:
            lines = out.read_text().splitlines() if out.exists() else []
            if len(lines) >= count:
                phone, code = lines[count - 1].split()
                assert phone == PHONE
                return code
            await asyncio.sleep(0.05)


def mentions(log_text: str, code: str) -> bool:
    """Whether the code stands in the log as a number of its own."""
    return re.search(rf"(?<!\d){code}(?!\d)", log_text) is not None


async def test_the_command_gets_the_code_and_the_log_does_not(
    tmp_path: Path, database_url: str, redis_url: str, redis: object
) -> None:
    hook = tmp_path / "hook.py"
    hook.write_text(HOOK)
    out = tmp_path / "codes.txt"
    process, log_path, _, port = await start(
        tmp_path, database_url, redis_url,
        "--auto-register",
        "--login-code-command", f"{sys.executable} {hook} {out}",
        "--login-codes-per-ip", "2",
    )  # fmt: skip
    try:
        telethon_rsa.add_key((tmp_path / "data" / "server_key.pub.pem").read_text(), old=False)
        client = TelegramClient(
            StringSession(), 1, "0" * 32, connection=ConnectionTcpFull,
            receive_updates=False, request_retries=1, connection_retries=5, timeout=10,
        )  # fmt: skip
        client.session.set_dc(2, "127.0.0.1", port)
        codes: list[str] = []
        try:
            await client.connect()
            sent = await client.send_code_request(PHONE)
            codes.append(await code_from(out, 1))
            # A resent code reaches the command too (and the first stops working).
            sent = await client(functions.auth.ResendCodeRequest(PHONE, sent.phone_code_hash))
            codes.append(await code_from(out, 2))
            me = await client.sign_in(PHONE, codes[-1], phone_code_hash=sent.phone_code_hash)
            assert me.phone == PHONE[1:]
            # Two codes from this address were the limit: a third, for another phone, waits.
            with pytest.raises(errors.FloodWaitError):
                await client(
                    functions.auth.SendCodeRequest("+15550880002", 1, "0" * 32, CodeSettings())
                )
        finally:
            await client.disconnect()
        await stop(process, log_path)
        log_text = log_path.read_text(errors="replace")
        assert "delivered by the command hook" in log_text
        # The phone had no account: auto-registration made it, a sign-up.
        assert f"sign_up ok user={me.id}" in log_text
        for code in codes:
            assert not mentions(log_text, code), log_text[-4000:]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_dev_code_beyond_loopback_starts_with_a_banner(
    tmp_path: Path, database_url: str, redis_url: str, redis: object
) -> None:
    process, log_path, _, _ = await start(
        tmp_path, database_url, redis_url,
        "--dev-login-code", "11111",
        "--listen", "0.0.0.0:0",
    )  # fmt: skip
    try:
        await stop(process, log_path)
        errors = [line for line in log_path.read_text().splitlines() if " ERROR telesrv." in line]
        assert len(errors) >= 3
        assert any("ANYONE WHO CAN REACH IT CAN SIGN IN AS ANY USER" in e for e in errors)
        assert any("0.0.0.0:0" in e for e in errors)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
