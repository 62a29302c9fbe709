"""The server's RSA key: created on first start, then loaded from the data directory.

`server_key.pem` holds the private key (PKCS#8, mode 0600). `server_key.pub.pem`
holds the public key as PKCS#1 (`-----BEGIN RSA PUBLIC KEY-----`), the form
Telethon's `telethon.crypto.rsa.add_key` and other clients take.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from telesrv.mtproto.rsa import rsa_fingerprint

log = logging.getLogger(__name__)

# MTProto encrypts 256-byte blocks with the server key, so the modulus must be 2048 bits.
KEY_BITS = 2048
PUBLIC_EXPONENT = 65537

PRIVATE_KEY_FILE = "server_key.pem"
PUBLIC_KEY_FILE = "server_key.pub.pem"


class ServerKeyError(RuntimeError):
    pass


@dataclass(frozen=True)
class ServerKey:
    private_key: rsa.RSAPrivateKey
    # PKCS#1 PEM text of the public key.
    public_pem: str
    # Signed 64-bit, as MTProto carries it; see fingerprint_hex() for display.
    fingerprint: int
    private_key_path: Path
    public_key_path: Path

    @property
    def n(self) -> int:
        return self.private_key.public_key().public_numbers().n

    @property
    def e(self) -> int:
        return self.private_key.public_key().public_numbers().e

    @property
    def fingerprint_hex(self) -> str:
        return fingerprint_hex(self.fingerprint)


def fingerprint_hex(fingerprint: int) -> str:
    """16 hex digits of the fingerprint's 64-bit two's complement form."""
    return f"{fingerprint & 0xFFFF_FFFF_FFFF_FFFF:016x}"


def load_or_create_server_key(data_dir: Path) -> ServerKey:
    """Load the key from `data_dir`, creating it (and the directory) the first time."""
    data_dir.mkdir(parents=True, exist_ok=True)
    private_path = data_dir / PRIVATE_KEY_FILE
    public_path = data_dir / PUBLIC_KEY_FILE

    if not private_path.exists():
        key = rsa.generate_private_key(public_exponent=PUBLIC_EXPONENT, key_size=KEY_BITS)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        if _write_new_file(private_path, pem, mode=0o600):
            log.info("created server key %s", private_path)
        # else: another process created it first; load theirs below.

    loaded = load_key(data_dir)
    _ensure_public_file(public_path, loaded.public_pem)
    return loaded


def load_key(data_dir: Path) -> ServerKey:
    """The key in `data_dir`, which must exist (nothing is written)."""
    private_path = data_dir / PRIVATE_KEY_FILE
    public_path = data_dir / PUBLIC_KEY_FILE
    private_key = _load_private_key(private_path)
    public_pem = (
        private_key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1)
        .decode("ascii")
    )
    numbers = private_key.public_key().public_numbers()
    return ServerKey(
        private_key=private_key,
        public_pem=public_pem,
        fingerprint=rsa_fingerprint(numbers.n, numbers.e),
        private_key_path=private_path,
        public_key_path=public_path,
    )


def _load_private_key(path: Path) -> rsa.RSAPrivateKey:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        log.warning("%s is readable by other users (mode %o); use chmod 600", path, mode)
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        raise ServerKeyError(f"cannot read the server key {path}: {exc}") from exc
    if not isinstance(key, rsa.RSAPrivateKey) or key.key_size != KEY_BITS:
        raise ServerKeyError(f"{path} must hold a {KEY_BITS}-bit RSA private key")
    return key


def _ensure_public_file(path: Path, public_pem: str) -> None:
    # The private key is the source of truth; a missing or stale public file is rewritten.
    try:
        current = path.read_text(encoding="ascii")
    except FileNotFoundError:
        current = None
    except (OSError, UnicodeDecodeError):
        current = ""
    if current == public_pem:
        return
    if current is not None:
        log.warning("%s does not match the private key; rewriting it", path)
    _replace_file(path, public_pem.encode("ascii"), mode=0o644)


def _write_new_file(path: Path, content: bytes, *, mode: int) -> bool:
    """Atomically create `path` with `content`; False if it already exists."""
    temp_path = _write_temp(path, content, mode)
    try:
        os.link(temp_path, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(temp_path)


def _replace_file(path: Path, content: bytes, *, mode: int) -> None:
    temp_path = _write_temp(path, content, mode)
    try:
        os.replace(temp_path, path)
    except BaseException:
        os.unlink(temp_path)
        raise


def _write_temp(path: Path, content: bytes, mode: int) -> str:
    fd, temp_path = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        os.unlink(temp_path)
        raise
    return temp_path
