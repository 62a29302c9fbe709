"""How the server is put together, where a mistake would cost no test an answer: one
built-users cache serves every handler and the pushes alike."""

from __future__ import annotations

from typing import Any

import pytest

from telesrv.rpc import users_tl as users_tl_module
from telesrv.wiring import build_server

from .conftest import RunningServer


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
