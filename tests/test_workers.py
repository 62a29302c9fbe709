"""`serve --workers`: what the further processes are started with, what the first
one prints for processes that join by hand, how it restarts them, and the lock that
keeps one server per data directory."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from telesrv import app, workers
from telesrv.config import Settings
from telesrv.workers import (
    DataDirInUse,
    DataDirLock,
    WorkerGroup,
    WorkersFailed,
    exit_status,
    restart_delay,
    settings_from_json,
    settings_to_json,
    worker_settings,
)


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


def test_restart_pause_doubles_up_to_its_cap() -> None:
    assert [restart_delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert restart_delay(7) == workers.RESTART_MAX_DELAY == restart_delay(50)
    assert restart_delay(2, first=0.01) == 0.02


def test_exit_status_says_how_a_worker_ended() -> None:
    assert exit_status(-9) == "killed by SIGKILL"
    assert exit_status(3) == "exit status 3"
    assert exit_status(0) == "exit status 0"


async def test_a_worker_that_keeps_dying_stops_the_group(caplog: pytest.LogCaptureFixture) -> None:
    """Each death is logged and followed by a new start; past MAX_QUICK_DEATHS in a row
    the group gives up with WorkersFailed (the server then stops with one line)."""
    dies = f"print({workers.READY + '127.0.0.1:1'!r}, flush=True); raise SystemExit(3)"
    group = WorkerGroup(command=[sys.executable, "-c", dies], first_delay=0.001)
    caplog.set_level(logging.INFO, logger=workers.__name__)
    await group.start(Settings(), 1)
    try:
        with pytest.raises(WorkersFailed, match="died 6 times in a row, last with exit status 3"):
            await asyncio.wait_for(group.wait_failed(), 120)
    finally:
        await group.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == workers.MAX_QUICK_DEATHS
    assert all("died with exit status 3; starting it again" in w for w in warnings)
    started = [r for r in caplog.records if "started (pid" in r.getMessage()]
    assert len(started) == workers.MAX_QUICK_DEATHS + 1


async def test_a_worker_that_no_longer_starts_stops_the_group(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A death, then starts that end before the ready line: those count in the same row
    of failures, each warned about, until the group gives up."""
    marker = tmp_path / "started-once"
    once = (
        f"import pathlib, sys; m = pathlib.Path({str(marker)!r})\n"
        f"if m.exists(): sys.exit(4)\n"
        f"m.touch(); print({workers.READY + '127.0.0.1:1'!r}, flush=True); sys.exit(3)"
    )
    group = WorkerGroup(command=[sys.executable, "-c", once], first_delay=0.001)
    caplog.set_level(logging.INFO, logger=workers.__name__)
    await group.start(Settings(), 1)
    try:
        with pytest.raises(
            WorkersFailed, match="did not start 6 times in a row \\(worker \\d+ exited"
        ):
            await asyncio.wait_for(group.wait_failed(), 120)
    finally:
        await group.stop()
    # Only the group's own lines: asyncio may warn of a child that ended before it
    # was watched, which these do quickly.
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == workers.__name__
    ]
    assert len(warnings) == workers.MAX_QUICK_DEATHS
    # (How the first one ended is test_a_worker_that_keeps_dying_stops_the_group's.)
    assert "died with " in warnings[0] and "; starting it again in " in warnings[0]
    assert all(
        "did not start (worker " in w and "exited before it was ready); trying again in " in w
        for w in warnings[1:]
    )


async def test_a_killed_worker_is_replaced(caplog: pytest.LogCaptureFixture) -> None:
    lives = f"import time; print({workers.READY + '127.0.0.1:1'!r}, flush=True); time.sleep(600)"
    group = WorkerGroup(command=[sys.executable, "-c", lives], first_delay=0.001)
    caplog.set_level(logging.INFO, logger=workers.__name__)
    await group.start(Settings(), 2)
    try:
        before = group.pids
        os.kill(before[0], signal.SIGKILL)
        async with asyncio.timeout(60):
            while len(set(group.pids) - set(before)) != 1:
                await asyncio.sleep(0.02)
        assert len(group.pids) == 2 and before[1] in group.pids
        assert any(
            r.levelno == logging.WARNING
            and f"(pid {before[0]}) died with killed by SIGKILL" in r.getMessage()
            for r in caplog.records
        )
    finally:
        await group.stop()
    assert group.pids == []


