"""Start-up refusals of a real `telesrv serve`: one line on stderr, no traceback, a
non-zero exit, and for a port in use no database started first."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import asyncpg
import pytest
from conftest import TEST_PARTITION_COUNT

from telesrv.startup import redact

RUN_TIMEOUT = 120.0


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TELESRV_")}


async def run_telesrv(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`python -m telesrv ARGS` to its end: (exit status, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "telesrv",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env if env is not None else clean_env(),
    )
    try:
        async with asyncio.timeout(RUN_TIMEOUT):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def assert_one_line_refusal(code: int, err: str, *expected: str, alone: bool = True) -> str:
    """The refusal is one line at ERROR, the last one, and no traceback is shown.
    ``alone``: nothing else was logged either (a refusal before anything started);
    else the start's earlier lines (INFO, WARNING) may precede it."""
    assert code != 0
    assert "Traceback" not in err, err
    logged = lines(err)
    if alone:
        assert len(logged) == 1, err
    line = logged[-1]
    assert [x for x in logged if " ERROR " in x or '"level": "error"' in x] == [line], err
    for part in expected:
        assert part in line, line
    return line


@contextlib.contextmanager
def listening_socket() -> Iterator[int]:
    """A port some other program listens on."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize("flag", ["--listen", "--ws-listen", "--metrics-listen"])
async def test_port_in_use_is_one_line_before_any_database(tmp_path: Path, flag: str) -> None:
    data_dir = tmp_path / "data"
    with listening_socket() as port:
        ports = {"--listen": "127.0.0.1:0", "--ws-listen": "127.0.0.1:0"}
        ports[flag] = f"127.0.0.1:{port}"
        args = [a for pair in ports.items() for a in pair]
        # No URLs: the embedded servers would start under data_dir, if anything started.
        code, out, err = await run_telesrv("serve", *args, "--data-dir", str(data_dir))
    line = assert_one_line_refusal(code, err, flag, f"127.0.0.1:{port}", "already in use")
    # date, time, process id, level, logger: the message.
    assert re.match(r"\S+ \S+ \d+ ERROR telesrv: ", line), line
    assert out == ""
    assert not (data_dir / "pg").exists() and not (data_dir / "redis").exists()


@contextlib.contextmanager
def shared_listening_socket() -> Iterator[int]:
    """A port another server's processes listen on together (SO_REUSEPORT), as
    `telesrv serve --workers N` does."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


async def test_workers_do_not_join_a_port_another_server_shares(tmp_path: Path) -> None:
    """Workers share their first process's port; that must not let a second server's
    workers slip in beside another server that listens there the same way."""
    data_dir = tmp_path / "data"
    with shared_listening_socket() as port:
        code, out, err = await run_telesrv(
            "serve", "--workers", "2", "--listen", f"127.0.0.1:{port}", "--ws-listen", "off",
            "--data-dir", str(data_dir),
        )  # fmt: skip
    assert_one_line_refusal(code, err, "--listen", f"127.0.0.1:{port}", "already in use")
    assert out == ""
    assert not (data_dir / "pg").exists() and not (data_dir / "redis").exists()


async def test_port_in_use_in_json_is_one_object_with_the_pid(tmp_path: Path) -> None:
    with listening_socket() as port:
        code, _, err = await run_telesrv(
            "--log-format", "json", "serve",
            "--listen", f"127.0.0.1:{port}", "--ws-listen", "off",
            "--data-dir", str(tmp_path / "data"),
        )  # fmt: skip
    line = assert_one_line_refusal(code, err, "already in use")
    entry = json.loads(line)
    assert entry["level"] == "error" and isinstance(entry["pid"], int)
    assert entry["message"] == f"--listen 127.0.0.1:{port}: address already in use " + (
        "(another process listens there)"
    )


async def test_debug_log_has_the_traceback(tmp_path: Path) -> None:
    with listening_socket() as port:
        code, _, err = await run_telesrv(
            "--log-level", "debug", "serve",
            "--listen", f"127.0.0.1:{port}", "--ws-listen", "off",
            "--data-dir", str(tmp_path / "data"),
        )  # fmt: skip
    assert code != 0
    assert "Traceback" in err and "already in use" in err


@pytest.mark.parametrize(
    ("flag", "url", "expected"),
    [
        ("--database-url", "mysql://db/telesrv", "the scheme must be one of"),
        ("--database-url", "postgresql://db:port/telesrv", "is not a valid URL"),
        ("--redis-url", "http://cache:6379", "the scheme must be one of"),
        ("--redis-url", "redis://", "no host"),
    ],
)
async def test_bad_url_is_one_line(tmp_path: Path, flag: str, url: str, expected: str) -> None:
    code, _, err = await run_telesrv(
        "serve", "--listen", "127.0.0.1:0", "--ws-listen", "off",
        "--data-dir", str(tmp_path / "data"), flag, url,
    )  # fmt: skip
    assert_one_line_refusal(code, err, flag, expected)


@pytest.mark.parametrize(
    ("under", "expected"), [("", "is a file"), ("sub", "cannot be created in")]
)
async def test_unusable_data_dir_is_one_line(tmp_path: Path, under: str, expected: str) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("not a directory")
    code, _, err = await run_telesrv(
        "serve", "--listen", "127.0.0.1:0", "--ws-listen", "off",
        "--data-dir", str(blocker / under if under else blocker),
    )  # fmt: skip
    assert_one_line_refusal(code, err, "--data-dir", expected)


