"""`telesrv outbox list|requeue|purge` against a database (no server running)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import asyncpg
import pytest
from click.testing import CliRunner, Result

from telesrv import app, cli
from telesrv.config import Settings


def run(args: list[str], data_dir: Path, database_url: str, redis_url: str) -> Result:
    storage = ["--data-dir", str(data_dir), "--database-url", database_url]
    return CliRunner().invoke(cli.main, [*args[:2], *storage, "--redis-url", redis_url, *args[2:]])


def sql(database_url: str, statement: str) -> list[asyncpg.Record]:
    async def go() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(database_url)
        try:
            rows: list[asyncpg.Record] = await conn.fetch(statement)
            return rows
        finally:
            await conn.close()

    return asyncio.run(go())


def test_outbox_lists_requeues_and_purges_failed_rows(
    tmp_path: Path, database_url: str, redis_url: str
) -> None:
    def outbox(*args: str) -> Result:
        result = run(["outbox", *args], tmp_path, database_url, redis_url)
        assert result.exit_code == 0, result.output
        return result

    def lines(*args: str) -> list[str]:
        return outbox(*args).stdout.splitlines()

    assert lines("list") == ["no failed outbox rows"]
    sql(
        database_url,
        """
        INSERT INTO dispatch_outbox (target_user_id, pts, status, attempts, last_error)
        VALUES (7001, 5, 'failed', 8, 'RuntimeError: push broke'),
               (7001, 6, 'failed', 8, 'RuntimeError: push broke'),
               (7002, 9, 'failed', 8, NULL),
               (7003, 1, 'pending', 0, NULL)
        """,
    )
    listed = lines("list")
    assert len(listed) == 4  # header + the three failed rows, not the pending one
    assert "pts 5" in listed[1] and "RuntimeError: push broke" in listed[1]
    assert len(lines("list", "--limit", "1")) == 2
    assert len(lines("list", "--user-id", "7002")) == 2

    assert lines("requeue", "--user-id", "7001") == ["requeued 2 failed row(s)"]
    rows = sql(
        database_url,
        "SELECT status, attempts, last_error FROM dispatch_outbox WHERE target_user_id = 7001",
    )
    assert [tuple(r) for r in rows] == [("pending", 0, None)] * 2

    refused = run(["outbox", "purge"], tmp_path, database_url, redis_url)
    assert refused.exit_code == 1  # asks first; no answer is no
    assert lines("purge", "--yes") == ["purged 1 failed row(s)"]
    left = sql(database_url, "SELECT target_user_id, status FROM dispatch_outbox ORDER BY 1")
    assert [tuple(r) for r in left] == [(7001, "pending"), (7001, "pending"), (7003, "pending")]
    assert lines("list") == ["no failed outbox rows"]


def test_json_log_format() -> None:
    formatter = cli.JsonFormatter()
    record = logging.LogRecord("telesrv.x", logging.WARNING, __file__, 1, "hello %s", ("w",), None)
    entry = json.loads(formatter.format(record))
    assert entry["level"] == "warning" and entry["logger"] == "telesrv.x"
    assert entry["message"] == "hello w" and entry["time"].endswith("+00:00")
    try:
        raise ValueError("boom")
    except ValueError:
        record.exc_info = sys.exc_info()
    assert "ValueError: boom" in json.loads(formatter.format(record))["exception"]


def test_log_options_are_accepted(tmp_path: Path) -> None:
    args = ["--log-format", "json", "--log-level", "debug", "key", "--data-dir", str(tmp_path)]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    bad = CliRunner().invoke(cli.main, ["--log-format", "xml", "key"])
    assert bad.exit_code == 2


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ([], {"TELESRV_METRICS_LISTEN": None}, (None, None)),  # off by default
        (["--metrics-listen", "127.0.0.1:9100"], {}, ("127.0.0.1", 9100)),
        ([], {"TELESRV_METRICS_LISTEN": "[::1]:0"}, ("::1", 0)),
    ],
)
def test_serve_metrics_listen(
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str | None],
    expected: tuple[str | None, int | None],
) -> None:
    seen: list[Settings] = []
    monkeypatch.setattr(app, "run", seen.append)
    result = CliRunner().invoke(cli.main, ["serve", *args], env=env)
    assert result.exit_code == 0, result.output
    [settings] = seen
    assert (settings.metrics_host, settings.metrics_port) == expected


@pytest.mark.parametrize("value", ["9100", "host:65536"])
def test_serve_rejects_a_bad_metrics_address(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setattr(app, "run", lambda settings: None)
    result = CliRunner().invoke(cli.main, ["serve", "--metrics-listen", value])
    assert result.exit_code == 2


def test_metrics_settings_go_together() -> None:
    with pytest.raises(ValueError, match="metrics_host and metrics_port go together"):
        Settings(metrics_host="127.0.0.1")
    with pytest.raises(ValueError, match="metrics port out of range"):
        Settings(metrics_host="127.0.0.1", metrics_port=65536)
    assert Settings(metrics_host="127.0.0.1", metrics_port=65535).metrics_port == 65535
