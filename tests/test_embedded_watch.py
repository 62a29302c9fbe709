"""The embedded databases watched while the server runs, against real processes:

- the embedded Redis killed (SIGKILL): one line says it is down, it is started again,
  one line says it is back, /healthz is 200 again, sends work, and a send retried
  across the restart takes no pts;
- the embedded Redis stopped (SIGSTOP, so it cannot be replaced): /healthz is 503
  with the reason until it continues;
- the process owning the embedded Redis stops while another runs on attached to it:
  that one takes the server over and starts it again;
- the embedded PostgreSQL killed: `telesrv serve` stops with one clear line and a
  failing exit status, and does not fail again trying to stop the dead server.

Nothing asserts on elapsed time; GUARD only turns a hang into a failure."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from e2e.conftest import RunningServer, e2e_settings
from e2e.test_metrics import http_get
from serve_process import serve_args, start
from telethon.crypto import rsa as telethon_rsa
from test_faults import client_for, input_peer, send, sign_in

from telesrv.app import open_resources
from telesrv.store.embedded import EmbeddedRedis
from telesrv.store.embedded_watch import EmbeddedWatch
from telesrv.wiring import build_server

GUARD = 60.0  # only against a hang
WATCH = "telesrv.store.embedded_watch"


async def until(condition: Callable[[], Any], what: str) -> None:
    try:
        async with asyncio.timeout(GUARD):
            while not await condition():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


def lines(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


@pytest.fixture
async def served(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[RunningServer, int]]:
    """A server on the test PostgreSQL and an embedded Redis of its own; its metrics port."""
    settings = e2e_settings(tmp_path / "data", database_url, "unused").replace(redis_url=None)
    async with open_resources(settings) as resources:
        built = build_server(settings, resources)
        host, port = await built.start(settings.listen_host, settings.listen_port)
        _, metrics_port = await built.start_metrics("127.0.0.1", 0)
        telethon_rsa.add_key(resources.server_key.public_pem, old=False)
        try:
            yield RunningServer(settings, resources, built, host, port), metrics_port
        finally:
            await built.stop()


def redis_pid(server: RunningServer) -> int:
    return int((server.settings.embedded_redis_dir / "redis.pid").read_text())


async def test_a_killed_embedded_redis_is_started_again(
    served: tuple[RunningServer, int], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    server, metrics_port = served
    assert server.resources.watch is not None
    alice = await sign_in(client_for(server.port))
    bob = await sign_in(client_for(server.port))
    try:
        peer = await input_peer(alice, bob)
        first = await send(alice, peer, "before", 9001)
        before = len(caplog.records)
        old = redis_pid(server)
        os.kill(old, signal.SIGKILL)

        async def back() -> bool:
            return bool(lines(caplog, "embedded Redis is back"))

        await until(back, "the embedded Redis is back")
        assert redis_pid(server) != old
        assert len(lines(caplog, "embedded Redis is down")) == 1
        assert len(lines(caplog, "embedded Redis is back")) == 1
        assert await http_get("127.0.0.1", metrics_port, "/healthz") == (200, "ok\n")
        # Sends work again; the send retried across the restart is the same message.
        assert await send(alice, peer, "before", 9001) == first
        assert await send(alice, peer, "after", 9002) != first
        # Nothing logged a traceback for the outage.
        assert [r.getMessage() for r in caplog.records[before:] if r.exc_info] == []
    finally:
        await alice.disconnect()
        await bob.disconnect()


async def test_healthz_says_when_the_embedded_redis_does_not_answer(
    served: tuple[RunningServer, int], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    server, metrics_port = served
    pid = redis_pid(server)

    async def health_is(status: int) -> bool:
        return (await http_get("127.0.0.1", metrics_port, "/healthz"))[0] == status

    os.kill(pid, signal.SIGSTOP)
    try:
        await until(lambda: health_is(503), "/healthz turns 503")
        status, body = await http_get("127.0.0.1", metrics_port, "/healthz")
        assert body == "redis: embedded Redis is down (it does not answer)\n"
    finally:
        os.kill(pid, signal.SIGCONT)
    await until(lambda: health_is(200), "/healthz is 200 again")
    assert redis_pid(server) == pid  # the same server: it was slow, not gone
    assert len(lines(caplog, "embedded Redis is down")) == 1
    assert len(lines(caplog, "embedded Redis is back")) == 1


def test_an_attached_process_takes_the_redis_over_when_its_owner_stops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    owner = EmbeddedRedis(tmp_path / "redis")
    attached = EmbeddedRedis(tmp_path / "redis")
    owner.start()
    try:
        attached.start()
        assert not attached.owns_server
        watch = EmbeddedWatch(None, attached)
        watch.look()
        assert watch.problems == {}
        owner.stop()  # the owning serve stops; the other runs on
        watch.look()  # a first missed answer may be a slow one ...
        watch.look()  # ... the second is not: it takes the server over
        assert watch.problems == {}
        assert attached.owns_server and attached.alive()
        assert len(lines(caplog, "embedded Redis is down")) == 1
        assert len(lines(caplog, "embedded Redis is back")) == 1
        # While it owns the server, a second owner cannot take it.
        with pytest.raises(Exception, match="owned by another process"):
            EmbeddedRedis(tmp_path / "redis")._adopt()
    finally:
        attached.stop()
        owner.stop()


async def test_serve_stops_with_one_line_when_the_embedded_postgres_dies(
    tmp_path: Path, redis_url: str
) -> None:
    data_dir = tmp_path / "data"
    args = serve_args(
        data_dir,
        "--pg-pool-min-size", "1",
        "--pg-pool-max-size", "3",
        "--outbox-workers", "1",
        redis_url=redis_url,
    )  # fmt: skip
    serve = await start(args, tmp_path / "stderr.log")
    try:
        postmaster = int((data_dir / "pg" / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGKILL)
        async with asyncio.timeout(GUARD):
            code = await serve.process.wait()
        text = serve.log()
        assert code == 1, text[-4000:]
        [line] = [x for x in text.splitlines() if "telesrv stops too" in x]
        assert "ERROR" in line and "embedded PostgreSQL" in line
        # Stopping what is left raises nothing, now or at exit.
        assert "Exception ignored" not in text and "Failed to stop" not in text, text[-4000:]
    finally:
        await serve.kill()
        # Backends the killed postmaster left behind end once they notice it is gone.
