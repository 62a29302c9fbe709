from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from telethon.crypto import rsa as telethon_rsa

from telesrv.server_key import (
    ServerKeyError,
    fingerprint_hex,
    load_or_create_server_key,
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_first_start_creates_both_files(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key = load_or_create_server_key(data_dir)
    private_path = data_dir / "server_key.pem"
    public_path = data_dir / "server_key.pub.pem"
    assert key.private_key_path == private_path and key.public_key_path == public_path
    assert _mode(private_path) == 0o600
    public_text = public_path.read_text()
    assert public_text.startswith("-----BEGIN RSA PUBLIC KEY-----\n")
    assert public_text.rstrip().endswith("-----END RSA PUBLIC KEY-----")
    assert public_text == key.public_pem
    assert key.private_key.key_size == 2048 and key.e == 65537
    loaded = serialization.load_pem_public_key(public_text.encode())
    assert isinstance(loaded, rsa.RSAPublicKey)
    assert loaded.public_numbers().n == key.n


def test_second_start_loads_the_same_key(tmp_path: Path) -> None:
    first = load_or_create_server_key(tmp_path)
    second = load_or_create_server_key(tmp_path)
    assert second.n == first.n and second.fingerprint == first.fingerprint


def test_fingerprint_is_what_telethon_computes(tmp_path: Path) -> None:
    key = load_or_create_server_key(tmp_path)
    telethon_rsa.add_key(key.public_pem, old=False)
    try:
        assert key.fingerprint in telethon_rsa._server_keys
    finally:
        telethon_rsa._server_keys.pop(key.fingerprint, None)
    assert key.fingerprint_hex == fingerprint_hex(key.fingerprint)
    assert len(key.fingerprint_hex) == 16


def test_fingerprint_hex_uses_twos_complement() -> None:
    assert fingerprint_hex(-1) == "ffffffffffffffff"
    assert fingerprint_hex(0x0123456789ABCDEF) == "0123456789abcdef"
    assert fingerprint_hex(-(2**63)) == "8000000000000000"


def test_missing_or_stale_public_file_is_rewritten(tmp_path: Path) -> None:
    key = load_or_create_server_key(tmp_path)
    public_path = tmp_path / "server_key.pub.pem"
    public_path.unlink()
    assert load_or_create_server_key(tmp_path).public_pem == key.public_pem
    assert public_path.read_text() == key.public_pem
    public_path.write_text("-----BEGIN RSA PUBLIC KEY-----\ngarbage\n")
    assert load_or_create_server_key(tmp_path).n == key.n
    assert public_path.read_text() == key.public_pem


def test_wrong_key_size_is_refused(tmp_path: Path) -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    (tmp_path / "server_key.pem").write_bytes(
        small.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(ServerKeyError, match="2048-bit"):
        load_or_create_server_key(tmp_path)


def test_unreadable_key_is_refused(tmp_path: Path) -> None:
    (tmp_path / "server_key.pem").write_text("not a key")
    with pytest.raises(ServerKeyError, match="cannot read"):
        load_or_create_server_key(tmp_path)
