"""initConnection and invokeWithLayer become one ClientInfo record per permanent key."""

from __future__ import annotations

import dataclasses
from typing import Any

from telesrv.rpc.context import RequestContext
from telesrv.rpc.handlers import ConnectionInfoRecorder
from telesrv.services.auth_keys import ClientInfo
from telesrv.tl import LAYER


class FakeKeys:
    def __init__(self) -> None:
        self.recorded: list[tuple[int, ClientInfo]] = []

    async def record_client(self, auth_key_id: int, details: ClientInfo) -> None:
        self.recorded.append((auth_key_id, details))


def ctx() -> RequestContext:
    return RequestContext(auth_key_id=5, perm_auth_key_id=4, session_id=1, msg_id=1, now=0.0)


PIXEL = ClientInfo(9, "Pixel", "Android 14", "1.2", "en", "", "en", layer=LAYER)


async def test_layer_and_device_are_recorded_once_per_change() -> None:
    keys = FakeKeys()
    recorder = ConnectionInfoRecorder(keys)  # type: ignore[arg-type]
    await recorder(ctx(), 200, None)  # a bare invokeWithLayer: nothing to describe yet
    assert keys.recorded == []
    await recorder(ctx(), 200, PIXEL)
    await recorder(ctx(), 200, PIXEL)  # repeated on reconnect: not written again
    await recorder(ctx(), 201, None)  # a new layer, the device as before
    await recorder(ctx(), None, dataclasses.replace(PIXEL, app_version="1.3"))
    expected: list[Any] = [
        (4, dataclasses.replace(PIXEL, layer=200)),
        (4, dataclasses.replace(PIXEL, layer=201)),
        (4, dataclasses.replace(PIXEL, layer=201, app_version="1.3")),  # the last layer
    ]
    assert keys.recorded == expected


async def test_a_first_client_without_a_layer_gets_ours() -> None:
    keys = FakeKeys()
    recorder = ConnectionInfoRecorder(keys)  # type: ignore[arg-type]
    await recorder(ctx(), None, dataclasses.replace(PIXEL, layer=1))
    assert keys.recorded == [(4, PIXEL)]