def with_database(url: str, name: str) -> str:
    return urlsplit(url)._replace(path=f"/{name}").geturl()


async def test_missing_database_is_one_line(
    tmp_path: Path, pg_server_url: str, redis_url: str
) -> None:
    missing = f"telesrv_missing_{uuid.uuid4().hex[:8]}"
    code, _, err = await run_telesrv(
        "serve", "--listen", "127.0.0.1:0", "--ws-listen", "off",
        "--data-dir", str(tmp_path / "data"),
        "--database-url", with_database(pg_server_url, missing), "--redis-url", redis_url,
    )  # fmt: skip
    assert_one_line_refusal(code, err, "PostgreSQL", missing, "does not exist", alone=False)


@pytest.fixture
async def password_role(pg_server_url: str) -> AsyncIterator[tuple[str, str]]:
    """A role that must log in with its password (scram), as (name, password): a line
    for it alone goes first in the test server's pg_hba.conf. Skips on a server whose
    pg_hba.conf this process cannot edit (an external test database)."""
    role = f"pw_{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    conn = await asyncpg.connect(pg_server_url)
    try:
        hba = Path(await conn.fetchval("SHOW hba_file"))
        if not os.access(hba, os.W_OK):
            pytest.skip("pg_hba.conf of the test server is not writable here")
        original = hba.read_text()
        await conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        hba.write_text(
            f"local all {role} scram-sha-256\nhost all {role} all scram-sha-256\n" + original
        )
        await conn.execute("SELECT pg_reload_conf()")
        try:
            yield role, password
        finally:
            hba.write_text(original)
            await conn.execute("SELECT pg_reload_conf()")
            await conn.execute(f"DROP ROLE {role}")
    finally:
        await conn.close()


def with_login(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{user}:{quote(password)}@{host}").geturl()


async def wait_refused(url: str) -> None:
    """Until the server has reloaded its pg_hba.conf and asks for the password."""
    async with asyncio.timeout(RUN_TIMEOUT):
        while True:
            try:
                conn = await asyncpg.connect(url)
            except asyncpg.InvalidPasswordError:
                return
            await conn.close()
            await asyncio.sleep(0.05)


async def test_wrong_password_is_one_line(
    tmp_path: Path, pg_server_url: str, redis_url: str, password_role: tuple[str, str]
) -> None:
    role, _ = password_role
    wrong = with_login(pg_server_url, role, "not-the-password")
    await wait_refused(wrong)
    code, _, err = await run_telesrv(
        "serve", "--listen", "127.0.0.1:0", "--ws-listen", "off",
        "--data-dir", str(tmp_path / "data"),
        "--database-url", wrong, "--redis-url", redis_url,
    )  # fmt: skip
    line = assert_one_line_refusal(
        code, err, "PostgreSQL", "password authentication failed", alone=False
    )
    assert "not-the-password" not in line and "***" in line


async def test_check_reports_a_wrong_password(
    tmp_path: Path, pg_server_url: str, redis_url: str, password_role: tuple[str, str]
) -> None:
    role, password = password_role
    wrong = with_login(pg_server_url, role, "not-the-password")
    await wait_refused(wrong)
    args = ["check", "--listen", "127.0.0.1:0", "--ws-listen", "off"]
    args += ["--data-dir", str(tmp_path / "data"), "--redis-url", redis_url]
    code, out, _ = await run_telesrv(*args, "--database-url", wrong)
    assert code == 1
    [failed] = [line for line in lines(out) if line.startswith("FAIL: ")]
    assert "password authentication failed" in failed and "not-the-password" not in out
    # The right password passes (the role may log in; it owns no schema: all to apply).
    code, out, _ = await run_telesrv(
        *args, "--database-url", with_login(pg_server_url, role, password)
    )
    assert code == 0, out
    assert any("accepts the login" in line for line in lines(out))


async def test_redis_refusing_the_password_is_one_line(
    tmp_path: Path, database_url: str, redis_url: str
) -> None:
    # The test Redis has no such user: the login is refused at the first command.
    login = "username=nobody&password=not-the-password"
    wrong = redis_url + ("&" if "?" in redis_url else "?") + login
    code, _, err = await run_telesrv(
        "serve", "--listen", "127.0.0.1:0", "--ws-listen", "off",
        "--data-dir", str(tmp_path / "data"),
        "--database-url", database_url, "--redis-url", wrong,
        # As the test database was made: no warning about another count.
        "--partition-count", str(TEST_PARTITION_COUNT),
    )  # fmt: skip
    line = assert_one_line_refusal(
        code, err, "Redis", "check the password in --redis-url", alone=False
    )
    assert "not-the-password" not in line and "password=***" in line


def test_redact_hides_passwords() -> None:
    assert redact("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert redact("redis://h:6379/0?password=secret&db=1") == "redis://h:6379/0?password=***&db=1"
    assert redact("unix:///s.sock?username=u&password=secret") == (
        "unix:///s.sock?username=u&password=***"
    )
    assert redact("redis://h:6379") == "redis://h:6379"


async def test_a_refused_option_is_one_line_naming_the_help() -> None:
    code, _, err = await run_telesrv("serve", "--listen", "nonsense")
    assert code == 2
    line = assert_one_line_refusal(code, err, "--listen", "expected HOST:PORT")
    assert line.endswith("(see 'telesrv serve --help')")
    # A group called bare still shows its help.
    code, out, err = await run_telesrv("users")
    assert "Usage: telesrv users" in out + err and "ERROR" not in out + err
