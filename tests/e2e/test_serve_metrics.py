"""`telesrv serve --metrics-listen ... --log-format json` in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from .test_metrics import http_get
from .test_serve import READY, START_TIMEOUT, STOP_TIMEOUT, free_port, wait_ready

METRICS_LINE = "telesrv metrics on http://"


async def test_serve_with_metrics_and_json_logs(
    tmp_path: Path, database_url: str, redis_url: str, redis: object
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TELESRV_")}
    env["TELESRV_METRICS_LISTEN"] = "127.0.0.1:0"
    log_path = tmp_path / "stderr.log"
    with open(log_path, "wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "telesrv", "--log-format", "json", "serve",
            "--listen", f"127.0.0.1:{port}",
            "--ws-listen", "off",
            "--data-dir", str(tmp_path / "data"),
            "--database-url", database_url,
            "--redis-url", redis_url,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env=env,
        )  # fmt: skip
    try:
        # The metrics address is printed once it listens, before the ready line.
        assert process.stdout is not None
        async with asyncio.timeout(START_TIMEOUT):
            announced = ""
            while not announced.startswith(METRICS_LINE):
                raw = await process.stdout.readline()
                assert raw, log_path.read_text()[-4000:]
                announced = raw.decode().rstrip("\n")
        assert (await wait_ready(process, log_path)) == f"{READY}127.0.0.1:{port}"
        host, _, rest = announced.removeprefix(METRICS_LINE).partition(":")
        metrics_port = int(rest.removesuffix("/metrics"))
        assert await http_get(host, metrics_port, "/healthz") == (200, "ok\n")
        assert await http_get(host, metrics_port, "/readyz") == (200, "ready\n")
        status, text = await http_get(host, metrics_port, "/metrics")
        assert status == 200 and "telesrv_messages_sent_total" in text

        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(STOP_TIMEOUT):
            assert await process.wait() == 0
        logged = [json.loads(line) for line in log_path.read_text().splitlines() if line]
        assert any(e["message"] == "telesrv stopped" for e in logged)
        assert all({"time", "level", "logger", "message"} <= e.keys() for e in logged)
        # Every line carries the process id, and the start-up lines printed on stdout
        # are in the JSON log too.
        assert all(e["pid"] == process.pid for e in logged)
        messages = [e["message"] for e in logged]
        assert f"{READY}127.0.0.1:{port}" in messages
        assert any(m.startswith("telesrv server key fingerprint ") for m in messages)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
