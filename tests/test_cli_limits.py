"""`telesrv serve` flags for the connection limits and database timeouts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from telesrv import app, cli
from telesrv.config import Settings


@pytest.fixture
def captured_settings(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    seen: list[Settings] = []
    monkeypatch.setattr(app, "run", seen.append)
    return seen


def test_limit_flags_build_settings(captured_settings: list[Settings], tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli.main,
        [
            "serve",
            "--data-dir", str(tmp_path),
            "--db-statement-timeout", "3.5",
            "--db-acquire-timeout", "2",
            "--frame-timeout", "4",
            "--idle-timeout", "90",
            "--max-connections-per-ip", "32",
            "--handshakes-per-ip-per-second", "1.5",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [settings] = captured_settings
    assert settings.db_statement_timeout == 3.5
    assert settings.db_acquire_timeout == 2
    assert settings.frame_timeout == 4
    assert settings.idle_timeout == 90
    assert settings.max_connections_per_ip == 32
    assert settings.handshakes_per_ip_per_second == 1.5


def test_limit_flags_default_to_settings(captured_settings: list[Settings]) -> None:
    result = CliRunner().invoke(cli.main, ["serve"], env={"TELESRV_FRAME_TIMEOUT": "7"})
    assert result.exit_code == 0, result.output
    [settings] = captured_settings
    assert settings.frame_timeout == 7
    defaults = Settings()
    assert settings.idle_timeout == defaults.idle_timeout
    assert settings.db_statement_timeout == defaults.db_statement_timeout


@pytest.mark.parametrize("args", [["--frame-timeout", "0"], ["--max-connections-per-ip", "0"]])
def test_limit_flags_reject_bad_values(captured_settings: list[Settings], args: list[str]) -> None:
    result = CliRunner().invoke(cli.main, ["serve", *args])
    assert result.exit_code != 0
    assert captured_settings == []
