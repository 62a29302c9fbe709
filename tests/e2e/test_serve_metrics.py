"""`telesrv serve --metrics-listen ... --log-format json` in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

from serve_process import METRICS_LINE, READY, free_port, serve_args, serving

from .test_metrics import http_get


async def test_serve_with_metrics_and_json_logs(
    tmp_path: Path, database_url: str, redis_url: str, redis: object
) -> None:
    port = free_port()
    args = serve_args(
        tmp_path / "data",
        database_url=database_url,
        redis_url=redis_url,
        listen=f"127.0.0.1:{port}",
        before=("--log-format", "json"),
    )
    env = {"TELESRV_METRICS_LISTEN": "127.0.0.1:0"}
    async with serving(args, tmp_path / "stderr.log", env) as serve:
        assert serve.lines[-1] == f"{READY}127.0.0.1:{port}"
        # The metrics address is printed once it listens, before the ready line.
        [announced] = [line for line in serve.lines[:-1] if line.startswith(METRICS_LINE)]
        host, _, rest = announced.removeprefix(METRICS_LINE).partition(":")
        metrics_port = int(rest.removesuffix("/metrics"))
        assert await http_get(host, metrics_port, "/healthz") == (200, "ok\n")
        assert await http_get(host, metrics_port, "/readyz") == (200, "ready\n")
        status, text = await http_get(host, metrics_port, "/metrics")
        assert status == 200 and "telesrv_messages_sent_total" in text

        await serve.stop()
        logged = [json.loads(line) for line in serve.log().splitlines() if line]
        assert any(e["message"] == "telesrv stopped" for e in logged)
        assert all({"time", "level", "logger", "message"} <= e.keys() for e in logged)
        # Every line carries the process id, and the start-up lines printed on stdout
        # are in the JSON log too.
        assert all(e["pid"] == serve.process.pid for e in logged)
        messages = [e["message"] for e in logged]
        assert f"{READY}127.0.0.1:{port}" in messages
        assert any(m.startswith("telesrv server key fingerprint ") for m in messages)
