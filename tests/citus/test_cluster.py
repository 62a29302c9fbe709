"""The Citus test cluster itself: two workers, rows spread over both, reference tables on
every node, a function run on the worker that holds its user's shard."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from citus_cluster import PORT, CitusClusterError, CitusNode, LocalCitusCluster

USERS = 64  # enough ids that the hash puts some on each worker's shards


@pytest.fixture
async def conn(citus_url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(citus_url)
    try:
        yield connection
    finally:
        await connection.close()


async def placement(conn: asyncpg.Connection, table: str, user_id: int) -> tuple[str, str]:
    """(worker host, shard table name) of the shard that holds ``user_id``'s rows."""
    row = await conn.fetchrow(
        "SELECT s.nodename, s.shard_name FROM citus_shards s"
        " WHERE s.shardid = get_shard_id_for_distribution_column($1::regclass, $2::bigint)",
        table,
        user_id,
    )
    assert row is not None
    return str(row["nodename"]), str(row["shard_name"])


def worker_url(cluster: LocalCitusCluster, host: str, citus_url: str) -> str:
    database = citus_url.split("/")[3].split("?")[0]
    [worker] = [w for w in cluster.workers if w.host == host]
    return worker.url(database)


async def test_cluster_has_two_active_workers(
    conn: asyncpg.Connection, citus_cluster: LocalCitusCluster
) -> None:
    rows = await conn.fetch("SELECT node_name, node_port FROM citus_get_active_worker_nodes()")
    assert sorted((r["node_name"], r["node_port"]) for r in rows) == sorted(
        (w.host, PORT) for w in citus_cluster.workers
    )
    assert len(rows) == 2


async def test_distributed_table_puts_rows_on_both_workers(
    conn: asyncpg.Connection, citus_cluster: LocalCitusCluster, citus_url: str
) -> None:
    await conn.execute("CREATE TABLE notes (user_id bigint NOT NULL, body text NOT NULL)")
    await conn.execute("SELECT create_distributed_table('notes', 'user_id')")
    await conn.executemany(
        "INSERT INTO notes (user_id, body) VALUES ($1, $2)",
        [(user_id, f"note of {user_id}") for user_id in range(1, USERS + 1)],
    )
    assert await conn.fetchval("SELECT count(*) FROM notes") == USERS

    by_worker: dict[str, list[int]] = {}
    for user_id in range(1, USERS + 1):
        host, _ = await placement(conn, "notes", user_id)
        by_worker.setdefault(host, []).append(user_id)
    assert sorted(by_worker) == sorted(w.host for w in citus_cluster.workers)

    # Each worker really holds its users' rows, in the shard Citus names.
    for host, user_ids in by_worker.items():
        worker = await asyncpg.connect(worker_url(citus_cluster, host, citus_url))
        try:
            for user_id in (user_ids[0], user_ids[-1]):
                _, shard = await placement(conn, "notes", user_id)
                body = await worker.fetchval(
                    f'SELECT body FROM "{shard}" WHERE user_id = $1', user_id
                )
                assert body == f"note of {user_id}"
        finally:
            await worker.close()


async def test_one_transaction_writes_on_both_workers(conn: asyncpg.Connection) -> None:
    await conn.execute("CREATE TABLE pairs (user_id bigint NOT NULL, peer_id bigint NOT NULL)")
    await conn.execute("SELECT create_distributed_table('pairs', 'user_id')")
    hosts = {uid: (await placement(conn, "pairs", uid))[0] for uid in range(1, USERS + 1)}
    first = 1
    other = next(uid for uid, host in hosts.items() if host != hosts[first])
    # Two workers in one transaction: Citus commits it in two phases on both.
    async with conn.transaction():
        await conn.execute("INSERT INTO pairs VALUES ($1, $2)", first, other)
        await conn.execute("INSERT INTO pairs VALUES ($1, $2)", other, first)
    rows = await conn.fetch("SELECT user_id, peer_id FROM pairs ORDER BY user_id")
    assert [tuple(r) for r in rows] == sorted([(first, other), (other, first)])


