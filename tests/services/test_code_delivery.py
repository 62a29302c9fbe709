"""Login code delivery hooks: a real command and a real HTTP server get the code, the
log never does; failures are retried, counted and bounded."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from telesrv.config import Settings
from telesrv.services.code_delivery import (
    CODE_ENV,
    PHONE_ENV,
    CodeDelivery,
    CommandHook,
    DeliveryFailed,
    DeliveryLimits,
    WebhookHook,
    parse_command,
    warn_about_login_codes,
)
from telesrv.services.login import RandomCodeSender

PHONE = "+15550001234"
CODE = "73915"
NO_PAUSE = DeliveryLimits(retries=2, backoff=0.0)


def metric(name: str, hook: str) -> float:
    return REGISTRY.get_sample_value(name, {"hook": hook}) or 0.0


def counts(hook: str) -> tuple[float, float, float]:
    return (
        metric("telesrv_login_code_delivery_attempts_total", hook),
        metric("telesrv_login_code_delivery_failures_total", hook),
        metric("telesrv_login_codes_undelivered_total", hook),
    )


def script(tmp_path: Path, body: str) -> list[str]:
    """A Python script as the command (its path contains no shell quoting issues)."""
    path = tmp_path / "hook.py"
    path.write_text("import os, sys, pathlib\n" + body)
    return [sys.executable, str(path)]


RECORD = f"""
out = pathlib.Path(sys.argv[1])
with out.open("a") as f:
    phone, code = os.environ["{PHONE_ENV}"], os.environ["{CODE_ENV}"]
    f.write(phone + " " + code + " " + repr(sys.argv[2:]) + "\\n")
