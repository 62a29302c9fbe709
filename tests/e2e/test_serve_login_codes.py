"""Login codes through the real command line: `telesrv serve --login-code-command`
hands each code to the operator's command, Telethon signs in with what the command
got, and the server's log (at DEBUG) never holds the code; the per-address limit
holds; `--dev-login-code` on an
address beyond loopback starts with a loud banner."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest
from serve_process import serve_args, serving
from telethon import TelegramClient, errors, functions
from telethon.crypto import rsa as telethon_rsa
from telethon.network import ConnectionTcpFull
from telethon.sessions import StringSession
from telethon.tl.types import CodeSettings

PHONE = "+15550880001"
# Generous: the hook runs in the background after auth.sendCode answered.
HOOK_DEADLINE = 30.0

HOOK = """
import os, sys, pathlib
line = os.environ["TELESRV_LOGIN_PHONE"] + " " + os.environ["TELESRV_LOGIN_CODE"] + "\\n"
with pathlib.Path(sys.argv[1]).open("a") as f:
    f.write(line)
"""


def args_for(
    tmp_path: Path, database_url: str, redis_url: str, *flags: str, listen: str = "127.0.0.1:0"
) -> list[str]:
    """Logged at debug, so that a code would show in the log if anything logged it."""
    return serve_args(
        tmp_path / "data",
        *flags,
        database_url=database_url,
        redis_url=redis_url,
        listen=listen,
        before=("--log-level", "debug"),
    )


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
    args = args_for(
        tmp_path, database_url, redis_url,
        "--auto-register",
        "--login-code-command", f"{sys.executable} {hook} {out}",
        "--login-codes-per-ip", "2",
    )  # fmt: skip
    async with serving(args, tmp_path / "stderr.log") as serve:
        telethon_rsa.add_key((tmp_path / "data" / "server_key.pub.pem").read_text(), old=False)
        client = TelegramClient(
            StringSession(), 1, "0" * 32, connection=ConnectionTcpFull,
            receive_updates=False, request_retries=1, connection_retries=5, timeout=10,
        )  # fmt: skip
        client.session.set_dc(2, "127.0.0.1", serve.port)
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
        await serve.stop()
        log_text = serve.log()
        assert "delivered by the command hook" in log_text
        # The phone had no account: auto-registration made it, a sign-up.
        assert f"sign_up ok user={me.id}" in log_text
        for code in codes:
            assert not mentions(log_text, code), log_text[-4000:]


async def test_dev_code_beyond_loopback_starts_with_a_banner(
    tmp_path: Path, database_url: str, redis_url: str, redis: object
) -> None:
    args = args_for(
        tmp_path, database_url, redis_url, "--dev-login-code", "11111", listen="0.0.0.0:0"
    )
    async with serving(args, tmp_path / "stderr.log") as serve:
        await serve.stop()
        errors = [line for line in serve.log().splitlines() if " ERROR telesrv." in line]
        assert len(errors) >= 3
        assert any("ANYONE WHO CAN REACH IT CAN SIGN IN AS ANY USER" in e for e in errors)
        assert any("0.0.0.0:0" in e for e in errors)
