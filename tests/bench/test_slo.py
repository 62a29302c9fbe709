"""The SLO gate of `telesrv bench send --enforce-slo`: a pure check over the result."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from telesrv.bench import _pg_stats, send


def passing() -> dict[str, Any]:
    return {
        "msgs_per_s": 200.0,
        "send_p99_ms": 149.99,
        "getdifference_p99_ms": 99.99,
        "errors": 0,
        "duplicates": 0,
        "lost": 0,
        "pts_holes": 0,
        "outbox_failed": 0,
    }


def test_a_result_at_the_limits_passes() -> None:
    assert send.check_slo(passing()) == []


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("msgs_per_s", 199.9),
        ("send_p99_ms", 150.0),
        ("getdifference_p99_ms", 100.0),
        ("errors", 1),
        ("duplicates", 1),
        ("lost", 1),
        ("lost", -1),  # more messages than sent is as wrong as fewer
        ("pts_holes", 1),
        ("outbox_failed", 1),
    ],
)
def test_each_threshold_past_its_limit_fails(key: str, value: float) -> None:
    result = passing() | {key: value}
    [failure] = send.check_slo(result)
    assert failure.startswith(key)


def test_a_missing_figure_fails() -> None:
    result = passing()
    del result["send_p99_ms"]
    assert send.check_slo(result) == ["send_p99_ms None >= 150.0"]


def test_thresholds_name_every_checked_figure() -> None:
    stated = send.slo_thresholds()
    assert stated["min"] == {"msgs_per_s": 200.0}
    assert stated["max"] == {"send_p99_ms": 150.0, "getdifference_p99_ms": 100.0}
    assert set(stated["zero"]) == {"errors", "duplicates", "lost", "pts_holes", "outbox_failed"}


@pytest.mark.parametrize(
    ("flags", "slow", "exit_code"),
    [
        (["--enforce-slo"], False, 0),
        (["--enforce-slo"], True, 1),
        ([], True, 0),  # measured and reported, not enforced
    ],
)
def test_the_command_exits_non_zero_only_when_enforcing_a_failure(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], slow: bool, exit_code: int
) -> None:
    figures = passing() | {
        "send_p50_ms": 1.0,
        "send_max_ms": 1.0,
        "getdifference_p50_ms": 1.0,
        "outbox_drain_rows_per_s": 1.0,
        "outbox_drain_offline_rows_per_s": 1.0,
        "outbox_backlog_rows": 1,
        # Taken from PostgreSQL's statistics; absent readings are None, as here.
        **_pg_stats.unmeasured("not measured in this test"),
    }
    if slow:
        figures["send_p99_ms"] = 151.0
    # The measurement itself is not under test: only what the command does with it.
    monkeypatch.setattr(send, "run_async", lambda main: dict(figures))
    outcome = CliRunner().invoke(send.command, flags)
    assert outcome.exit_code == exit_code, outcome.output
    stated = json.loads(outcome.stdout.splitlines()[-1])["slo"]
    assert stated["passed"] is not slow
    assert stated["enforced"] is bool(flags)
    assert stated["thresholds"] == send.slo_thresholds()
    assert stated["failures"] == (["send_p99_ms 151.0 >= 150.0"] if slow else [])
