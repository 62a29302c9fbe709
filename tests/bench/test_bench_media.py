"""`telesrv bench media` runs end to end with a tiny document and ends with its JSON line."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from telesrv.bench.media import aes_ige_ceiling, check_part_count
from telesrv.cli import main


def test_bench_media_prints_table_then_json(
    database_url: str, redis_url: str, redis: object
) -> None:
    result = CliRunner().invoke(
        main,
        [
            "bench", "media",
            # Four parts of 64 KiB, the last one short; two getFile chunks of 128 KiB.
            "--size-mb", "0.2",
            "--part-kib", "64",
            "--chunk-kib", "128",
            "--parallel", "2",
            "--database-url", database_url,
            "--redis-url", redis_url,
        ],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].split()[:2] == ["document", "MB"]
    figures = json.loads(lines[-1])
    assert figures["bench"] == "media"
    assert figures["size_bytes"] == 200_000
    assert figures["upload_parts"] == 4
    assert figures["download_requests"] == 2
    assert figures["corrupt"] == 0
    for key in (
        "upload_mb_per_s", "download_mb_per_s", "aes_ige_mb_per_s",
        "aes_ige_encrypt_mb_per_s", "aes_ige_decrypt_mb_per_s",
    ):  # fmt: skip
        assert figures[key] > 0, key
    for key in ("upload_server_cpu_s_per_mb", "download_server_cpu_s_per_mb"):
        assert figures[key] >= 0, key
    assert figures["database_cpu_counted"] and figures["redis_cpu_counted"]


def test_bench_media_takes_4000_parts_and_refuses_more() -> None:
    check_part_count(4000 * 65536, 65536)
    with pytest.raises(click.BadParameter):
        check_part_count(4000 * 65536 + 1, 65536)
    # The command line says so before it starts anything.
    result = CliRunner().invoke(main, ["bench", "media", "--size-mb", "300", "--part-kib", "64"])
    assert result.exit_code != 0
    assert "4,000 parts" in result.output


def test_aes_ige_ceiling_measures_both_directions() -> None:
    rates = aes_ige_ceiling(piece=16 * 1024, min_seconds=0.01)
    assert rates["encrypt"] > 0 and rates["decrypt"] > 0
    assert rates["both"] < min(rates["encrypt"], rates["decrypt"])
