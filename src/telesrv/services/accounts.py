"""Accounts across devices: which account each permanent auth key is logged in to.

Also home of what the other account services share: the account refusals more
specific than their catalogue error, the `Origin` of a change, and the `AccountEvents` hook through
which account changes reach the account's update log.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import asyncpg

from telesrv.services.errors import FloodWait, HashInvalid, UserIdInvalid
from telesrv.services.origin import Origin as Origin
from telesrv.store import authorizations as authorizations_store
from telesrv.store import passwords as passwords_store
from telesrv.store.db import Db

CACHE_SIZE = 100_000
# How often (seconds) a device's "last active" time is written while it keeps working.
TOUCH_INTERVAL = 300.0
# account.getAuthorizations' authorization_ttl_days (nothing expires authorizations yet).
AUTHORIZATION_TTL_DAYS = 365


# -- errors -------------------------------------------------------------------------
# The refusals themselves are the catalogue's (``telesrv.services.errors``); these
# name a more specific cause and travel under their parent's name.


class UserNotFound(UserIdInvalid):
    """No account has this id."""


class AuthorizationNotFound(HashInvalid):
    """The account has no other device with this authorization hash."""


class SendCodeFlood(FloodWait):
    """Too many login codes asked for this phone: retry after ``retry_after`` seconds."""

    @property
    def retry_after(self) -> int:
        return self.seconds


# -- events -------------------------------------------------------------------------


class AccountEvents(Protocol):
    """Where account changes become owner-view events of the account's update log.

    Each method is called inside the transaction that makes the change, with that
    transaction's connection, so event and change commit together. The transaction
    may be retried: implementations must only write through ``conn``. ``origin`` is
    None for changes made outside any session (the admin CLI).
    """

    async def contacts_changed(
        self, conn: asyncpg.Connection, owner_user_id: int, origin: Origin | None
    ) -> None:
        """The owner's contact list changed (a durable updateContactsReset event)."""

    async def contacts_adding(
        self,
        conn: asyncpg.Connection,
        owner_user_id: int,
        user_ids: Sequence[int],
        origin: Origin | None,
    ) -> None:
        """The owner is about to add these users to their contacts (called before the
        rows are written): chats they started lose their action bar."""

    async def block_changed(
        self,
        conn: asyncpg.Connection,
        owner_user_id: int,
        peer_user_id: int,
        blocked: bool,
        origin: Origin | None,
    ) -> None:
        """The owner blocked or unblocked the peer (updatePeerBlocked)."""

    async def blocks_committed(self, owner_user_id: int) -> None:
        """After the transaction that changed the owner's block list committed."""

    async def profile_changed(
        self, conn: asyncpg.Connection, user_id: int, origin: Origin | None
    ) -> None:
        """The user's name or username changed (updateUserName for their devices)."""


class NoAccountEvents:
    """Account events that are not logged: changes are stored, no device hears of them
    (for callers without an update log, such as the admin commands)."""

    async def contacts_changed(
        self, conn: asyncpg.Connection, owner_user_id: int, origin: Origin | None
    ) -> None:
        return None

    async def contacts_adding(
        self,
        conn: asyncpg.Connection,
        owner_user_id: int,
        user_ids: Sequence[int],
        origin: Origin | None,
    ) -> None:
        return None

    async def block_changed(
        self,
        conn: asyncpg.Connection,
        owner_user_id: int,
        peer_user_id: int,
        blocked: bool,
        origin: Origin | None,
    ) -> None:
        return None

    async def profile_changed(
        self, conn: asyncpg.Connection, user_id: int, origin: Origin | None
    ) -> None:
        return None

    async def blocks_committed(self, owner_user_id: int) -> None:
        return None


# -- authorizations -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Device:
    """One logged-in device of an account, as account.getAuthorizations lists it."""

    auth_key_id: int
    hash: int
    created_at: int  # unix time
    active_at: int
    api_id: int
    device_model: str
    system_version: str
    app_version: str
    layer: int | None


