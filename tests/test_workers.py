"""`serve --workers`: what the further processes are started with, and what the first
one prints for processes that join by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from telesrv import app
from telesrv.config import Settings
from telesrv.workers import settings_from_json, settings_to_json, worker_settings


def test_worker_settings_travel_whole() -> None:
    settings = Settings(
        data_dir=Path("/srv/telesrv"),
        dev_login_code="12345",
        auto_register=True,
        send_rate_limit=0,
        workers=4,
        advertise_host="chat.example.org",
        advertise_port=443,
        outbox_lease_timeout=12.5,
    )
    more = worker_settings(settings, "0.0.0.0", 9443, "postgresql://db/t", "unix:///r.sock", 8)
    assert (more.listen_host, more.listen_port) == ("0.0.0.0", 9443)
    assert (more.database_url, more.redis_url) == ("postgresql://db/t", "unix:///r.sock")
    assert more.workers == 1 and more.reuse_port and more.partition_count == 8
    assert settings_from_json(settings_to_json(more)) == more


def test_worker_settings_carry_the_bound_websocket_address() -> None:
    settings = Settings(ws_listen_host="0.0.0.0", ws_listen_port=0, ws_tls_cert="c", ws_tls_key="k")
    more = worker_settings(settings, "0.0.0.0", 9443, "pg", "redis", 4, ws=("0.0.0.0", 9444))
    assert (more.ws_listen_host, more.ws_listen_port) == ("0.0.0.0", 9444)
    assert (more.ws_tls_cert, more.ws_tls_key) == ("c", "k")
    assert settings_from_json(settings_to_json(more)) == more
    off = worker_settings(settings.replace(ws_listen_host=None, ws_listen_port=None),
                          "0.0.0.0", 9443, "pg", "redis", 4)  # fmt: skip
    assert off.ws_listen is None


class _Resources:
    database_url = "postgresql://u@%2Ftmp%2Fpg/telesrv"
    redis_url = "unix:///tmp/telesrv-redis.sock"


@pytest.mark.parametrize(
    ("database_url", "redis_url", "printed"),
    [
        (None, None, ["postgresql://u@%2Ftmp%2Fpg/telesrv", "unix:///tmp/telesrv-redis.sock"]),
        ("postgresql://db/t", None, ["unix:///tmp/telesrv-redis.sock"]),
        ("postgresql://db/t", "redis://cache", []),
    ],
)
def test_serve_prints_the_urls_of_the_servers_it_started(
    database_url: str | None,
    redis_url: str | None,
    printed: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = Settings(database_url=database_url, redis_url=redis_url)
    resources: Any = _Resources()
    app.print_embedded_urls(settings, resources)
    lines = capsys.readouterr().out.splitlines()
    assert [line.rpartition(" ")[2] for line in lines] == printed


def test_serve_workers_flag_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from telesrv import cli

    seen: list[Settings] = []
    monkeypatch.setattr(app, "run", seen.append)
    runner = CliRunner()
    assert runner.invoke(cli.main, ["serve"], env={"TELESRV_WORKERS": None}).exit_code == 0
    assert runner.invoke(cli.main, ["serve", "--workers", "3"]).exit_code == 0
    assert runner.invoke(cli.main, ["serve"], env={"TELESRV_WORKERS": "2"}).exit_code == 0
    assert [s.workers for s in seen] == [1, 3, 2]
    assert runner.invoke(cli.main, ["serve", "--workers", "0"]).exit_code == 2
    assert len(seen) == 3
