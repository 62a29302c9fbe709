"""`telesrv bench connections` runs end to end with tiny counts and ends with its JSON line."""

from __future__ import annotations

import json
from typing import Any

import click
import pytest
from click.testing import CliRunner

from telesrv.bench import connections
from telesrv.bench._conns_load import FD_SLACK
from telesrv.cli import main


def test_bench_connections_measures_spreads_then_stops_at_the_descriptor_limit(
    database_url: str, redis_url: str, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if a process could open exactly 5 connections and its margin (whatever this
    # machine's own limit is): 5 is measured in one process, 9 is spread over two (5
    # and 4), and 11 would need three, past --processes 2.
    monkeypatch.setattr(connections, "_fd_room", lambda: 5 + FD_SLACK)
    result = CliRunner().invoke(
        main,
        [
            "bench", "connections",
            "--counts", "5,9,11",
            "--sessions-per-key", "2",
            "--processes", "2",
            "--database-url", database_url,
            "--redis-url", redis_url,
        ],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    figures = json.loads(lines[-1])
    assert figures["bench"] == "connections"
    assert figures["fd_limit"] == 5 + FD_SLACK
    assert figures["max_processes"] == 2
    level = figures["levels"]["5"]
    assert level["processes"] == 1
    assert level["connections"] == level["sessions"] == 5
    assert level["users"] == 3  # two sessions per key and account, and one alone
    assert level["push_one_user_sessions"] == level["push_one_user_arrived"] == 2
    assert level["push_all_sessions"] == level["push_all_arrived"] == 5
    assert level["push_all_p50_ms"] <= level["push_all_max_ms"]
    assert level["rss_after_mb"] > 0

    spread = figures["levels"]["9"]
    assert spread["processes"] == 2
    assert spread["connections"] == spread["sessions"] == 9
    assert spread["users"] == 3 + 2  # 5 sessions on 3 keys, 4 on 2
    assert spread["push_one_user_sessions"] == spread["push_one_user_arrived"] == 2
    assert spread["push_all_sessions"] == spread["push_all_arrived"] == 9
    assert spread["push_all_p50_ms"] <= spread["push_all_max_ms"]
    assert spread["rss_after_mb"] > level["rss_after_mb"]  # two processes' memory

    stopped = figures["levels"]["11"]["stopped"]
    assert "descriptor limit" in stopped and "more than 2 processes" in stopped


def test_a_count_is_split_over_as_few_processes_as_hold_it() -> None:
    assert connections.split_count(1, 5) == [1]
    assert connections.split_count(5, 5) == [5]
    assert connections.split_count(9, 5) == [5, 4]
    assert connections.split_count(10, 5) == [5, 5]
    assert connections.split_count(11, 5) == [4, 4, 3]
    assert connections.split_count(50_000, 19_488) == [16_667, 16_667, 16_666]


def test_the_figures_of_several_processes_add_up_and_pool_their_arrivals() -> None:
    def part(connections_: int, grown: int, arrivals: list[float]) -> dict[str, Any]:
        return {
            "connections": connections_,
            "sessions": connections_,
            "users": 1,
            "connect_seconds": float(connections_),
            "rss_before": 100 * 2**20,
            "rss_after": 100 * 2**20 + grown,
            "rss_compacted": 100 * 2**20 + grown // 2,
            "held_bytes": 10,
            "seen_ids": connections_,
            "seen_ids_compacted": 0,
            "push_one_user_sessions": connections_,
            "push_one_user_arrived": connections_,
            "push_one_user_max_ms": 1.5,
            "push_all_sessions": connections_,
            "push_all_queue_s": 0.001 * connections_,
            "push_all_written_s": 0.002 * connections_,
            "push_all_arrivals_s": arrivals,
        }

    figures = connections.level_figures(
        [part(2, 2000, [0.001, 0.004]), part(3, 4000, [0.002, 0.003, 0.005])]
    )
    assert figures["processes"] == 2
    assert figures["connections"] == figures["sessions"] == 5
    assert figures["connect_seconds"] == 3.0
    assert figures["rss_before_mb"] == 200.0
    assert figures["bytes_per_connection"] == 6000 / 5
    assert figures["bytes_per_connection_compacted"] == 3000 / 5
    assert figures["seen_ids_per_session"] == 1.0
    assert figures["push_one_user_sessions"] == 2  # the first process's
    assert figures["push_all_sessions"] == figures["push_all_arrived"] == 5
    assert figures["push_all_written_ms"] == 6.0
    assert figures["push_all_p50_ms"] == 3.0  # over all five arrivals
    assert figures["push_all_max_ms"] == 5.0


def test_connection_counts_are_bounded() -> None:
    assert connections._parse_counts(f"1,{connections.MAX_COUNT}") == (1, connections.MAX_COUNT)
    for bad in (f"{connections.MAX_COUNT + 1}", "0", "", "x"):
        with pytest.raises(click.BadParameter):
            connections._parse_counts(bad)


def test_the_processes_a_count_may_use_are_bounded() -> None:
    def invoke(processes: int) -> str:
        # An empty --counts is refused after --processes was read: only a bad
        # --processes names itself.
        result = CliRunner().invoke(
            main, ["bench", "connections", "--processes", str(processes), "--counts", ""]
        )
        assert result.exit_code == 2
        return result.output

    assert "--processes" not in invoke(connections.MAX_PROCESSES)
    assert "--processes" not in invoke(1)
    assert "--processes" in invoke(connections.MAX_PROCESSES + 1)
    assert "--processes" in invoke(0)
