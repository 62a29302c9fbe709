"""Why a server cannot start, said in one line.

Anything that stops a start for a reason the operator can fix (a URL that does not
parse, a wrong password, a missing database, a port in use, a data directory that
cannot be written, a data directory another server holds) raises `StartupError`
with a message that names the setting and the cause. The command line prints that
message alone on stderr and exits non-zero; the traceback goes to the DEBUG log.

The checks here run before anything heavy starts (initdb, migrations), so a port in
use fails at once; `telesrv check` runs the same checks without starting anything.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from telesrv.config import Settings

POSTGRES_SCHEMES = frozenset({"postgres", "postgresql"})
REDIS_SCHEMES = frozenset({"redis", "rediss", "unix", "redis+cluster", "rediss+cluster"})


class StartupError(Exception):
    """A start that cannot go on; ``str()`` is the one line shown to the operator.
    Other start-up refusals (a data directory in use, ...) subclass or raise it."""


@dataclass(frozen=True)
class Listener:
    """One address the server will listen on."""

    flag: str
    host: str
    port: int
    reuse_port: bool

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def redact(url: str) -> str:
    """``url`` without its password (messages and logs must not show it)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    # Edited as text: a round trip through urlsplit would turn unix:///path into unix:/path.
    if parts.password is not None:
        url = url.replace(f":{parts.password}@", ":***@", 1)
    # libpq and redis-py both take the password as a query parameter too.
    return re.sub(r"([?&])password=[^&#]*", r"\1password=***", url)