async def test_reference_table_is_on_every_worker(
    conn: asyncpg.Connection, citus_cluster: LocalCitusCluster
) -> None:
    await conn.execute("CREATE TABLE countries (code text PRIMARY KEY, name text NOT NULL)")
    await conn.execute("SELECT create_reference_table('countries')")
    await conn.execute("INSERT INTO countries VALUES ('NL', 'Netherlands'), ('JP', 'Japan')")
    hosts = await conn.fetch(
        "SELECT nodename FROM citus_shards WHERE table_name = 'countries'::regclass"
    )
    assert {w.host for w in citus_cluster.workers} <= {r["nodename"] for r in hosts}
    assert (
        await conn.fetchval("SELECT citus_table_type FROM citus_tables"
                            " WHERE table_name = 'countries'::regclass")
        == "reference"
    )  # fmt: skip

    # A distributed table joins it on any worker.
    await conn.execute("CREATE TABLE homes (user_id bigint NOT NULL, country text NOT NULL)")
    await conn.execute("SELECT create_distributed_table('homes', 'user_id')")
    await conn.executemany(
        "INSERT INTO homes VALUES ($1, $2)",
        [(uid, "NL" if uid % 2 else "JP") for uid in range(1, USERS + 1)],
    )
    rows = await conn.fetch(
        "SELECT c.name, count(*) AS n FROM homes h JOIN countries c ON c.code = h.country"
        " GROUP BY c.name ORDER BY c.name"
    )
    assert [(r["name"], r["n"]) for r in rows] == [
        ("Japan", USERS // 2),
        ("Netherlands", USERS // 2),
    ]


async def test_distributed_function_runs_on_the_users_worker(
    conn: asyncpg.Connection, citus_cluster: LocalCitusCluster
) -> None:
    await conn.execute("CREATE TABLE visits (user_id bigint NOT NULL, n int NOT NULL)")
    await conn.execute("SELECT create_distributed_table('visits', 'user_id')")
    await conn.execute(
        """
        CREATE FUNCTION record_visit(p_user_id bigint) RETURNS text
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO visits (user_id, n) VALUES (p_user_id, 1);
            -- Where it ran: the node's socket directory, and whether it is the coordinator.
            RETURN current_setting('unix_socket_directories')
                || CASE WHEN citus_is_coordinator() THEN ' coordinator' ELSE ' worker' END;
        END
        $$
        """
    )
    await conn.execute(
        "SELECT create_distributed_function('record_visit(bigint)', 'p_user_id',"
        " colocate_with := 'visits')"
    )
    seen: set[str] = set()
    for user_id in range(1, USERS + 1):
        host, _ = await placement(conn, "visits", user_id)
        ran_on = await conn.fetchval("SELECT record_visit($1)", user_id)
        assert ran_on == f"{host} worker"
        seen.add(host)
    assert seen == {w.host for w in citus_cluster.workers}
    assert await conn.fetchval("SELECT count(*) FROM visits") == USERS


class _FailsWhenReady(LocalCitusCluster):
    """A cluster whose last worker is declared not ready, once every node has started."""

    started: list[subprocess.Popen[bytes]]
    root: Path | None = None

    def _wait_ready(self, node: CitusNode, deadline: float) -> None:
        super()._wait_ready(node, deadline)
        assert node.process is not None
        self.started.append(node.process)
        self.root = self.directory
        if node is self.workers[-1]:
            raise CitusClusterError("refused by the test")


def test_a_start_that_fails_stops_every_node_and_removes_its_directory(
    citus_cluster: LocalCitusCluster,
) -> None:
    # Asks for the session's cluster only for its skip (or failure in CI) without Citus.
    cluster = _FailsWhenReady()
    cluster.started = []
    with pytest.raises(CitusClusterError, match="refused by the test"):
        cluster.start()
    assert len(cluster.started) == 3
    assert all(process.returncode is not None for process in cluster.started)
    assert cluster.root is not None and not cluster.root.exists()
    assert cluster.directory is None and cluster.nodes == []
    assert citus_cluster.coordinator is not None  # the session's cluster is untouched
