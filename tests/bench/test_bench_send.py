"""`telesrv bench send` runs end to end on a tiny load and ends with its JSON line,
CPU figures included."""

from __future__ import annotations

import json

from click.testing import CliRunner

from telesrv.cli import main

from .test_bench_e2e import assert_pg_figures


def test_bench_send_prints_figures_with_cpu_per_unit(
    database_url: str, redis_url: str, redis: object
) -> None:
    result = CliRunner().invoke(
        main,
        [
            "bench", "send",
            "--users", "4",
            "--concurrency", "2",
            "--messages", "20",
            "--backlog", "10",
            "--database-url", database_url,
            "--redis-url", redis_url,
            # No wait for PostgreSQL's statistics: the fields are there, figures low.
            "--pg-stats-settle", "0",
        ],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output.strip().splitlines()[-1])
    assert figures["bench"] == "send"
    for key in ("errors", "duplicates", "lost", "pts_holes", "outbox_failed"):
        assert figures[key] == 0, key
    assert figures["outbox_backlog_rows"] == 20  # both sides of each backlog message
    # 20 sends, the first 2 rounds of 2 workers left out of the warm figure
    assert 0 < figures["send_p99_warm_ms"] <= figures["send_max_ms"]
    for key in (
        "send_cpu_us_per_msg", "send_db_cpu_us_per_msg", "outbox_drain_cpu_us_per_row",
        "outbox_drain_db_cpu_us_per_row", "outbox_drain_offline_cpu_us_per_row",
    ):  # fmt: skip
        assert figures[key] >= 0, key
    assert figures["db_cpu_counted"] is True
    assert_pg_figures(figures)
