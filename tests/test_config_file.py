"""`--config FILE` (TOML): every `serve` option as a key, precedence flag > environment
variable > file > default, and one-line refusals of a file that does not fit."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from telesrv import app, cli
from telesrv.cli.options import config_defaults
from telesrv.cli.serve import serve
from telesrv.config import Settings, format_host_port

# Environment variables of serve's options: unset in every run here.
SERVE_ENV = {
    env: None
    for p in serve.params
    if isinstance(p, click.Option)
    for env in ([p.envvar] if isinstance(p.envvar, str) else (p.envvar or []))
}


@pytest.fixture
def captured_settings(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    seen: list[Settings] = []
    monkeypatch.setattr(app, "run", seen.append)
    return seen


def invoke(args: list[str], env: Mapping[str, str | None] | None = None) -> Any:
    return CliRunner().invoke(cli.main, args, env={**SERVE_ENV, **(env or {})})


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_precedence_flag_then_environment_then_file_then_default(
    captured_settings: list[Settings], tmp_path: Path
) -> None:
    config = write(
        tmp_path / "telesrv.toml",
        'listen = "0.0.0.0:9443"\n'
        "send-rate-limit = 7\n"
        "auto_register = true\n"
        'ws-listen = "off"\n'
        f'data-dir = "{tmp_path / "data"}"\n',
    )
    # The file alone; what it leaves out keeps its default.
    result = invoke(["serve", "--config", str(config)])
    assert result.exit_code == 0, result.output
    settings = captured_settings.pop()
    assert (settings.listen_host, settings.listen_port) == ("0.0.0.0", 9443)
    assert settings.send_rate_limit == 7
    assert settings.auto_register is True
    assert settings.ws_listen is None
    assert settings.data_dir == tmp_path / "data"
    assert settings.media_rate_limit == Settings().media_rate_limit

    # An environment variable wins over the file; the file is named by one too.
    env = {"TELESRV_CONFIG": str(config), "TELESRV_SEND_RATE_LIMIT": "8"}
    result = invoke(["serve"], env)
    assert result.exit_code == 0, result.output
    settings = captured_settings.pop()
    assert settings.send_rate_limit == 8 and settings.listen_port == 9443

    # A flag wins over both.
    result = invoke(["serve", "--send-rate-limit", "9", "--no-auto-register"], env)
    assert result.exit_code == 0, result.output
    settings = captured_settings.pop()
    assert settings.send_rate_limit == 9 and settings.auto_register is False
    assert settings.listen_port == 9443


def sample_value(option: click.Option, tmp_path: Path) -> Any:
    """A value the option takes, as a TOML file would hold it."""
    default = option.default
    if isinstance(default, tuple):
        return format_host_port(*default)
    if isinstance(default, Path):
        return str(default)
    if isinstance(default, bool | int | float | str):
        return default
    if isinstance(option.type, click.Path):
        existing = tmp_path / f"{option.name}.pem"
        existing.write_text("x")
        return str(existing)
    if option.type.name.startswith("HOST:PORT"):
        return "127.0.0.1:9100"
    return "1"


def test_every_serve_option_is_a_key(tmp_path: Path) -> None:
    options = [p for p in serve.params if isinstance(p, click.Option) and p.expose_value and p.name]
    assert len(options) > 30
    lines = []
    for option in options:
        value = sample_value(option, tmp_path)
        text = f'"{value}"' if isinstance(value, str) else str(value).lower()
        lines.append(f"{(option.name or '').replace('_', '-')} = {text}")
    config = write(tmp_path / "all.toml", "\n".join(lines) + "\n")
    with click.Context(serve) as ctx:
        loaded = config_defaults(serve, config, ctx)
    assert set(loaded) == {option.name for option in options}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('lisen = "0.0.0.0:1"\n', "unknown setting 'lisen'"),
        ('config = "other.toml"\n', "unknown setting 'config'"),
        ("send-rate-limit = -1\n", "send-rate-limit = -1"),
        ('listen = "nonsense"\n', "listen = 'nonsense'"),
        ("[listen]\nhost = 1\n", "listen: expected a single value"),
        ("listen = \n", "not valid TOML"),
    ],
)
def test_a_file_that_does_not_fit_is_one_line(
    captured_settings: list[Settings], tmp_path: Path, text: str, expected: str
) -> None:
    config = write(tmp_path / "bad.toml", text)
    result = invoke(["serve", "--config", str(config)])
    assert result.exit_code == 1
    [line] = [line for line in result.output.splitlines() if line.strip()]
    assert expected in line and str(config) in line
    assert "Traceback" not in result.output
    assert captured_settings == []


def test_missing_file_is_one_line(captured_settings: list[Settings], tmp_path: Path) -> None:
    result = invoke(["serve", "--config", str(tmp_path / "missing.toml")])
    assert result.exit_code == 1
    [line] = [line for line in result.output.splitlines() if line.strip()]
    assert "cannot read it" in line
    assert captured_settings == []


def test_check_reads_the_same_file(tmp_path: Path) -> None:
    config = write(
        tmp_path / "telesrv.toml",
        f'listen = "127.0.0.1:0"\nws-listen = "off"\ndata-dir = "{tmp_path / "data"}"\n',
    )
    result = invoke(["check", "--config", str(config), "--no-connect"])
    assert result.exit_code == 0, result.output
    assert "ok: settings: listen 127.0.0.1:0, websocket off" in result.output