def to_datetime(unix_time: float) -> datetime:
    return datetime.fromtimestamp(unix_time, UTC)


def new_authorization_hash() -> int:
    """A public id for a device: random, non-zero (0 means "this device" on the wire)."""
    while True:
        value = int.from_bytes(secrets.token_bytes(8), "little", signed=True)
        if value != 0:
            return value


@dataclass(slots=True)
class _Cached:
    user_id: int | None
    # Monotonic time of the last active_at write; None: not written by this process yet.
    # (A monotonic clock has no meaningful zero: it may be seconds old on a fresh machine,
    # so "never" must not be a number compared with it.)
    touched: float | None


class AuthorizationService:
    """auth key -> account, cached in process.

    Every login and logout goes through this service, which keeps the cache right; with
    several server processes ``on_change`` tells the others, which ``forget`` the keys.
    ``user_for_key`` is the gateway's resolver.
    """

    def __init__(self, db: Db, *, cache_size: int = CACHE_SIZE) -> None:
        self._db = db
        self._cache: OrderedDict[int, _Cached] = OrderedDict()
        self._cache_size = cache_size
        # Bumped by every change, so a lookup that raced a login does not cache stale data.
        self._epoch = 0
        # Singleflight: key -> (epoch it started in, the lookup under way). Concurrent misses
        # for one key share one query instead of each going to PostgreSQL.
        self._inflight: dict[int, tuple[int, asyncio.Future[_Cached]]] = {}
        # (keys whose login changed, whether their sessions are to be closed), after commit
        self.on_change: Callable[[list[int], bool], None] | None = None

    async def user_for_key(self, perm_auth_key_id: int) -> int | None:
        """The account the key is logged in to; also marks the device active now and then."""
        cached = self._cache.get(perm_auth_key_id)
        if cached is None:
            cached = await self._load(perm_auth_key_id)
        else:
            self._cache.move_to_end(perm_auth_key_id)
        now = time.monotonic()
        if cached.user_id is not None and (
            cached.touched is None or now - cached.touched >= TOUCH_INTERVAL
        ):
            cached.touched = now
            await authorizations_store.touch(self._db.pool, perm_auth_key_id, datetime.now(UTC))
        return cached.user_id

    async def _load(self, perm_auth_key_id: int) -> _Cached:
        epoch = self._epoch
        flight = self._inflight.get(perm_auth_key_id)
        # Join a lookup only if no login/logout happened since it started: its answer
        # could predate the change.
        if flight is None or flight[0] != epoch:
            # Its own task, so a caller that is cancelled does not cancel the others' answer.
            task = asyncio.ensure_future(self._query(perm_auth_key_id, epoch))
            flight = (epoch, task)
            self._inflight[perm_auth_key_id] = flight
            task.add_done_callback(functools.partial(self._landed, perm_auth_key_id))
        return await asyncio.shield(flight[1])

    async def _query(self, perm_auth_key_id: int, epoch: int) -> _Cached:
        user_id = await authorizations_store.get_user_id(self._db.pool, perm_auth_key_id)
        cached = _Cached(user_id, None)
        if epoch == self._epoch:
            self._remember(perm_auth_key_id, cached)
        return cached

    def _landed(self, perm_auth_key_id: int, task: asyncio.Future[_Cached]) -> None:
        flight = self._inflight.get(perm_auth_key_id)
        if flight is not None and flight[1] is task:
            del self._inflight[perm_auth_key_id]
        if not task.cancelled():
            task.exception()  # every waiter got it; do not log it again as never retrieved

    async def touch(self, perm_auth_key_id: int, now: float) -> None:
        await authorizations_store.touch(self._db.pool, perm_auth_key_id, to_datetime(now))

    def _remember(self, perm_auth_key_id: int, entry: _Cached) -> None:
        self._cache[perm_auth_key_id] = entry
        self._cache.move_to_end(perm_auth_key_id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def _changed(self, perm_auth_key_id: int, user_id: int | None) -> None:
        self._epoch += 1
        self._remember(perm_auth_key_id, _Cached(user_id, time.monotonic()))

    def _tell(self, keys: list[int], close: bool = False) -> None:
        if keys and self.on_change is not None:
            self.on_change(keys, close)

    def forget(self, perm_auth_key_ids: Iterable[int] | None = None) -> None:
        """Another process changed these keys' logins (None: maybe any key's)."""
        self._epoch += 1
        if perm_auth_key_ids is None:
            self._cache.clear()
            return
        for key in perm_auth_key_ids:
            self._cache.pop(key, None)

    @staticmethod
    async def bind_txn(
        conn: asyncpg.Connection,
        perm_auth_key_id: int,
        user_id: int,
        now: float,
        hash: int | None = None,
    ) -> None:
        """Inside a login transaction: log the key in. Call ``logged_in`` after commit.
        ``hash``: the device's public id when it was announced before (a QR login's
        acceptLoginToken answered it); else a new one."""
        await authorizations_store.bind_txn(
            conn,
            perm_auth_key_id,
            user_id,
            new_authorization_hash() if hash is None else hash,
            to_datetime(now),
        )
        # Signed in now: whatever password the key waited for is owed no more.
        await passwords_store.drop_login(conn, perm_auth_key_id)

    def logged_in(self, perm_auth_key_id: int, user_id: int) -> None:
        self._changed(perm_auth_key_id, user_id)
        self._tell([perm_auth_key_id])

    def ended_elsewhere(self, perm_auth_key_id: int) -> None:
        """Another process (an admin command) ended this key's authorization."""
        self._changed(perm_auth_key_id, None)

    async def end_all(self, user_id: int) -> list[int]:
        """End every device of the account (an operator's block); returns their keys."""
        keys = await self._db.run_txn(
            "reset_authorizations", authorizations_store.unbind_others_txn, user_id, 0
        )
        for key in keys:
            self._changed(key, None)
        return keys

    async def log_out(self, perm_auth_key_id: int) -> int | None:
        """End this key's authorization and its device state; returns the account."""
        user_id = await self._db.run_txn(
            "log_out", authorizations_store.unbind_txn, perm_auth_key_id
        )
        self._changed(perm_auth_key_id, None)
        self._tell([perm_auth_key_id])
        return user_id

    async def reset_others(self, user_id: int, keep_perm_auth_key_id: int) -> list[int]:
        """auth.resetAuthorizations: end every other device; returns their keys."""
        keys = await self._db.run_txn(
            "reset_authorizations",
            authorizations_store.unbind_others_txn,
            user_id,
            keep_perm_auth_key_id,
        )
        for key in keys:
            self._changed(key, None)
        self._tell(keys, close=True)
        return keys

    async def reset_by_hash(self, user_id: int, hash: int) -> int:
        """account.resetAuthorization: end one device by its public hash; returns its key."""
        if hash == 0:
            raise AuthorizationNotFound()  # 0 is the current device: that is auth.logOut
        key = await self._db.run_txn(
            "reset_authorization", authorizations_store.unbind_by_hash_txn, user_id, hash
        )
        if key is None:
            raise AuthorizationNotFound()
        self._changed(key, None)
        self._tell([key], close=True)
        return key

    async def devices(self, user_id: int) -> list[Device]:
        rows = await authorizations_store.list_for_user(self._db.pool, user_id)
        return [
            Device(
                auth_key_id=r.auth_key_id,
                hash=r.hash,
                created_at=int(r.created_at.timestamp()),
                active_at=int(r.active_at.timestamp()),
                api_id=r.api_id or 0,
                device_model=r.device_model or "",
                system_version=r.system_version or "",
                app_version=r.app_version or "",
                layer=r.layer,
            )
            for r in rows
        ]
