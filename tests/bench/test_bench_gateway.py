"""`telesrv bench gateway` runs end to end with tiny counts and ends with its JSON line."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from telesrv.cli import main


@pytest.mark.parametrize("client", ["--in-process", "--client-process"])
def test_bench_gateway_prints_table_then_json(
    database_url: str, redis_url: str, redis: object, client: str
) -> None:
    result = CliRunner().invoke(
        main,
        [
            "bench", "gateway",
            "--concurrency", "1,3",
            "--seconds", "0.2",
            "--max-count", "20",
            "--database-url", database_url,
            "--redis-url", redis_url,
            client,
        ],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].split()[:2] == ["connections", "handshakes/s"]
    figures = json.loads(lines[-1])
    assert figures["bench"] == "gateway"
    for key in ("handshakes_per_s", "ping_rtt_per_s", "ping_p50_ms", "ping_p99_ms"):
        assert set(figures[key]) == {"1", "3"}
        assert all(v > 0 and math.isfinite(v) for v in figures[key].values()), key
    assert figures["ping_p50_ms"]["1"] <= figures["ping_p99_ms"]["1"]
