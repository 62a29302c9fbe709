"""The operator's endpoint: /metrics after real sends, /healthz, /readyz with Redis away."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from telethon import functions

from telesrv.app import open_resources
from telesrv.gateway.metrics import CONNECTIONS, SESSIONS
from telesrv.services.errors import FloodWait
from telesrv.services.messages import Origin, OutgoingText
from telesrv.services.metrics import PTS_FILL_FAILURES
from telesrv.services.update_log import fill_unused_pts
from telesrv.serving import readiness
from telesrv.store import db as dbmod
from telesrv.store import migrate
from telesrv.store import outbox as outbox_store
from telesrv.store.embedded import EmbeddedRedis
from telesrv.store.unknown_methods import list_all
from telesrv.wiring import build_server

from .conftest import ClientFactory, RunningServer, e2e_settings
from .test_messages import peer_of, sign_in


async def http_get(host: str, port: int, path: str, method: str = "GET") -> tuple[int, str]:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(host: str, port: int) -> Samples:
    status, text = await http_get(host, port, "/metrics")
    assert status == 200
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


async def drained(server: RunningServer) -> None:
    while await outbox_store.pending_count(server.resources.db.pool):
        await asyncio.sleep(0.02)


@pytest.fixture
async def metrics(server: RunningServer) -> AsyncIterator[tuple[str, int]]:
    yield await server.server.start_metrics("127.0.0.1", 0)
    assert server.server.metrics is not None
    await server.server.metrics.stop()


async def test_metrics_count_sends_outbox_rate_limits_and_unknown_methods(
    server: RunningServer,
    make_client: ClientFactory,
    metrics: tuple[str, int],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host, port = metrics
    caplog.set_level(logging.WARNING, logger="telesrv.services.compat")
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    await drained(server)
    before = await scrape(host, port)

    for i in range(3):
        await alice.send_message(bob_peer, f"counted {i}")
    await drained(server)
    # Bob reads them: his read inbox and Alice's read outbox, held and pushed by the
    # process that wrote them right after its commit.
    await bob(functions.messages.ReadHistoryRequest(peer=await peer_of(bob, alice), max_id=0))
    await drained(server)
    # An unimplemented method, twice: counted twice, recorded with the client's details.
    for _ in range(2):
        with pytest.raises(Exception, match="METHOD_NOT_IMPLEMENTED"):
            await alice(functions.stickers.CheckShortNameRequest(short_name="metrics"))
    # The rate limit, on the server's own stores: one send a minute, the second refused,
    # by another process built on them with that limit, not started (its sends hold no
    # pushes: the running server's workers deliver them). The gauges stay the running
    # server's (a process built last would take them).
    for gauge in (CONNECTIONS, SESSIONS):
        monkeypatch.setattr(gauge, "set_function", lambda function: None)
    limited_process = build_server(server.settings.replace(send_rate_limit=1), server.resources)
    assert limited_process.parts is not None
    limited = limited_process.parts.messages
    me, other = (await alice.get_me()).id, (await bob.get_me()).id
    origin = Origin(auth_key_id=1, session_id=1)
    await limited.send_text(OutgoingText(me, other, 991, "one"), origin, 0)
    with pytest.raises(FloodWait):
        await limited.send_text(OutgoingText(me, other, 992, "two"), origin, 0)
    await drained(server)
    after = await scrape(host, port)

    assert delta(before, after, "telesrv_messages_sent_total", kind="text") == 4
    assert delta(before, after, "telesrv_messages_rate_limited_total") == 1
    # Each message: one row for the recipient, one for the sender's other sessions. The
    # server's sends and the read push theirs from the writing process (held rows,
    # never claimed); the fourth send, from a process whose outbox does not run, goes
    # through the workers.
    assert delta(before, after, "telesrv_outbox_held_pushed_total") == 8
    assert delta(before, after, "telesrv_outbox_claimed_total") == 2
    assert delta(before, after, "telesrv_outbox_delivered_total") == 10
    assert delta(before, after, "telesrv_outbox_failed_total", outcome="retry") == 0
    assert delta(before, after, "telesrv_outbox_failed_total", outcome="terminal") == 0
    assert delta(before, after, "telesrv_pts_fill_failures_total") == 0
    assert after[("telesrv_outbox_backlog_rows", (("status", "pending"),))] == 0
    method = "stickers.checkShortName"
    assert delta(before, after, "telesrv_rpc_unknown_method_total", method=method) == 2
    calls = delta(
        before, after, "telesrv_rpc_calls_total", method=method, outcome="METHOD_NOT_IMPLEMENTED_X"
    )
    assert calls == 2
    sends = delta(
        before, after, "telesrv_rpc_calls_total", method="messages.sendMessage", outcome="ok"
    )
    assert sends == 3
    assert delta(before, after, "telesrv_rpc_seconds_count", method="messages.sendMessage") == 3
    assert after[("telesrv_connections", ())] >= 2
    assert after[("telesrv_sessions", ())] >= 2
    assert after[("telesrv_db_pool_connections", (("state", "max"),))] == (
        server.settings.pg_pool_max_size
    )

    # Logged once per process, with the client's layer and app version.
    [logged] = [r for r in caplog.records if method in r.getMessage()]
    assert "layer 229" in logged.getMessage() and "app version" in logged.getMessage()

    [row] = [r for r in await list_all(server.resources.db.pool) if r.method == method]
    assert row.calls == 2
    assert row.last_layer is not None and row.last_app_version


async def test_healthz_and_unknown_paths(metrics: tuple[str, int]) -> None:
    host, port = metrics
    assert await http_get(host, port, "/healthz") == (200, "ok\n")
    assert await http_get(host, port, "/healthz", "HEAD") == (200, "")
    assert (await http_get(host, port, "/nothing"))[0] == 404
    assert (await http_get(host, port, "/metrics", "POST"))[0] == 405


async def test_readyz_follows_redis(tmp_path: Path, database_url: str) -> None:
    redis_server = EmbeddedRedis(tmp_path / "redis")
    redis_url = redis_server.start()
    try:
        settings = e2e_settings(tmp_path / "data", database_url, redis_url)
        async with open_resources(settings) as resources:
            server = build_server(settings, resources)
            host, port = await server.start_metrics("127.0.0.1", 0)
            try:
                assert await http_get(host, port, "/readyz") == (200, "ready\n")
                await asyncio.to_thread(redis_server.stop)
                status, body = await http_get(host, port, "/readyz")
                assert status == 503
                assert body.startswith("redis: unreachable")
                assert (await http_get(host, port, "/healthz"))[0] == 200
                await asyncio.to_thread(redis_server.start)
                assert await http_get(host, port, "/readyz") == (200, "ready\n")
            finally:
                await server.stop()
    finally:
        redis_server.stop()


async def test_readiness_names_missing_migrations_and_a_lost_database(
    server: RunningServer, pg_server_url: str
) -> None:
    check = readiness(server.resources)
    assert await check() == {"postgres": None, "migrations": None, "redis": None, "disk": None}

    name = f"t_unmigrated_{uuid.uuid4().hex[:10]}"
    url = await dbmod.create_database(pg_server_url, name)
    empty = await dbmod.open_db(url, min_size=1, max_size=1)
    try:
        found = await readiness(dataclasses.replace(server.resources, db=empty))()
        shipped = [m.version for m in migrate.load_migrations()]
        assert found["postgres"] is None
        assert found["migrations"] == "not applied: " + ", ".join(f"{v:04d}" for v in shipped)
    finally:
        await empty.close()
        await dbmod.drop_database(pg_server_url, name)
    # A pool that cannot reach its database any more.
    found = await readiness(dataclasses.replace(server.resources, db=empty))()
    assert found["postgres"] is not None and found["postgres"].startswith("unreachable")


async def test_a_failed_pts_fill_is_counted(server: RunningServer, database_url: str) -> None:
    closed = await dbmod.open_db(database_url, min_size=1, max_size=1)
    await closed.close()  # the write cannot reach PostgreSQL: the fill fails
    before = PTS_FILL_FAILURES._value.get()
    await fill_unused_pts(closed, [(1, 5, 7), (2, 0, 0)], 0, "test")
    assert PTS_FILL_FAILURES._value.get() - before == 3  # pts 5, 6 and 7; (2, 0, 0) is empty
