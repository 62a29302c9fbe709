"""How the server is put together, where a mistake would cost no test an answer: one
built-users cache serves every handler and the pushes alike."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import telesrv.rpc
from telesrv.rpc import users_tl as users_tl_module
from telesrv.rpc.discovery import handler_classes
from telesrv.wiring import build_server

from .conftest import RunningServer

RPC_DIR = Path(telesrv.rpc.__file__).parent


async def test_one_users_tl_serves_answers_and_pushes(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The account handlers make their own when none is handed to them: a server that
    # forgot to hand over its one would still answer right, with two caches of the
    # same users, each missing what the other built.
    made: list[Any] = []
    original = users_tl_module.UsersTl.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(users_tl_module.UsersTl, "__init__", counting)
    build_server(server.settings, server.resources)
    assert len(made) == 1


def test_every_handler_class_is_served(server: RunningServer) -> None:
    """The handler classes are found in telesrv.rpc, not listed: every one the package
    defines is built by the server, with each of its methods registered."""
    served = set(server.gateway.dispatcher.method_names())
    classes = handler_classes()
    defined = {
        name
        for path in RPC_DIR.glob("*.py")
        for name in re.findall(r"^class (\w+Handlers)\b", path.read_text(), re.M)
    }
    assert {cls.__name__ for cls in classes} == defined
    for cls in classes:
        marks = [getattr(v, "__tl_method__", None) for v in vars(cls).values()]
        names = {function.TL_NAME for function, _ in filter(None, marks)}
        assert names <= served, (cls.__name__, names - served)
    # The one whose methods are marked per instance (plain functions, one per method).
    assert "messages.getAttachMenuBots" in served
