"""Auth keys: creation, lookup (cached), binding of temporary keys, client info."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from telesrv.services.metrics import AUTH_KEYS_CACHED, AUTH_KEYS_CREATED
from telesrv.store import auth_keys as auth_keys_store
from telesrv.store.db import Db
from telesrv.store.metrics import sample_gauge

CACHE_SIZE = 100_000


@dataclass(frozen=True, slots=True)
class AuthKey:
    auth_key_id: int
    auth_key: bytes
    is_temp: bool
    expires_at: float | None  # unix time
    perm_auth_key_id: int | None  # for a bound temporary key


# What initConnection reported, plus the layer: the store's row type serves as is.
ClientInfo = auth_keys_store.ClientInfo
# How binding a temporary key to a permanent one went.
BindResult = auth_keys_store.BindResult


class AuthKeyService:
    def __init__(self, db: Db) -> None:
        self._db = db
        # Keys never change once made (only binding and deletion do, both through
        # this service), so a process-local LRU cache is safe.
        self._cache: OrderedDict[int, AuthKey] = OrderedDict()
        sample_gauge(AUTH_KEYS_CACHED, lambda: len(self._cache))
        # Singleflight: concurrent misses for one key (a client opening several
        # connections at once) share one query.
        self._inflight: dict[int, asyncio.Future[AuthKey | None]] = {}
        # Bumped by every binding: a lookup that raced one neither caches nor is joined.
        self._epoch = 0
        # Keys bound or deleted here, for other server processes to ``forget``.
        self.on_change: Callable[[list[int]], None] | None = None

    def forget(self, auth_key_ids: Iterable[int] | None = None) -> None:
        """Another process bound or deleted these keys (None: maybe any key)."""
        self._epoch += 1
        if auth_key_ids is None:
            self._cache.clear()
            self._inflight.clear()
            return
        for auth_key_id in auth_key_ids:
            self._cache.pop(auth_key_id, None)
            self._inflight.pop(auth_key_id, None)

    async def get(self, auth_key_id: int, now: float) -> AuthKey | None:
        key = self._cache.get(auth_key_id)
        if key is not None and key.expires_at is not None and key.expires_at <= now:
            # Another process may have renewed the binding since we cached it.
            del self._cache[auth_key_id]
            key = None
        if key is None:
            key = await self._load(auth_key_id)
            if key is None:
                return None
        else:
            self._cache.move_to_end(auth_key_id)
        if key.expires_at is not None and key.expires_at <= now:
            return None
        return key

    async def _load(self, auth_key_id: int) -> AuthKey | None:
        flight = self._inflight.get(auth_key_id)
        if flight is None:
            # Its own task, so a caller that is cancelled does not cancel the others' answer.
            flight = asyncio.ensure_future(self._query(auth_key_id))
            self._inflight[auth_key_id] = flight
            flight.add_done_callback(lambda done: self._landed(auth_key_id, done))
        return await asyncio.shield(flight)

    async def _query(self, auth_key_id: int) -> AuthKey | None:
        epoch = self._epoch
        row = await auth_keys_store.get_auth_key(self._db.pool, auth_key_id)
        if row is None:
            return None
        key = AuthKey(
            auth_key_id=row.auth_key_id,
            auth_key=row.auth_key,
            is_temp=row.is_temp,
            expires_at=row.expires_at.timestamp() if row.expires_at else None,
            perm_auth_key_id=row.perm_auth_key_id,
        )
        if epoch == self._epoch:
            self._remember(key)
        return key

    def _landed(self, auth_key_id: int, flight: asyncio.Future[AuthKey | None]) -> None:
        if self._inflight.get(auth_key_id) is flight:
            del self._inflight[auth_key_id]
        if not flight.cancelled():
            flight.exception()  # every waiter got it; do not log it again as never retrieved

    def _remember(self, key: AuthKey) -> None:
        self._cache[key.auth_key_id] = key
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

    async def create(
        self, auth_key_id: int, auth_key: bytes, *, is_temp: bool, expires_at: float | None
    ) -> bool:
        """Store a new key; False when its id is already taken by another key."""
        expires = datetime.fromtimestamp(expires_at, UTC) if expires_at is not None else None
        saved = await auth_keys_store.save_auth_key(
            self._db.pool, auth_key_id, auth_key, is_temp=is_temp, expires_at=expires
        )
        if saved:
            AUTH_KEYS_CREATED.labels("temp" if is_temp else "perm").inc()
            self._remember(AuthKey(auth_key_id, auth_key, is_temp, expires_at, None))
        return saved

    async def bind_temp(
        self, temp_auth_key_id: int, perm_auth_key_id: int, expires_at: float
    ) -> BindResult:
        result = await self._db.run_txn(
            "bind_temp_auth_key",
            auth_keys_store.bind_temp_auth_key_txn,
            temp_auth_key_id,
            perm_auth_key_id,
            datetime.fromtimestamp(expires_at, UTC),
        )
        self._epoch += 1
        self._cache.pop(temp_auth_key_id, None)
        self._inflight.pop(temp_auth_key_id, None)
        if self.on_change is not None:
            self.on_change([temp_auth_key_id])
        return result

    async def record_client(self, auth_key_id: int, details: ClientInfo) -> None:
        await auth_keys_store.record_client_info(self._db.pool, auth_key_id, details)

    async def client_layer(self, perm_auth_key_id: int) -> int | None:
        info = await auth_keys_store.get_client_info(self._db.pool, perm_auth_key_id)
        return None if info is None else info.layer

    async def delete_unused(self, now: float, unused_ttl: float, *, batch: int = 1000) -> int:
        """Delete expired temporary keys, and permanent keys older than ``unused_ttl``
        seconds that no account is logged in to; returns how many keys went."""
        moment = datetime.fromtimestamp(now, UTC)
        created_before = moment - timedelta(seconds=unused_ttl)
        deleted = 0
        deletions: tuple[Callable[[], Awaitable[list[int]]], ...] = (
            lambda: auth_keys_store.delete_expired_temp_key_ids(self._db.pool, moment, limit=batch),
            lambda: auth_keys_store.delete_unused_perm_key_ids(
                self._db.pool, created_before, moment, limit=batch
            ),
        )
        for delete in deletions:
            while True:
                ids = await delete()
                for auth_key_id in ids:
                    self._cache.pop(auth_key_id, None)
                if ids and self.on_change is not None:
                    self.on_change(ids)
                deleted += len(ids)
                if len(ids) < batch:
                    break
        return deleted
