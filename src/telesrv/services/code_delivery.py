"""Getting a login code to its person: the operator's hooks (a command, a webhook).

auth.sendCode stores the code and answers at once; each configured hook then runs in
the background with a timeout and a few retries with growing pauses. A hook that
fails is counted (``telesrv_login_code_delivery_*``) and logged by kind, never with
the code or the webhook's address (which may carry a token).

How many hooks run at once, and how many deliveries may wait for their turn, is
bounded: auth.sendCode needs no login, so whoever can connect can ask for codes of
many phones (the per-phone limit does not help there), and an unbounded queue of
commands would be a way to fork the host to death. A delivery past the bound is
dropped and counted as undelivered.

The command gets the phone and the code in its environment, not its arguments: the
argument list of a process is readable by every user of the host, its environment
only by its owner. It is started without a shell, so nothing in a phone number or a
code is ever interpreted.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import shlex
import signal
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote, urlsplit

from telesrv.config import LOGIN_CODE_ENV, LOGIN_PHONE_ENV, Settings
from telesrv.services.metrics import (
    LOGIN_CODE_DELIVERY_ATTEMPTS,
    LOGIN_CODE_DELIVERY_FAILURES,
    LOGIN_CODE_UNDELIVERED,
)

log = logging.getLogger(__name__)

PHONE_ENV = LOGIN_PHONE_ENV
CODE_ENV = LOGIN_CODE_ENV
# Variables of the server's own configuration (the database URL may hold a password,
# the dev login code is a secret too) are not handed on to the command.
_OWN_ENV_PREFIX = "TELESRV_"
# The most of a webhook's answer read: its status line (the rest is not looked at).
MAX_STATUS_LINE = 1024


class DeliveryFailed(Exception):
    """One attempt of a hook did not deliver; the message says why (never the code)."""


class DeliveryHook(Protocol):
    kind: str  # the metric label and the name in the log: "command" or "webhook"

    async def deliver(self, phone: str, code: str) -> None:
        """Deliver or raise; ``phone`` is in international form with its '+'."""
        ...


def parse_command(command: str) -> list[str]:
    """The argument list of --login-code-command (split as a POSIX shell would, but
    never run by one); ValueError when it does not parse or is empty."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("the login code command is empty")
    return argv


