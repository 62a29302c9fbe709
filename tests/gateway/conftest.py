"""The real gateway fixtures of the end-to-end tests, for gateway tests over real sockets,
and ``limits``, which changes the gateway's limits for one test."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from e2e.conftest import RunningServer, make_client, server

from telesrv.gateway.server import GatewayLimits

__all__ = ["limits", "make_client", "server"]


@pytest.fixture
def limits(server: RunningServer) -> Iterator[Any]:
    """``limits(**changes)`` applies to connections opened afterwards; undone after."""
    gateway = server.gateway
    saved = gateway.limits

    def change(**changes: Any) -> GatewayLimits:
        gateway.limits = dataclasses.replace(saved, **changes)
        return gateway.limits

    yield change
    gateway.limits = saved
    gateway._ip_handshake_budgets.clear()
