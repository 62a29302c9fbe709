"""Client libraries driven in processes of their own (older Python clients in their
venvs, Node clients, a browser): starting one, reading its JSON steps, the Telethon
1.45 user it chats with, and what the server log must show after."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from telethon import TelegramClient, events, functions

from telesrv.mtproto.rsa import rsa_fingerprint

from .conftest import ClientFactory, RunningServer

CODE = "12345"


class Driver:
    """A client driver process: JSON steps on stdout, logs on stderr.

    stderr is read as it comes (its tail kept): a driver that logs more than a pipe
    holds would otherwise block on the write and look like a hang.
    """

    STDERR_KEPT = 1 << 20

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._stderr = bytearray()
        self._drain = asyncio.ensure_future(self._read_stderr())

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(1 << 16):
            self._stderr += chunk
            if len(self._stderr) > self.STDERR_KEPT:
                del self._stderr[: -self.STDERR_KEPT // 2]

    async def stderr(self, timeout: float = 30) -> str:
        """What the driver wrote on stderr, once it has closed it (its tail if long)."""
        try:
            await asyncio.wait_for(asyncio.shield(self._drain), timeout)
        except TimeoutError:
            pass  # still open: what came so far
        return self._stderr.decode(errors="replace")

    async def close(self) -> None:
        """Kill the driver if it still runs and stop reading it. Its pipes are read to
        the end first: asyncio's wait() does not return while one holds unread data."""
        if self.proc.returncode is None:
            self.proc.kill()
        if self.proc.stdout is not None:
            with contextlib.suppress(TimeoutError):
                while await asyncio.wait_for(self.proc.stdout.read(1 << 16), 30):
                    pass
        await self.stderr()
        self._drain.cancel()
        await asyncio.wait_for(self.proc.wait(), 30)

    async def step(self, name: str, timeout: float = 60) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            try:
                line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            except TimeoutError:
                tail = self._stderr.decode(errors="replace")[-4000:]
                raise AssertionError(f"no {name!r} within {timeout} s; stderr:\n{tail}") from None
            if not line:
                err = await self.stderr()
                raise AssertionError(f"driver ended before {name!r}:\n{err[-12000:]}")
            if line.startswith(b"{"):
                break  # the libraries print banners of their own
        data: dict[str, Any] = json.loads(line)
        assert data["step"] == name, data
        return data


async def start_driver(
    program: Sequence[str], args: dict[str, Any], *, stdin: int = asyncio.subprocess.PIPE
) -> Driver:
    """``program`` with ``args`` as its JSON argument. A Python driver gets an environment
    without ours (its venv, not this one, must provide its packages)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = await asyncio.create_subprocess_exec(
        *program,
        json.dumps(args),
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    return Driver(proc)


def server_key_args(server: RunningServer) -> dict[str, Any]:
    """The server's RSA key in the forms the drivers take."""
    key = server.resources.server_key
    return {
        "n": str(key.n),
        "e": str(key.e),
        "fingerprint": str(rsa_fingerprint(key.n, key.e)),
        "pem": key.public_pem,
    }


@dataclass
class ChatPeer:
    """The Telethon 1.45 user a driven client chats with."""

    client: TelegramClient
    me: Any
    username: str
    incoming: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    edits: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)


async def chat_peer(make_client: ClientFactory, phone: str, prefix: str) -> ChatPeer:
    """A signed-in Telethon user named ``prefix`` + its id, collecting what it receives."""
    tele = make_client(receive_updates=True)
    await tele.start(phone=phone, code_callback=lambda: CODE)
    me = await tele.get_me()
    username = f"{prefix}{me.id}"
    await tele(functions.account.UpdateUsernameRequest(username))
    peer = ChatPeer(tele, me, username)
    tele.add_event_handler(peer.incoming.put, events.NewMessage(incoming=True))
    tele.add_event_handler(peer.edits.put, events.MessageEdited(incoming=True))
    return peer


async def exchange_texts(driver: Driver, peer: ChatPeer, name: str, ready: dict[str, Any]) -> None:
    """The signed-in client (its "ready" step read) sends "hello from NAME", which the
    Telethon user receives live; the Telethon user answers, and the client receives that
    live."""
    sent = await driver.step("sent")
    assert sent["text"] == f"hello from {name}" and sent["outgoing"]
    assert sent["chat"] == peer.me.id
    event = await asyncio.wait_for(peer.incoming.get(), 30)
    assert event.message.text == f"hello from {name}"
    assert event.message.sender_id == ready["me"]

    await peer.client.get_dialogs()  # the sender's access hash, for the reply
    await peer.client.send_message(ready["me"], "hello from telethon")
    received = await driver.step("received")
    assert received["text"] == "hello from telethon"
    assert received["sender"] == peer.me.id == received["chat"]


def server_log(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("telesrv")]


def assert_served(messages: list[str], *declared_as: str) -> None:
    """The log names the layer (and what else is given) the client declared, and no
    request of it failed to decode."""
    declared = [m for m in messages if "declared layer" in m]
    assert any(all(part in m for part in declared_as) for m in declared), declared
    invalid = [m for m in messages if "INPUT_CONSTRUCTOR_INVALID" in m]
    assert not invalid, invalid


@dataclass(frozen=True)
class DroppedZeroByte:
    """How a client library reports a key exchange it failed because it dropped the
    leading zero byte of the new key (about one key in 256); it then runs the exchange
    again, and the user sees a short delay.

    ``error`` is the error's text. Each failure writes one line holding both ``error``
    and ``counted_by``; each complaint line it adds holds ``error`` itself, or (with
    ``error_below`` set) has it on the next line of the log.
    """

    error: str
    counted_by: str
    complaints_each: int
    error_below: bool = False


# "Authorization error: ...", then "unhandled error: ..." once the client is connected.
MTCUTE_DROPPED_ZERO = DroppedZeroByte(
    "Step 4: invalid nonce hash from server", "Authorization error:", complaints_each=2
)
# "[ERROR] - [WebSocket connection failed attempt: N]", then the error and its stack.
GRAMJS_DROPPED_ZERO = DroppedZeroByte(
    "Step 3 invalid new nonce hash", "SecurityError:", complaints_each=1, error_below=True
)


def unexplained_complaints(
    complaints: list[str], stderr: str, messages: list[str], known: DroppedZeroByte
) -> list[str]:
    """``complaints`` less those of key exchanges failed for a dropped zero byte.

    There may be no more such failures than keys the server logged as beginning with a
    zero byte, so a client that fails its check for any other reason still fails the
    test, and no more lines are let through than those failures write.
    """
    lines = stderr.splitlines()
    failures = sum(known.error in line and known.counted_by in line for line in lines)
    zero_keys = sum("begins with a zero byte" in m for m in messages)
    assert failures <= zero_keys, (
        f"{failures} key exchanges failed the client's check, "
        f"only {zero_keys} keys began with a zero byte"
    )
    explained: list[str] = []
    for at, line in enumerate(lines):
        below = lines[at + 1] if at + 1 < len(lines) else ""
        if known.error in line or (known.error_below and known.error in below):
            explained.append(line)
    left = list(complaints)
    allowed = failures * known.complaints_each
    for line in explained:
        if allowed and line in left:
            left.remove(line)
            allowed -= 1
    return left
