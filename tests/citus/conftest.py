"""One Citus cluster per test run (a coordinator and two workers, see tests/citus_cluster.py)
and a database of its own on it for each test module.

Without Citus built and installed (``.ci/citus``) the tests skip, saying why; in CI (the
``CI`` variable set, as CI services do) they fail instead, so that a broken install
cannot pass unnoticed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from citus_cluster import LocalCitusCluster, citus_missing


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[LocalCitusCluster]:
    missing = citus_missing()
    if missing is not None:
        if _in_ci():
            pytest.fail(f"CI is set, and the Citus tests cannot run: {missing}")
        pytest.skip(missing)
    cluster = LocalCitusCluster()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def citus_url(request: pytest.FixtureRequest, citus_cluster: LocalCitusCluster) -> Iterator[str]:
    """URL (on the coordinator) of a database of this module's own, on every node, with
    the citus and pg_trgm extensions and both workers added."""
    module = request.node.name.removesuffix(".py").rsplit("/", 1)[-1]
    stem = "".join(ch for ch in module.lower() if ch.isalnum() or ch == "_")[:30]
    name = f"c_{stem}_{uuid.uuid4().hex[:10]}"
    url = citus_cluster.create_database(name)
    try:
        yield url
    finally:
        citus_cluster.drop_database(name)