def check_url(flag: str, url: str, schemes: frozenset[str]) -> None:
    """A URL whose scheme we speak and that names a host (or, for ``unix://``, a path)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as exc:
        raise StartupError(f"{flag} {redact(url)!r} is not a valid URL: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        wanted = ", ".join(f"{s}://" for s in sorted(schemes))
        raise StartupError(f"{flag} {redact(url)!r}: the scheme must be one of {wanted}")
    if scheme == "unix":
        if not parts.path:
            raise StartupError(f"{flag} {redact(url)!r}: unix:// needs a socket path")
    elif not parts.hostname and "host=" not in parts.query:
        raise StartupError(f"{flag} {redact(url)!r}: no host in the URL")


def check_urls(settings: Settings) -> None:
    if settings.database_url is not None:
        check_url("--database-url", settings.database_url, POSTGRES_SCHEMES)
    if settings.redis_url is not None:
        check_url("--redis-url", settings.redis_url, REDIS_SCHEMES)


def check_data_dir(path: Path, *, create: bool = True) -> str:
    """The data directory exists (or can be made) and files can be written in it.
    Without ``create``, a missing one is only checked to be creatable."""
    if not create and not path.exists():
        parent = path.absolute().parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise StartupError(f"--data-dir {path}: cannot be created in {parent}")
        return f"--data-dir {path} does not exist yet and can be created"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise StartupError(f"--data-dir {path}: exists and is not a directory") from exc
    except OSError as exc:
        raise StartupError(f"--data-dir {path}: cannot create it: {exc.strerror}") from exc
    try:
        fd, name = tempfile.mkstemp(prefix=".telesrv-check-", dir=path)
    except OSError as exc:
        raise StartupError(f"--data-dir {path}: cannot write in it: {exc.strerror}") from exc
    os.close(fd)
    os.unlink(name)
    return f"--data-dir {path} is writable"


def check_key_files(data_dir: Path) -> str:
    """The server key files when present: readable and a key. Returns what was found."""
    from telesrv.server_key import PRIVATE_KEY_FILE, PUBLIC_KEY_FILE, ServerKeyError, load_key

    private = data_dir / PRIVATE_KEY_FILE
    if not private.exists():
        return f"no server key yet: {private} is created at the first start"
    try:
        key = load_key(data_dir)
    except ServerKeyError as exc:
        raise StartupError(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise StartupError(f"server key {private}: {exc}") from exc
    public = data_dir / PUBLIC_KEY_FILE
    if public.exists() and not os.access(public, os.R_OK):
        raise StartupError(f"server key {public}: not readable")
    return f"server key {private} (fingerprint {key.fingerprint_hex})"


def listeners(settings: Settings) -> list[Listener]:
    """Every address the server binds: MTProto, WebSocket, metrics. Only a worker of a
    server that holds the port already binds it shared: the first process checks it
    unshared even when it will share it with its own workers, so a port that any
    other process listens on (another server's workers too) is refused."""
    shared = settings.reuse_port
    found = [Listener("--listen", settings.listen_host, settings.listen_port, shared)]
    if settings.ws_listen_host is not None and settings.ws_listen_port is not None:
        found.append(
            Listener("--ws-listen", settings.ws_listen_host, settings.ws_listen_port, shared)
        )
    if settings.metrics_host is not None and settings.metrics_port is not None:
        found.append(
            Listener("--metrics-listen", settings.metrics_host, settings.metrics_port, False)
        )
    return found


_BIND_ERRORS = {
    errno.EADDRINUSE: "address already in use (another process listens there)",
    errno.EADDRNOTAVAIL: "not an address of this machine",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def trial_bind(listener: Listener) -> None:
    """Bind (and let go of) every address ``listener`` stands for, with the socket
    options the server itself uses: whatever would refuse the real bind refuses this."""
    try:
        infos = socket.getaddrinfo(
            listener.host,
            listener.port,
            type=socket.SOCK_STREAM,
            flags=socket.AI_PASSIVE,
        )
    except socket.gaierror as exc:
        raise StartupError(
            f"{listener.flag} {listener.address}: cannot resolve {listener.host!r}: {exc.strerror}"
        ) from exc
    seen: set[tuple[int, object]] = set()
    for family, kind, proto, _, sockaddr in infos:
        if (family, sockaddr) in seen:
            continue
        seen.add((family, sockaddr))
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if listener.reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(sockaddr)
                # Only a listening socket conflicts with another listening one.
                sock.listen(1)
            except OSError as exc:
                reason = _BIND_ERRORS.get(exc.errno or 0, exc.strerror or str(exc))
                raise StartupError(f"{listener.flag} {listener.address}: {reason}") from exc


def check_listeners(settings: Settings) -> None:
    for listener in listeners(settings):
        trial_bind(listener)


def preflight(settings: Settings) -> None:
    """What `serve` checks before it starts a database: each failure is a StartupError."""
    check_urls(settings)
    # Not created yet: a start that fails later leaves no empty directory behind.
    check_data_dir(settings.data_dir, create=False)
    check_listeners(settings)


def database_failure(exc: BaseException, url: str) -> StartupError:
    """One line for a PostgreSQL that refused us."""
    import asyncpg

    where = f"PostgreSQL {redact(url)}"
    refused_login = asyncpg.InvalidPasswordError | asyncpg.InvalidAuthorizationSpecificationError
    if isinstance(exc, refused_login):
        return StartupError(f"{where}: {exc} (check the user and password in --database-url)")
    if isinstance(exc, asyncpg.InvalidCatalogNameError):
        return StartupError(f"{where}: {exc} (create it, e.g. createdb, or fix the URL)")
    if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError):
        return StartupError(f"{where}: {exc}")
    if isinstance(exc, OSError | TimeoutError):
        return StartupError(f"{where}: cannot connect: {_os_reason(exc)}")
    return StartupError(f"{where}: {type(exc).__name__}: {exc}")


def redis_failure(exc: BaseException, url: str) -> StartupError:
    """One line for a Redis that refused us."""
    import redis.exceptions

    where = f"Redis {redact(url)}"
    if isinstance(exc, redis.exceptions.AuthenticationError | redis.exceptions.ResponseError):
        return StartupError(f"{where}: {exc} (check the password in --redis-url)")
    if isinstance(exc, redis.exceptions.ConnectionError | OSError | TimeoutError):
        return StartupError(f"{where}: cannot connect: {_os_reason(exc)}")
    return StartupError(f"{where}: {type(exc).__name__}: {exc}")


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