def check_webhook_url(url: str) -> None:
    """ValueError unless ``url`` is an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("the login code webhook must be an http:// or https:// URL with a host")
    _ = parts.port  # raises ValueError on a bad port


class CommandHook:
    """Runs the operator's command once per attempt, with the phone and code in
    TELESRV_LOGIN_PHONE and TELESRV_LOGIN_CODE; exit status 0 means delivered."""

    kind = "command"

    def __init__(self, argv: Sequence[str], timeout: float) -> None:
        self.argv = list(argv)
        self.timeout = timeout

    async def deliver(self, phone: str, code: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN_ENV_PREFIX)}
        env[PHONE_ENV] = phone
        env[CODE_ENV] = code
        try:
            # Its own session (process group): a timed-out script is killed together
            # with whatever it started. Its stderr is the server's.
            process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            raise DeliveryFailed(f"cannot start {self.argv[0]!r}: {e.strerror or e}") from None
        try:
            async with asyncio.timeout(self.timeout):
                status = await process.wait()
        except BaseException as e:
            _kill_group(process)
            with contextlib.suppress(ProcessLookupError):
                await process.wait()
            if isinstance(e, TimeoutError):
                raise DeliveryFailed(f"no exit within {self.timeout:g}s; killed") from None
            raise
        if status != 0:
            raise DeliveryFailed(f"exit status {status}")


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


class WebhookHook:
    """POSTs ``{"phone": ..., "code": ...}`` as JSON to the operator's URL once per
    attempt; any 2xx answer means delivered. User and password in the URL are sent
    as HTTP basic authentication."""

    kind = "webhook"

    def __init__(self, url: str, timeout: float) -> None:
        check_webhook_url(url)
        parts = urlsplit(url)
        self.timeout = timeout
        self._https = parts.scheme == "https"
        assert parts.hostname is not None
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        default_port = self._port == (443 if self._https else 80)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_header = host if default_port else f"{host}:{self._port}"
        self._authorization: str | None = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            self._authorization = "Basic " + base64.b64encode(pair.encode()).decode()

    def request(self, phone: str, code: str) -> bytes:
        body = json.dumps({"phone": phone, "code": code}).encode()
        headers = [
            f"POST {self._target} HTTP/1.1",
            f"Host: {self._host_header}",
            "User-Agent: telesrv",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            "Connection: close",
        ]
        if self._authorization is not None:
            headers.append(f"Authorization: {self._authorization}")
        return ("\r\n".join(headers) + "\r\n\r\n").encode() + body

    async def deliver(self, phone: str, code: str) -> None:
        tls = ssl.create_default_context() if self._https else None
        try:
            async with asyncio.timeout(self.timeout):
                reader, writer = await asyncio.open_connection(
                    self._host, self._port, ssl=tls, limit=MAX_STATUS_LINE
                )
                try:
                    writer.write(self.request(phone, code))
                    await writer.drain()
                    line = await reader.readline()
                finally:
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()
        except TimeoutError:
            raise DeliveryFailed(f"no answer within {self.timeout:g}s") from None
        except (OSError, ValueError, asyncio.LimitOverrunError) as e:
            raise DeliveryFailed(f"{type(e).__name__}: {e}") from None
        fields = line.split(None, 2)
        if len(fields) < 2 or not fields[0].startswith(b"HTTP/") or not fields[1].isdigit():
            raise DeliveryFailed("the answer is not HTTP")
        status = int(fields[1])
        if not 200 <= status < 300:
            raise DeliveryFailed(f"HTTP status {status}")


@dataclass(frozen=True)
class DeliveryLimits:
    retries: int = 2  # attempts after the first that failed
    backoff: float = 1.0  # seconds before the first retry, doubled for each further one
    concurrency: int = 4  # hook runs at a time (processes or requests)
    max_pending: int = 1000  # deliveries waiting or running; more are dropped


class CodeDelivery:
    """Runs the hooks for each code off the request path, within ``DeliveryLimits``."""

    def __init__(self, hooks: Sequence[DeliveryHook], limits: DeliveryLimits | None = None):
        self.hooks = list(hooks)
        self.limits = limits or DeliveryLimits()
        self._slots = asyncio.Semaphore(self.limits.concurrency)
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        """Deliveries waiting for a slot, running, or pausing before a retry."""
        return len(self._tasks)

    def submit(self, phone: str, code: str) -> None:
        """Start delivering ``code`` by every hook; returns at once."""
        loop = asyncio.get_running_loop()
        for hook in self.hooks:
            if len(self._tasks) >= self.limits.max_pending:
                LOGIN_CODE_UNDELIVERED.labels(hook.kind).inc()
                log.warning(
                    "login code for %s dropped by the %s hook: %d deliveries already pending",
                    phone,
                    hook.kind,
                    len(self._tasks),
                )
                continue
            task = loop.create_task(self._deliver(hook, phone, code))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _deliver(self, hook: DeliveryHook, phone: str, code: str) -> None:
        attempts = self.limits.retries + 1
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                await asyncio.sleep(self.limits.backoff * 2 ** (attempt - 2))
            LOGIN_CODE_DELIVERY_ATTEMPTS.labels(hook.kind).inc()
            try:
                async with self._slots:
                    await hook.deliver(phone, code)
            except Exception as e:
                LOGIN_CODE_DELIVERY_FAILURES.labels(hook.kind).inc()
                reason = str(e) if isinstance(e, DeliveryFailed) else type(e).__name__
                log.warning(
                    "login code for %s: %s hook attempt %d of %d failed: %s",
                    phone,
                    hook.kind,
                    attempt,
                    attempts,
                    reason,
                )
                continue
            log.info("login code for %s delivered by the %s hook", phone, hook.kind)
            return
        LOGIN_CODE_UNDELIVERED.labels(hook.kind).inc()
        log.error("login code for %s not delivered by the %s hook", phone, hook.kind)

    async def wait_idle(self) -> None:
        """Until every delivery submitted so far has ended (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Stop the deliveries still running (the server stops)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# The banner when every login code is the same and anyone on the network may connect.
_EXPOSED_DEV_CODE_BANNER = (
    "*" * 72,
    "--dev-login-code is set and the server listens beyond loopback (%s):",
    "ANYONE WHO CAN REACH IT CAN SIGN IN AS ANY USER with the development code.",
    "Use it on 127.0.0.1 only, or drop it and configure --login-code-command or",
    "--login-code-webhook.",
    "*" * 72,
)


def warn_about_login_codes(settings: Settings) -> None:
    """At start: say how login codes reach people, and loudly when that is unsafe."""
    if settings.dev_login_code is not None:
        if settings.listens_beyond_loopback:
            listeners = ", ".join(x for x in (settings.listen, settings.ws_listen) if x)
            for line in _EXPOSED_DEV_CODE_BANNER:
                log.error(line.replace("%s", listeners))
        else:
            log.warning(
                "--dev-login-code is set: every login code is the same; for development "
                "and tests only"
            )
        if settings.login_code_command is not None or settings.login_code_webhook is not None:
            log.warning("--dev-login-code is set: the login code delivery hooks are not used")
        return
    if settings.login_code_command is None and settings.login_code_webhook is None:
        log.warning(
            "no login code delivery hook (--login-code-command, --login-code-webhook): "
            "codes reach people only through `telesrv codes PHONE`"
        )
