from __future__ import annotations

from pathlib import Path

import pytest

from telesrv.config import Settings, format_host_port, parse_host_port


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8443", ("127.0.0.1", 8443)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
        ("localhost:443", ("localhost", 443)),
        ("[::1]:8443", ("::1", 8443)),
        (" example.org:1 ", ("example.org", 1)),
    ],
)
def test_parse_host_port(text: str, expected: tuple[str, int]) -> None:
    assert parse_host_port(text) == expected


@pytest.mark.parametrize(
    "text",
    ["8443", "host:", ":8443", "host:port", "host:65536", "host:-1", "::1:8443", "[::1]8443"],
)
def test_parse_host_port_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_host_port(text)


def test_format_host_port_round_trips() -> None:
    for host, port in [("127.0.0.1", 8443), ("::1", 1)]:
        assert parse_host_port(format_host_port(host, port)) == (host, port)


def test_defaults_match_the_contract() -> None:
    settings = Settings()
    assert settings.listen == "127.0.0.1:8443"
    assert settings.ws_listen == "127.0.0.1:8444"
    assert settings.ws_tls_cert is None and settings.ws_tls_key is None
    assert settings.data_dir == Path("./telesrv-data")
    assert settings.database_url is None and settings.redis_url is None
    assert settings.dev_login_code is None
    assert settings.auto_register is False
    assert settings.send_rate_limit == 30
    assert settings.outbox_order_wait == 0.25  # well under the 0.5 s clients give a gap
    assert settings.partition_count == 4
    assert settings.server_key_path == Path("telesrv-data/server_key.pem")
    assert settings.server_public_key_path == Path("telesrv-data/server_key.pub.pem")
    assert settings.files_dir == Path("telesrv-data/files")
    assert settings.uploads_dir == Path("telesrv-data/uploads")


def test_advertised_address_defaults_to_listen() -> None:
    settings = Settings(listen_host="10.0.0.5", listen_port=9000)
    assert (settings.advertised_host, settings.advertised_port) == ("10.0.0.5", 9000)
    moved = settings.replace(advertise_host="chat.example.org", advertise_port=443)
    assert (moved.advertised_host, moved.advertised_port) == ("chat.example.org", 443)
    assert moved.listen == "10.0.0.5:9000"


@pytest.mark.parametrize(
    "overrides",
    [
        {"listen_port": 70000},
        {"send_rate_limit": -1},
        {"dev_login_code": " "},
        {"outbox_workers": 0},
        {"pg_pool_min_size": 5, "pg_pool_max_size": 4},
        {"outbox_workers": 4, "pg_pool_min_size": 1, "pg_pool_max_size": 4},
        {"partition_count": 0},
        {"max_uploads_per_user": 0},
        {"max_upload_bytes_per_user": 0},
        {"upload_idle_ttl": 0},
        {"ws_listen_port": 70000},
        {"ws_listen_host": None},
        {"ws_tls_cert": "cert.pem"},
        {"ws_tls_key": "key.pem"},
        {"ws_upgrade_timeout": 0},
        {"outbox_order_wait": -0.1},
        {"outbox_order_wait": 1.01},
    ],
)
def test_invalid_settings_are_rejected(overrides: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="invalid settings"):
        Settings(**overrides)  # type: ignore[arg-type]


def test_the_order_wait_may_be_zero_or_up_to_its_cap() -> None:
    assert Settings(outbox_order_wait=0).outbox_order_wait == 0
    assert Settings(outbox_order_wait=1.0).outbox_order_wait == 1.0


def test_the_pool_may_be_one_larger_than_the_outbox_workers() -> None:
    # Each worker keeps its claim's connection while it renders with another one.
    settings = Settings(outbox_workers=4, pg_pool_min_size=1, pg_pool_max_size=5)
    assert settings.pg_pool_max_size == 5
