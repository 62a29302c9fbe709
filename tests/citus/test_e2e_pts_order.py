"""tests/e2e/test_pts_order.py, unchanged, against telesrv on the Citus cluster."""

from __future__ import annotations

import pytest
from e2e.conftest import make_client, server
from e2e.test_pts_order import *  # noqa: F403 - the same tests, collected here again

__all__ = ["make_client", "server"]


@pytest.fixture(scope="module")
def database_url(citus_url: str) -> str:
    return citus_url