def test_a_data_directory_has_one_owner(tmp_path: Path) -> None:
    first = DataDirLock(tmp_path / "data")
    first.acquire()
    try:
        assert (tmp_path / "data" / "serve.lock").read_text() == f"{os.getpid()}\n"
        with pytest.raises(DataDirInUse, match=rf"pid {os.getpid()}\); pass --join"):
            DataDirLock(tmp_path / "data").acquire()
    finally:
        first.release()
    second = DataDirLock(tmp_path / "data")  # released: free again
    second.acquire()
    second.release()


def test_a_new_owner_waits_for_the_guests_of_an_earlier_one(tmp_path: Path) -> None:
    """A process that joined (--join, or a worker) uses the embedded databases: while it
    runs, a new owner is refused even though the owner it joined is gone; guests of a
    running owner are welcome."""
    data_dir = tmp_path / "data"
    owner = DataDirLock(data_dir)
    owner.acquire()
    guest = DataDirLock(data_dir)
    guest.join()
    owner.release()  # the owner is gone (killed), its guest runs on
    try:
        with pytest.raises(DataDirInUse, match="joined an earlier telesrv serve"):
            DataDirLock(data_dir).acquire()
        another = DataDirLock(data_dir)  # joining is still allowed
        another.join()
        another.release()
    finally:
        guest.release()
    new_owner = DataDirLock(data_dir)  # no guest left: free again
    new_owner.acquire()
    with_guest = DataDirLock(data_dir)
    with_guest.join()  # a guest of the new owner
    with_guest.release()
    new_owner.release()


def test_metrics_dir_is_fresh_and_dead_servers_dirs_go(tmp_path: Path) -> None:
    root = tmp_path / "metrics"
    (root / "999999999").mkdir(parents=True)  # a server no longer running
    (root / str(os.getppid())).mkdir()  # one that runs
    (root / str(os.getpid())).mkdir()
    (root / str(os.getpid()) / "counter_1.db").write_bytes(b"old")
    mine = workers.prepare_metrics_dir(tmp_path)
    assert mine == root / str(os.getpid()) and list(mine.iterdir()) == []
    assert sorted(p.name for p in root.iterdir()) == sorted([str(os.getppid()), str(os.getpid())])


WORKER_METRICS = """
from prometheus_client import Counter, Gauge, Histogram
Counter("t_calls", "calls", ["kind"]).labels("a").inc(3)
Gauge("t_open", "open", multiprocess_mode="livesum").set(4)
Histogram("t_seconds", "seconds", buckets=(1.0,)).observe(0.5)
"""


def test_metrics_of_workers_add_to_the_first_process(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    own = CollectorRegistry()
    Counter("t_calls", "calls", ["kind"], registry=own).labels("a").inc(2)
    Gauge("t_open", "open", registry=own).set(1)
    Histogram("t_seconds", "seconds", buckets=(1.0,), registry=own).observe(2.0)
    env = {**os.environ, workers.MULTIPROC_ENV: str(tmp_path)}
    for _ in range(2):  # two workers
        subprocess.run([sys.executable, "-c", WORKER_METRICS], env=env, check=True)
    shown = CollectorRegistry(auto_describe=False)
    shown.register(workers.WorkersCollector(own, tmp_path))
    text = generate_latest(shown).decode()
    assert 't_calls_total{kind="a"} 8.0' in text
    assert "t_open 9.0" in text
    assert 't_seconds_bucket{le="1.0"} 2.0' in text
    assert 't_seconds_bucket{le="+Inf"} 3.0' in text
    assert "t_seconds_count 3.0" in text
