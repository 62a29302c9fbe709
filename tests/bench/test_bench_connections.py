"""`telesrv bench connections` runs end to end with tiny counts and ends with its JSON line."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from telesrv.bench import connections
from telesrv.bench._conns_load import FD_SLACK
from telesrv.cli import main


def test_bench_connections_measures_then_stops_at_the_descriptor_limit(
    database_url: str, redis_url: str, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if the process could open exactly 5 connections and its margin: 5 is
    # measured, 6 stops there (whatever this machine's own limit is).
    monkeypatch.setattr(connections, "_fd_room", lambda: 5 + FD_SLACK)
    result = CliRunner().invoke(
        main,
        [
            "bench", "connections",
            "--counts", "5,6",
            "--sessions-per-key", "2",
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
    level = figures["levels"]["5"]
    assert level["connections"] == level["sessions"] == 5
    assert level["users"] == 3  # two sessions per key and account, and one alone
    assert level["push_one_user_sessions"] == level["push_one_user_arrived"] == 2
    assert level["push_all_sessions"] == level["push_all_arrived"] == 5
    assert level["push_all_p50_ms"] <= level["push_all_max_ms"]
    assert level["rss_after_mb"] > 0
    assert "descriptor limit" in figures["levels"]["6"]["stopped"]


def test_connection_counts_are_bounded() -> None:
    assert connections._parse_counts(f"1,{connections.MAX_COUNT}") == (1, connections.MAX_COUNT)
    for bad in (f"{connections.MAX_COUNT + 1}", "0", "", "x"):
        with pytest.raises(click.BadParameter):
            connections._parse_counts(bad)
