"""The real gateway fixtures of the end-to-end tests, for gateway tests over real sockets."""

from __future__ import annotations

from e2e.conftest import make_client, server

__all__ = ["make_client", "server"]
