from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from telesrv import app, cli
from telesrv.config import Settings
from telesrv.mtproto.rsa import rsa_fingerprint

CONTRACT_FLAGS = {
    "--listen": "TELESRV_LISTEN",
    "--data-dir": "TELESRV_DATA_DIR",
    "--database-url": "TELESRV_DATABASE_URL",
    "--redis-url": "TELESRV_REDIS_URL",
    "--dev-login-code": "TELESRV_DEV_LOGIN_CODE",
    "--auto-register": "TELESRV_AUTO_REGISTER",
    "--send-rate-limit": "TELESRV_SEND_RATE_LIMIT",
    "--ws-listen": "TELESRV_WS_LISTEN",
    "--ws-tls-cert": "TELESRV_WS_TLS_CERT",
    "--ws-tls-key": "TELESRV_WS_TLS_KEY",
}


@pytest.fixture
def captured_settings(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    """Replace the server run with a recorder of the Settings `serve` built."""
    seen: list[Settings] = []
    monkeypatch.setattr(app, "run", seen.append)
    return seen


def test_serve_help_lists_every_contract_flag_and_env_var() -> None:
    result = CliRunner().invoke(cli.main, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    for flag, env_var in CONTRACT_FLAGS.items():
        assert flag in result.output
        assert env_var in result.output


def test_serve_defaults(captured_settings: list[Settings]) -> None:
    result = CliRunner().invoke(cli.main, ["serve"], env={k: None for k in CONTRACT_FLAGS.values()})
    assert result.exit_code == 0, result.output
    assert captured_settings == [Settings()]


def test_serve_flags_build_settings(captured_settings: list[Settings], tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli.main,
        [
            "serve",
            "--listen", "0.0.0.0:9443",
            "--data-dir", str(tmp_path),
            "--database-url", "postgresql://u@db/telesrv",
            "--redis-url", "redis://cache:6379/0",
            "--dev-login-code", "12345",
            "--auto-register",
            "--send-rate-limit", "0",
            "--advertise", "chat.example.org:443",
            "--partition-count", "8",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [settings] = captured_settings
    assert (settings.listen_host, settings.listen_port) == ("0.0.0.0", 9443)
    assert settings.data_dir == tmp_path
    assert settings.database_url == "postgresql://u@db/telesrv"
    assert settings.redis_url == "redis://cache:6379/0"
    assert settings.dev_login_code == "12345"
    assert settings.auto_register is True
    assert settings.send_rate_limit == 0
    assert (settings.advertised_host, settings.advertised_port) == ("chat.example.org", 443)
    assert settings.partition_count == 8


def test_serve_reads_environment(captured_settings: list[Settings], tmp_path: Path) -> None:
    env = {
        "TELESRV_LISTEN": "127.0.0.1:0",
        "TELESRV_DATA_DIR": str(tmp_path),
        "TELESRV_DATABASE_URL": "postgresql://env/db",
        "TELESRV_REDIS_URL": "unix:///tmp/r.sock",
        "TELESRV_DEV_LOGIN_CODE": "22222",
        "TELESRV_AUTO_REGISTER": "1",
        "TELESRV_SEND_RATE_LIMIT": "7",
    }
    result = CliRunner().invoke(cli.main, ["serve"], env=env)
    assert result.exit_code == 0, result.output
    [settings] = captured_settings
    assert settings == Settings(
        listen_host="127.0.0.1",
        listen_port=0,
        data_dir=tmp_path,
        database_url="postgresql://env/db",
        redis_url="unix:///tmp/r.sock",
        dev_login_code="22222",
        auto_register=True,
        send_rate_limit=7,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--listen", "nonsense"],
        ["--send-rate-limit", "-1"],
        ["--pg-pool-min-size", "20", "--pg-pool-max-size", "10"],
    ],
)
def test_serve_rejects_bad_flags(captured_settings: list[Settings], args: list[str]) -> None:
    result = CliRunner().invoke(cli.main, ["serve", *args])
    assert result.exit_code == 2
    assert captured_settings == []


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ([], {}, ("127.0.0.1", 8444)),
        (["--ws-listen", "0.0.0.0:443"], {}, ("0.0.0.0", 443)),
        (["--ws-listen", "off"], {}, (None, None)),
        ([], {"TELESRV_WS_LISTEN": "[::1]:0"}, ("::1", 0)),
        ([], {"TELESRV_WS_LISTEN": "OFF"}, (None, None)),
    ],
)
def test_serve_websocket_listen(
    captured_settings: list[Settings],
    args: list[str],
    env: dict[str, str],
    expected: tuple[str | None, int | None],
) -> None:
    result = CliRunner().invoke(cli.main, ["serve", *args], env={"TELESRV_WS_LISTEN": None, **env})
    assert result.exit_code == 0, result.output
    [settings] = captured_settings
    assert (settings.ws_listen_host, settings.ws_listen_port) == expected


def test_serve_websocket_tls_flags(captured_settings: list[Settings], tmp_path: Path) -> None:
    from gateway.test_websocket import make_certificate

    cert, key = make_certificate(tmp_path)
    runner = CliRunner()
    result = runner.invoke(
        cli.main, ["serve", "--ws-tls-cert", str(cert)], env={"TELESRV_WS_TLS_KEY": str(key)}
    )
    assert result.exit_code == 0, result.output
    [settings] = captured_settings
    assert (settings.ws_tls_cert, settings.ws_tls_key) == (str(cert), str(key))
    # One without the other, a missing file, or files that are no certificate and key.
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    for args in (
        ["--ws-tls-cert", str(cert)],
        ["--ws-tls-key", str(key)],
        ["--ws-tls-cert", str(tmp_path / "missing.pem"), "--ws-tls-key", str(key)],
        ["--ws-tls-cert", str(garbage), "--ws-tls-key", str(key)],
        ["--ws-tls-cert", str(key), "--ws-tls-key", str(cert)],
    ):
        bad = runner.invoke(cli.main, ["serve", *args], env={"TELESRV_WS_TLS_KEY": None})
        assert bad.exit_code == 2, (args, bad.output)
    assert len(captured_settings) == 1


@pytest.mark.parametrize("value", ["nonsense", "8444", "of", "host:99999"])
def test_serve_rejects_bad_websocket_address(captured_settings: list[Settings], value: str) -> None:
    result = CliRunner().invoke(cli.main, ["serve", "--ws-listen", value])
    assert result.exit_code == 2, result.output
    assert captured_settings == []


def test_serve_without_gateway_fails_clearly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(app, "GATEWAY_MODULE", "telesrv.gateway.no_such_module")
    result = CliRunner().invoke(cli.main, ["serve", "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 1
    assert "gateway" in result.output and "not part of this build" in result.output
    # It fails before starting anything under the data directory.
    assert not (tmp_path / "d").exists()


def test_key_command_creates_key_files(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    result = CliRunner().invoke(cli.main, ["key", "--data-dir", str(data_dir)])
    assert result.exit_code == 0, result.output
    private_path = data_dir / "server_key.pem"
    public_path = data_dir / "server_key.pub.pem"
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    assert private_path.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    public_pem = public_path.read_text()
    assert public_pem.startswith("-----BEGIN RSA PUBLIC KEY-----")
    assert public_pem in result.output
    fingerprint_line = next(
        line for line in result.output.splitlines() if line.startswith("fingerprint: ")
    )
    fingerprint = fingerprint_line.removeprefix("fingerprint: ")
    assert len(fingerprint) == 16 and int(fingerprint, 16) >= 0

    again = CliRunner().invoke(cli.main, ["key", "--data-dir", str(data_dir)])
    assert fingerprint_line in again.output
    assert public_path.read_text() == public_pem


def test_key_command_prints_the_forms_web_clients_take(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.main, ["key", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = dict(line.split(": ", 1) for line in result.output.splitlines() if ": " in line)
    key = serialization.load_pem_public_key((tmp_path / "server_key.pub.pem").read_bytes())
    assert isinstance(key, rsa.RSAPublicKey)
    numbers = key.public_numbers()
    modulus = lines["modulus (hex)"]
    assert modulus == modulus.lower() and not modulus.startswith("0x")
    assert int(modulus, 16) == numbers.n and len(modulus) == 512  # 2048 bits, no leading 0
    assert lines["exponent (hex)"] == "010001" and int("010001", 16) == numbers.e
    signed = int(lines["fingerprint (signed int64)"])
    assert -(2**63) <= signed < 2**63
    assert signed == rsa_fingerprint(numbers.n, numbers.e)
    # The same number as the hex fingerprint, read as two's complement.
    assert signed & (2**64 - 1) == int(lines["fingerprint"], 16)


def test_bench_discovers_commands(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    package = tmp_path / "fake_bench_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_shared.py").write_text("raise RuntimeError('helpers are not commands')\n")
    (package / "round_trip.py").write_text(
        "import click\n"
        "@click.command()\n"
        "@click.option('--n', type=int, default=1)\n"
        "def command(n):\n"
        "    '''Measure round trips.'''\n"
        "    click.echo('table')\n"
        "    click.echo('{\"n\": %d}' % n)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("telesrv.cli.bench.BENCH_PACKAGE", "fake_bench_pkg")

    listing = CliRunner().invoke(cli.main, ["bench", "--help"])
    assert listing.exit_code == 0, listing.output
    assert "round-trip" in listing.output and "_shared" not in listing.output

    run = CliRunner().invoke(cli.main, ["bench", "round-trip", "--n", "3"])
    assert run.exit_code == 0, run.output
    assert run.output.splitlines()[-1] == '{"n": 3}'

    assert CliRunner().invoke(cli.main, ["bench", "no-such"]).exit_code == 2


def test_serve_phone_lookup_limits(captured_settings: list[Settings]) -> None:
    result = CliRunner().invoke(
        cli.main,
        ["serve", "--phone-lookup-rate-limit", "0"],
        env={"TELESRV_PHONE_LOOKUP_DAILY_LIMIT": "77"},
    )
    assert result.exit_code == 0, result.output
    [settings] = captured_settings
    assert (settings.phone_lookup_rate_limit, settings.phone_lookup_daily_limit) == (0, 77)
    bad = CliRunner().invoke(cli.main, ["serve", "--phone-lookup-daily-limit", "-1"])
    assert bad.exit_code == 2 and len(captured_settings) == 1


def test_every_real_bench_module_is_a_command() -> None:
    """`telesrv bench --help` lists the package's own benchmarks, and each public module
    of the package defines its command (helpers are named with a leading underscore)."""
    from telesrv.cli.bench import _bench_modules

    listing = CliRunner().invoke(cli.main, ["bench", "--help"])
    assert listing.exit_code == 0, listing.output
    names = _bench_modules()
    assert {"tl", "gateway", "send", "e2e", "fuzz", "media"} <= set(names)
    for name in names:
        assert name in listing.output
        command = CliRunner().invoke(cli.main, ["bench", name, "--help"])
        assert command.exit_code == 0, (name, command.output)
