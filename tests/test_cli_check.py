"""`telesrv check` in a subprocess: one line per check, the exit status says whether
every check passed, and nothing is started or created."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_startup import lines, listening_socket, run_telesrv

from telesrv.cli.options import settings_refusal
from telesrv.cli.serve import serve
from telesrv.config import Settings
from telesrv.workers import DataDirLock


async def test_check_passes_a_good_configuration(
    tmp_path: Path, database_url: str, redis_url: str
) -> None:
    data_dir = tmp_path / "data"
    code, out, err = await run_telesrv(
        "check", "--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0",
        "--metrics-listen", "127.0.0.1:0", "--data-dir", str(data_dir),
        "--database-url", database_url, "--redis-url", redis_url,
    )  # fmt: skip
    assert code == 0, out + err
    reported = lines(out)
    assert all(line.startswith("ok: ") for line in reported), reported
    text = "\n".join(reported)
    for expected in (
        "--listen 127.0.0.1:0 can be bound",
        "--ws-listen 127.0.0.1:0 can be bound",
        "--metrics-listen 127.0.0.1:0 can be bound",
        "does not exist yet and can be created",
        "no server key yet",
        "accepts the login (schema up to date)",
        "answers",
    ):
        assert expected in text, text
    assert not data_dir.exists()


async def test_check_fails_on_each_problem_and_goes_on(tmp_path: Path) -> None:
    with listening_socket() as port:
        code, out, _ = await run_telesrv(
            "check", "--listen", f"127.0.0.1:{port}", "--ws-listen", "off",
            "--data-dir", str(tmp_path / "data"),
            "--database-url", "mysql://db/x", "--redis-url", "redis://127.0.0.1:1",
        )  # fmt: skip
    assert code == 1
    failed = [line for line in lines(out) if line.startswith("FAIL: ")]
    assert len(failed) == 3, out
    assert "--database-url" in failed[0] and "scheme" in failed[0]
    assert f"--listen 127.0.0.1:{port}: address already in use" in failed[1]
    # No login is tried with a URL that does not parse.
    assert "Redis redis://127.0.0.1:1: cannot connect" in failed[2]
    assert all(line.startswith(("ok: ", "FAIL: ")) for line in lines(out))


async def test_check_reports_a_bad_server_key(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "server_key.pem").write_text("not a key\n")
    (data_dir / "server_key.pem").chmod(0o600)
    code, out, _ = await run_telesrv(
        "check", "--listen", "127.0.0.1:0", "--ws-listen", "off", "--data-dir", str(data_dir)
    )
    assert code == 1
    [failed] = [line for line in lines(out) if line.startswith("FAIL: ")]
    assert "server_key.pem" in failed


async def test_check_reports_a_data_dir_held_by_a_server(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    lock = DataDirLock(data_dir)
    lock.acquire()  # as a running serve holds it (this test's process stands in)
    try:
        args = ["check", "--listen", "127.0.0.1:0", "--ws-listen", "off"]
        code, out, _ = await run_telesrv(*args, "--data-dir", str(data_dir))
        assert code == 1
        [failed] = [line for line in lines(out) if line.startswith("FAIL: ")]
        assert f"is in use by a running telesrv serve (pid {os.getpid()})" in failed
        code, out, _ = await run_telesrv(*args, "--data-dir", str(data_dir), "--join")
        assert code == 0, out
        assert f"joins the server holding --data-dir (pid {os.getpid()})" in out
    finally:
        lock.release()
    code, out, _ = await run_telesrv(*args, "--data-dir", str(data_dir))
    assert code == 0 and "is not held by a running server" in out


async def test_check_reports_a_data_dir_with_guests_of_a_gone_server(tmp_path: Path) -> None:
    """A process that joined a server whose owner is gone still uses the data directory."""
    data_dir = tmp_path / "data"
    guest = DataDirLock(data_dir)
    guest.join()  # as a `serve --join` that outlived its owner (this test stands in)
    try:
        args = ["check", "--listen", "127.0.0.1:0", "--ws-listen", "off"]
        code, out, _ = await run_telesrv(*args, "--data-dir", str(data_dir))
        assert code == 1
        [failed] = [line for line in lines(out) if line.startswith("FAIL: ")]
        assert "joined an earlier telesrv serve (--join)" in failed
        code, out, _ = await run_telesrv(*args, "--data-dir", str(data_dir), "--join")
        assert code == 0, out
    finally:
        guest.release()
    code, out, _ = await run_telesrv(*args, "--data-dir", str(data_dir))
    assert code == 0 and "is not held by a running server" in out


@pytest.mark.parametrize(("listen", "refused"), [("127.0.0.1:0", False), ("0.0.0.0:0", True)])
async def test_check_refuses_the_dev_login_code_beyond_loopback(
    tmp_path: Path, listen: str, refused: bool
) -> None:
    args = ["check", "--listen", listen, "--ws-listen", "off", "--dev-login-code", "12345"]
    code, out, _ = await run_telesrv(*args, "--data-dir", str(tmp_path / "data"))
    failed = [line for line in lines(out) if line.startswith("FAIL: ")]
    if refused:
        assert code == 1
        assert failed == [
            "FAIL: --dev-login-code with a listener beyond loopback: anyone who can reach "
            "the server can sign in as any user"
        ]
    else:
        assert code == 0 and not failed, out
        assert "ok: login codes: --dev-login-code on loopback only" in out


async def test_check_says_how_login_codes_reach_people(tmp_path: Path) -> None:
    args = ["check", "--listen", "127.0.0.1:0", "--ws-listen", "off"]
    code, out, _ = await run_telesrv(*args, "--data-dir", str(tmp_path / "data"))
    assert code == 0 and "ok: login codes: no delivery hook" in out
    hooked = [*args, "--login-code-command", "/bin/true", "--data-dir", str(tmp_path / "d2")]
    code, out, _ = await run_telesrv(*hooked)
    assert code == 0 and "ok: login codes: delivered by --login-code-command" in out


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            ("--pg-pool-min-size", "5", "--pg-pool-max-size", "3"),
            "need 1 <= --pg-pool-min-size <= --pg-pool-max-size",
        ),
        (
            ("--pg-pool-max-size", "2", "--outbox-workers", "2"),
            "--pg-pool-max-size must be greater than --outbox-workers",
        ),
        (("--login-code-command", " "), "--login-code-command must not be empty"),
    ],
)
async def test_check_names_the_options_of_refused_settings(
    tmp_path: Path, given: tuple[str, ...], said: str
) -> None:
    args = ["check", "--listen", "127.0.0.1:0", "--ws-listen", "off", *given]
    code, out, _ = await run_telesrv(*args, "--data-dir", str(tmp_path / "data"))
    assert code == 1
    assert lines(out) == [f"FAIL: settings: invalid settings: {said}"]


def test_refused_settings_name_options_of_other_names_and_units() -> None:
    with pytest.raises(ValueError) as refused:
        Settings(min_free_disk_bytes=-1, workers=0, listen_port=70000)
    message = settings_refusal(refused.value, serve.params).format_message()
    assert "--min-free-disk-mb must be >= 0" in message
    assert "--workers must be >= 1" in message
    # Words that are no field stay as they are.
    assert "listen port out of range: 70000" in message
    assert "_" not in message


def test_a_plain_word_is_an_option_only_where_a_problem_begins_with_it() -> None:
    # "join" and "workers" are fields and plain words: an echoed value keeps them.
    refused = ValueError(
        "invalid settings: workers must be >= 1; the webhook's port could not be cast as "
        "'join'; need 1 <= pg_pool_min_size <= pg_pool_max_size for the workers"
    )
    message = settings_refusal(refused, serve.params).format_message()
    assert message == (
        "invalid settings: --workers must be >= 1; the webhook's port could not be cast as "
        "'join'; need 1 <= --pg-pool-min-size <= --pg-pool-max-size for the workers"
    )
