"""`telesrv bench e2e` runs end to end with tiny counts and ends with its JSON line."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from telesrv.bench._proc_cpu import cpu_seconds, process_trees
from telesrv.cli import main


def test_bench_e2e_prints_table_then_json(database_url: str, redis_url: str, redis: object) -> None:
    result = CliRunner().invoke(
        main,
        [
            "bench", "e2e",
            "--pairs", "2",
            "--messages", "5",
            "--offline-messages", "3",
            "--client-processes", "2",
            "--database-url", database_url,
            "--redis-url", redis_url,
            # No wait for PostgreSQL's statistics: the fields are there, figures low.
            "--pg-stats-settle", "0",
        ],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].split()[:2] == ["pairs", "x"]
    figures = json.loads(lines[-1])
    assert figures["bench"] == "e2e"
    for key in (
        "msgs_per_s", "send_p50_ms", "send_p99_ms", "push_p50_ms", "push_p99_ms",
        "catchup_msgs_per_s",
    ):  # fmt: skip
        assert figures[key] > 0, key
    # CPU time is counted in clock ticks (10 ms each): a run this small may take less
    # than one on a fast machine, and then there is no rate to give.
    assert figures["server_cpu_s"] >= 0
    if figures["server_cpu_s"] > 0:
        assert figures["msgs_per_server_cpu_s"] > 0
    else:
        assert figures["msgs_per_server_cpu_s"] is None
    # Every message is a request read and an answer written, at least, by the server.
    assert figures["syscalls_read_per_msg"] > 0 and figures["syscalls_write_per_msg"] > 0
    assert figures["send_p50_ms"] <= figures["send_p99_ms"]
    assert figures["push_p50_ms"] <= figures["push_p99_ms"]
    assert figures["lost"] == figures["duplicates"] == 0
    assert figures["catchup_messages"] == 2 * 3
    assert figures["catchup_lost"] == figures["catchup_duplicates"] == 0
    assert figures["client_processes"] == 2
    assert figures["database_cpu_counted"] and figures["redis_cpu_counted"]
    assert_pg_figures(figures)


def assert_pg_figures(figures: dict[str, object]) -> None:
    """PostgreSQL's figures per message: the WAL is read where it stands, so the sends'
    writes are in it; transactions are counts the server's backends had reported by then
    (none, at the least); statements need pg_stat_statements, or say why they are null."""
    wal, xacts = figures["pg_wal_bytes_per_msg"], figures["pg_xacts_per_msg"]
    assert isinstance(wal, float) and wal > 0
    assert isinstance(xacts, float) and xacts >= 0
    if figures["pg_statements_reason"] is None:
        statements = figures["pg_statements_per_msg"]
        assert isinstance(statements, float) and statements > 0
    else:
        assert figures["pg_statements_per_msg"] is None


def test_process_trees_include_descendants_and_cpu_is_counted() -> None:
    me = os.getpid()
    assert me in process_trees([me])
    assert process_trees([2**22 + 12345]) == set()  # no such process: nothing, no error
    assert cpu_seconds([me]) > 0
