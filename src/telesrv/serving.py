"""What the running process reports and how it follows the others: its readiness
(/readyz), and the bus handlers ``build_server`` subscribes (caches forgotten when
another process changes what they hold, a QR login accepted elsewhere, a login an
admin ended)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from telesrv.delivery.cluster import Cluster, keys_of
from telesrv.gateway.metrics import CHECK_TIMEOUT, Readiness
from telesrv.gateway.server import Gateway
from telesrv.rpc.qr_login import login_token_update
from telesrv.services.accounts import AuthorizationService
from telesrv.services.auth_keys import AuthKeyService
from telesrv.services.projection_cache import ProjectionCache
from telesrv.services.qr_login import QrLoginService
from telesrv.store import migrate

if TYPE_CHECKING:
    from telesrv.app import Resources
    from telesrv.config import Settings


# The write probe's file, in the data directory; a page, so that a file system with
# no block left refuses it.
WRITE_PROBE_NAME = ".write-probe"
WRITE_PROBE_BYTES = 4096


def disk_problem(directories: list[Path], min_free_bytes: int) -> str | None:
    """Why the file systems of ``directories`` cannot take writes, or None: one with
    fewer than ``min_free_bytes`` free for us, or the first directory refusing a small
    written and synced file (full, read-only, gone). Blocks on the file system: run
    it in a thread."""
    seen: set[int] = set()
    for directory in directories:
        try:
            device = os.stat(directory).st_dev
            if device in seen:
                continue
            seen.add(device)
            room = os.statvfs(directory)
        except OSError as e:
            return f"{directory}: {e.strerror or e}"
        free = room.f_bavail * room.f_frsize
        if free < min_free_bytes:
            return f"{free} bytes free on {directory}'s file system, below {min_free_bytes}"
    if not directories:
        return None
    probe = directories[0] / WRITE_PROBE_NAME
    try:
        with open(probe, "wb") as f:
            f.write(b"\0" * WRITE_PROBE_BYTES)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        return f"cannot write in {directories[0]}: {e.strerror or e}"
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
    return None


def disk_directories(settings: Settings) -> list[Path]:
    """Where this process writes: the data directory first (files, uploads, the key),
    and the embedded PostgreSQL's when it runs one (often the same file system)."""
    directories = [settings.data_dir]
    if settings.database_url is None and settings.embedded_postgres_dir.exists():
        directories.append(settings.embedded_postgres_dir)
    return directories


def readiness(resources: Resources) -> Readiness:
    """/readyz: PostgreSQL answers and has every migration of this build, Redis answers,
    and the disk takes writes (see ``disk_problem``)."""
    settings = resources.settings

    # The checks run under a deadline in this task, not in tasks of their own (as
    # wait_for would make): a probe that goes away cancels them here, and what they
    # end with is seen here, never left as an exception nobody retrieves.
    async def postgres() -> dict[str, str | None]:
        try:
            async with asyncio.timeout(CHECK_TIMEOUT):
                pending = await migrate.pending_versions(resources.db.pool)
        except Exception as e:
            return {"postgres": f"unreachable ({type(e).__name__}: {e})"}
        missing = ", ".join(f"{v:04d}" for v in pending)
        return {"postgres": None, "migrations": f"not applied: {missing}" if pending else None}

    async def redis() -> dict[str, str | None]:
        try:
            async with asyncio.timeout(CHECK_TIMEOUT):
                await resources.redis.ping()
        except Exception as e:
            return {"redis": f"unreachable ({type(e).__name__}: {e})"}
        return {"redis": None}

    async def disk() -> dict[str, str | None]:
        try:
            problem = await asyncio.wait_for(
                asyncio.to_thread(
                    disk_problem, disk_directories(settings), settings.min_free_disk_bytes
                ),
                CHECK_TIMEOUT,
            )
        except TimeoutError:
            problem = f"the data directory's file system did not answer in {CHECK_TIMEOUT}s"
        return {"disk": problem}

    async def check() -> dict[str, str | None]:
        pg, rd, dk = await asyncio.gather(postgres(), redis(), disk())
        return pg | rd | dk

    return check


class EndedElsewhere:
    """An admin command (in any process) ended this key's authorization: forget it and
    close its sessions here."""

    def __init__(self, authorizations: AuthorizationService, gateway: Gateway) -> None:
        self._authorizations = authorizations
        self._gateway = gateway

    def __call__(self, perm_auth_key_id: int) -> None:
        self._authorizations.ended_elsewhere(perm_auth_key_id)
        self._gateway.sessions.close_key(perm_auth_key_id)


class SharedInvalidations:
    """What one process changes, the others forget (their caches and sessions)."""

    def __init__(
        self,
        cluster: Cluster,
        gateway: Gateway,
        auth_keys: AuthKeyService,
        authorizations: AuthorizationService,
        projections: ProjectionCache,
    ) -> None:
        self._cluster = cluster
        self._gateway = gateway
        self._auth_keys = auth_keys
        self._authorizations = authorizations
        self._projections = projections

    def subscribe(self) -> None:
        self._authorizations.on_change = self.logins_changed
        self._auth_keys.on_change = self.keys_changed
        self._projections.on_change = self.users_changed
        self._cluster.on("auth", self.on_logins)
        self._cluster.on("key", self.on_keys)
        self._cluster.on("users", self.on_users)
        self._cluster.on_resubscribe(self.forget_all)

    def logins_changed(self, keys: list[int], close: bool) -> None:
        self._cluster.broadcast("auth", ids=keys, close=close)

    def on_logins(self, message: dict[str, Any]) -> None:
        keys = list(keys_of(message))
        self._authorizations.forget(keys)
        for key in keys:
            if message.get("close"):
                self._gateway.sessions.close_key(key)
            else:
                self._gateway.sessions.authorization_unknown(key)

    def keys_changed(self, ids: list[int]) -> None:
        self._cluster.broadcast("key", ids=ids)

    def on_keys(self, message: dict[str, Any]) -> None:
        self._auth_keys.forget(keys_of(message))

    def users_changed(self, ids: list[int]) -> None:
        self._cluster.broadcast("users", ids=ids)

    def on_users(self, message: dict[str, Any]) -> None:
        self._projections.forget(keys_of(message))

    def forget_all(self) -> None:
        self._authorizations.forget(None)
        self._auth_keys.forget(None)
        self._projections.forget(None)


class LoginTokenPushes:
    """An accepted QR login token: updateLoginToken to the sessions of the key that
    shows it, here and (over the bus, as the key's sessions are not registered
    anywhere: it has no account yet) in every other process."""

    def __init__(self, cluster: Cluster, gateway: Gateway) -> None:
        self._cluster = cluster
        self._gateway = gateway

    def subscribe(self, qr_login: QrLoginService) -> None:
        qr_login.on_accepted = self.accepted
        self._cluster.on("login_token", self.on_accepted)

    def accepted(self, perm_auth_key_id: int) -> None:
        self._gateway.push_to_key(perm_auth_key_id, login_token_update(int(time.time())))
        self._cluster.broadcast("login_token", ids=[perm_auth_key_id])

    def on_accepted(self, message: dict[str, Any]) -> None:
        for key in keys_of(message):
            self._gateway.push_to_key(key, login_token_update(int(time.time())))
