"""A stopping gateway (SIGTERM) answers every request it read before the stop, also
those still queued behind the per-connection limit when it began, and reads nothing
more."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from e2e.conftest import RunningServer, e2e_settings

from telesrv.app import open_resources
from telesrv.bench._client import connect_new_key
from telesrv.tl import mt
from telesrv.wiring import build_server

from .test_hostile_mtproto import GET_CONFIG
from .test_limits import public_key, server_side, until

WAIT = 30.0  # only against a hang


@pytest.fixture
async def running(
    tmp_path: Path, database_url: str, redis_url: str
) -> AsyncIterator[RunningServer]:
    """A server of this test alone: the test stops its gateway."""
    settings = e2e_settings(tmp_path / "data", database_url, redis_url)
    async with open_resources(settings) as resources:
        server = build_server(settings, resources)
        host, port = await server.start(settings.listen_host, settings.listen_port)
        try:
            yield RunningServer(settings, resources, server, host, port)
        finally:
            await server.stop()


async def test_stop_answers_requests_read_before_it_and_reads_no_more(
    running: RunningServer, monkeypatch: Any
) -> None:
    gateway = running.server.gateway
    gateway.limits = dataclasses.replace(gateway.limits, max_inflight_rpcs=2)
    client, _ = await connect_new_key(running.host, running.port, public_key(running))
    await client.ping(0)  # learns the salt
    side = await server_side(running, client.conn.writer)
    dispatcher = gateway.dispatcher
    original = dispatcher.call
    release = asyncio.Event()
    started: list[int] = []

    async def gated(ctx: Any, request: Any) -> Any:
        started.append(ctx.msg_id)
        await release.wait()
        return await original(ctx, request)

    monkeypatch.setattr(dispatcher, "call", gated)
    read = []
    for _ in range(3):  # two run, the third waits for a slot
        msg_id, payload = client.session.encrypt(GET_CONFIG)
        client.conn.send(payload)
        read.append(msg_id)
    await until(lambda: len(started) == 2)
    stopping = asyncio.create_task(gateway.stop(grace=WAIT))
    await until(lambda: side._draining)
    late, payload = client.session.encrypt(GET_CONFIG)
    client.conn.send(payload)  # after the stop began: never read
    release.set()
    async with asyncio.timeout(WAIT):
        await stopping
    answered: set[int] = set()
    async with asyncio.timeout(WAIT):
        while True:
            try:
                messages = await client.recv_messages()
            except (asyncio.IncompleteReadError, ConnectionError):
                break  # the server closed the connection once all was answered
            for m in messages:
                if m.constructor == mt.RpcResult.CONSTRUCTOR_ID:
                    answered.add(struct.unpack_from("<q", m.body, 4)[0])
    assert answered == set(read)
    assert late not in started
    await client.conn.close()