"""


@pytest.fixture
def debug_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


# -- the command ------------------------------------------------------------------------


async def test_command_gets_code_in_env_and_log_does_not(
    tmp_path: Path, debug_log: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "codes.txt"
    before = counts("command")
    delivery = CodeDelivery([CommandHook([*script(tmp_path, RECORD), str(out)], 30)], NO_PAUSE)
    sender = RandomCodeSender(delivery)
    await sender.send(PHONE[1:], CODE)
    await delivery.wait_idle()
    assert out.read_text() == f"{PHONE} {CODE} []\n"
    attempts, failures, undelivered = counts("command")
    assert (attempts - before[0], failures - before[1], undelivered - before[2]) == (1, 0, 0)
    assert CODE not in debug_log.text
    assert f"login code for {PHONE} delivered by the command hook" in debug_log.text


async def test_command_is_not_run_by_a_shell(tmp_path: Path) -> None:
    out = tmp_path / "codes.txt"
    argv = parse_command(" ".join([*script(tmp_path, RECORD), str(out), "; touch pwned $(id)"]))
    delivery = CodeDelivery([CommandHook(argv, 30)], NO_PAUSE)
    delivery.submit(PHONE, "$(touch x)")
    await delivery.wait_idle()
    # Shell words arrive as plain arguments; nothing was run or expanded.
    assert out.read_text() == f"{PHONE} $(touch x) [';', 'touch', 'pwned', '$(id)']\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["codes.txt", "hook.py"]


async def test_command_failures_are_retried_and_counted(
    tmp_path: Path, debug_log: pytest.LogCaptureFixture
) -> None:
    before = counts("command")
    delivery = CodeDelivery([CommandHook(script(tmp_path, "sys.exit(3)"), 30)], NO_PAUSE)
    delivery.submit(PHONE, CODE)
    await delivery.wait_idle()
    attempts, failures, undelivered = counts("command")
    # The first run and its two retries failed; the code is given up on once.
    assert (attempts - before[0], failures - before[1], undelivered - before[2]) == (3, 3, 1)
    assert "command hook attempt 3 of 3 failed: exit status 3" in debug_log.text
    assert f"login code for {PHONE} not delivered by the command hook" in debug_log.text
    assert CODE not in debug_log.text


async def test_command_succeeds_on_a_retry(tmp_path: Path) -> None:
    tries = tmp_path / "tries"
    out = tmp_path / "codes.txt"
    body = (
        f"t = pathlib.Path({str(tries)!r}); n = len(t.read_text()) if t.exists() else 0\n"
        "t.write_text('x' * (n + 1))\n"
        "if n < 2: sys.exit(1)\n" + RECORD
    )
    before = counts("command")
    delivery = CodeDelivery([CommandHook([*script(tmp_path, body), str(out)], 30)], NO_PAUSE)
    delivery.submit(PHONE, CODE)
    await delivery.wait_idle()
    assert out.read_text() == f"{PHONE} {CODE} []\n"
    attempts, failures, undelivered = counts("command")
    assert (attempts - before[0], failures - before[1], undelivered - before[2]) == (3, 2, 0)


async def test_command_that_hangs_is_killed(tmp_path: Path) -> None:
    hook = CommandHook(script(tmp_path, "import time\ntime.sleep(3600)"), 0.3)
    with pytest.raises(DeliveryFailed, match="killed"):
        await hook.deliver(PHONE, CODE)


async def test_command_that_does_not_exist_fails(tmp_path: Path) -> None:
    hook = CommandHook([str(tmp_path / "missing")], 30)
    with pytest.raises(DeliveryFailed, match="cannot start"):
        await hook.deliver(PHONE, CODE)


def test_command_must_parse() -> None:
    with pytest.raises(ValueError):
        parse_command("   ")
    with pytest.raises(ValueError):
        parse_command("send 'unclosed")


# -- the webhook ------------------------------------------------------------------------


class Receiver(BaseHTTPRequestHandler):
    status = 200
    received: list[tuple[str, dict[str, str], dict[str, Any]]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, dict(self.headers), json.loads(body)))
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[ThreadingHTTPServer, type[Receiver]]]:
    handler = type("Handler", (Receiver,), {"received": [], "status": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, handler
    finally:
        server.shutdown()
        server.server_close()


async def test_webhook_gets_code_as_json(
    receiver: tuple[ThreadingHTTPServer, type[Receiver]], debug_log: pytest.LogCaptureFixture
) -> None:
    server, handler = receiver
    port = server.server_address[1]
    before = counts("webhook")
    url = f"http://hook:s3cret@127.0.0.1:{port}/sms?token=abc"
    delivery = CodeDelivery([WebhookHook(url, 30)], NO_PAUSE)
    RandomCodeSender(delivery)  # (the sender hands over; the queue runs it)
    delivery.submit(PHONE, CODE)
    await delivery.wait_idle()
    [(path, headers, body)] = handler.received
    assert path == "/sms?token=abc"
    assert body == {"phone": PHONE, "code": CODE}
    assert headers["Content-Type"] == "application/json"
    assert headers["Authorization"] == "Basic aG9vazpzM2NyZXQ="  # hook:s3cret
    assert headers["Host"] == f"127.0.0.1:{port}"
    attempts, failures, undelivered = counts("webhook")
    assert (attempts - before[0], failures - before[1], undelivered - before[2]) == (1, 0, 0)
    assert CODE not in debug_log.text
    assert "s3cret" not in debug_log.text and "token=abc" not in debug_log.text


async def test_webhook_errors_are_retried_and_counted(
    receiver: tuple[ThreadingHTTPServer, type[Receiver]], debug_log: pytest.LogCaptureFixture
) -> None:
    server, handler = receiver
    handler.status = 503
    before = counts("webhook")
    delivery = CodeDelivery(
        [WebhookHook(f"http://127.0.0.1:{server.server_address[1]}/", 30)], NO_PAUSE
    )
    delivery.submit(PHONE, CODE)
    await delivery.wait_idle()
    assert len(handler.received) == 3
    attempts, failures, undelivered = counts("webhook")
    assert (attempts - before[0], failures - before[1], undelivered - before[2]) == (3, 3, 1)
    assert "HTTP status 503" in debug_log.text
    assert CODE not in debug_log.text


async def test_webhook_nobody_listening_fails() -> None:
    # A port just closed: nobody listens there.
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    port = server.server_address[1]
    server.server_close()
    with pytest.raises(DeliveryFailed):
        await WebhookHook(f"http://127.0.0.1:{port}/", 30).deliver(PHONE, CODE)


@pytest.mark.parametrize("url", ["ftp://x/", "http:///path", "http://x:99999/", "x"])
def test_webhook_url_is_checked(url: str) -> None:
    with pytest.raises(ValueError):
        WebhookHook(url, 1)
    with pytest.raises(ValueError):
        Settings(login_code_webhook=url)


# -- bounds -----------------------------------------------------------------------------


class BlockingHook:
    """A hook whose runs wait until released; counts how many run at once."""

    kind = "command"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.running = 0
        self.most = 0
        self.started = asyncio.Condition()
        self.delivered: list[str] = []

    async def deliver(self, phone: str, code: str) -> None:
        async with self.started:
            self.running += 1
            self.most = max(self.most, self.running)
            self.started.notify_all()
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        self.delivered.append(code)


async def test_concurrency_and_pending_are_bounded(debug_log: pytest.LogCaptureFixture) -> None:
    hook = BlockingHook()
    limits = DeliveryLimits(retries=0, backoff=0.0, concurrency=2, max_pending=5)
    delivery = CodeDelivery([hook], limits)
    before = counts("command")
    for i in range(5):  # at the bound: every one is kept
        delivery.submit(PHONE, f"c{i}")
    async with hook.started:
        await hook.started.wait_for(lambda: hook.running == 2)
    assert delivery.pending == 5
    delivery.submit(PHONE, "c5")  # one past it: dropped, counted
    assert delivery.pending == 5
    assert counts("command")[2] - before[2] == 1
    assert "5 deliveries already pending" in debug_log.text
    hook.release.set()
    await delivery.wait_idle()
    assert sorted(hook.delivered) == ["c0", "c1", "c2", "c3", "c4"]
    assert hook.most == 2  # never more than the concurrency at once


async def test_close_stops_running_deliveries() -> None:
    hook = BlockingHook()
    delivery = CodeDelivery([hook], NO_PAUSE)
    delivery.submit(PHONE, CODE)
    async with hook.started:
        await hook.started.wait_for(lambda: hook.running == 1)
    await delivery.close()
    assert delivery.pending == 0 and hook.running == 0 and hook.delivered == []


# -- the log ----------------------------------------------------------------------------


async def test_codes_reach_the_log_only_when_asked(debug_log: pytest.LogCaptureFixture) -> None:
    await RandomCodeSender().send(PHONE[1:], CODE)
    assert CODE not in debug_log.text
    assert f"login code for {PHONE} issued" in debug_log.text
    debug_log.clear()
    await RandomCodeSender(log_codes=True).send(PHONE[1:], CODE)
    [record] = [r for r in debug_log.records if CODE in r.getMessage()]
    assert record.levelno == logging.DEBUG


# -- the warnings at start ----------------------------------------------------------------


def levels(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [r.levelno for r in caplog.records]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.0.1", "::1", "localhost", "[::1]"])
def test_dev_code_on_loopback_warns(host: str, caplog: pytest.LogCaptureFixture) -> None:
    warn_about_login_codes(Settings(dev_login_code="1", listen_host=host, ws_listen_host=host))
    assert levels(caplog) == [logging.WARNING]
    assert "--dev-login-code is set" in caplog.text


@pytest.mark.parametrize(
    ("host", "ws_host"),
    [("0.0.0.0", "127.0.0.1"), ("::", "::1"), ("127.0.0.1", "0.0.0.0"), ("example.org", None)],
)
def test_dev_code_beyond_loopback_is_loud(
    host: str, ws_host: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        dev_login_code="1",
        listen_host=host,
        ws_listen_host=ws_host,
        ws_listen_port=None if ws_host is None else 8444,
    )
    warn_about_login_codes(settings)
    assert len(caplog.records) >= 3 and set(levels(caplog)) == {logging.ERROR}
    assert "ANYONE WHO CAN REACH IT CAN SIGN IN AS ANY USER" in caplog.text


def test_no_hook_warns(caplog: pytest.LogCaptureFixture) -> None:
    warn_about_login_codes(Settings())
    assert levels(caplog) == [logging.WARNING]
    assert "no login code delivery hook" in caplog.text
    caplog.clear()
    warn_about_login_codes(Settings(login_code_command="true"))
    assert caplog.records == []
