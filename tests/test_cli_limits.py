"""`telesrv serve` flags for the connection limits and database timeouts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from telesrv import app, cli
from telesrv.config import MAX_OUTBOX_BATCH, Settings


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


def test_login_code_flags_build_settings(captured_settings: list[Settings], tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli.main,
        [
            "serve",
            "--data-dir", str(tmp_path),
            "--login-codes-per-phone", "12",
            "--login-codes-per-ip", "40",
            "--login-code-window", "60",
            "--login-code-command", "/usr/local/bin/send-sms --quiet",
            "--login-code-webhook", "https://sms.example/hook",
            "--login-code-hook-timeout", "3",
            "--login-code-hook-retries", "4",
            "--login-code-hook-concurrency", "2",
            "--log-login-codes",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [settings] = captured_settings
    assert settings.login_code_limit == 12 and settings.login_code_window == 60
    assert settings.login_code_ip_limit == 40
    assert settings.login_code_command == "/usr/local/bin/send-sms --quiet"
    assert settings.login_code_webhook == "https://sms.example/hook"
    assert settings.login_code_hook_timeout == 3
    assert settings.login_code_hook_retries == 4
    assert settings.login_code_hook_concurrency == 2
    assert settings.log_login_codes


def test_login_code_limit_defaults(captured_settings: list[Settings]) -> None:
    for args in (["serve"], ["serve", "--dev-login-code", "11111"]):
        assert CliRunner().invoke(cli.main, args).exit_code == 0
    plain, dev = captured_settings
    assert plain.login_code_limit == 5 and not plain.log_login_codes
    assert plain.login_code_command is None and plain.login_code_webhook is None
    assert plain.login_code_ip_limit == 30
    assert dev.login_code_limit == dev.login_code_ip_limit == 0  # off with the dev login code


@pytest.mark.parametrize(
    "args",
    [
        ["--login-codes-per-phone", "-1"],
        ["--login-codes-per-ip", "-1"],
        ["--login-code-window", "0"],
        ["--login-code-webhook", "ftp://x/"],
        ["--login-code-command", "send 'unclosed"],
        ["--login-code-hook-retries", "11"],
        ["--login-code-hook-concurrency", "0"],
        ["--login-code-hook-concurrency", "65"],
    ],
)
def test_login_code_flags_reject_bad_values(
    captured_settings: list[Settings], args: list[str]
) -> None:
    result = CliRunner().invoke(cli.main, ["serve", *args])
    assert result.exit_code != 0
    assert captured_settings == []


def test_the_outbox_batch_is_bounded(captured_settings: list[Settings], tmp_path: Path) -> None:
    at_limit = CliRunner().invoke(
        cli.main,
        ["serve", "--data-dir", str(tmp_path), "--outbox-batch-size", str(MAX_OUTBOX_BATCH)],
    )
    assert at_limit.exit_code == 0, at_limit.output
    assert [s.outbox_batch_size for s in captured_settings] == [MAX_OUTBOX_BATCH]
    past = CliRunner().invoke(
        cli.main,
        ["serve", "--data-dir", str(tmp_path), "--outbox-batch-size", str(MAX_OUTBOX_BATCH + 1)],
    )
    assert past.exit_code != 0
    assert len(captured_settings) == 1
    assert Settings(outbox_batch_size=MAX_OUTBOX_BATCH).outbox_batch_size == MAX_OUTBOX_BATCH
    with pytest.raises(ValueError, match="outbox_batch_size"):
        Settings(outbox_batch_size=MAX_OUTBOX_BATCH + 1)
