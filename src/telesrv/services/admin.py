"""What the operator's commands do: failed outbox rows, devices, login blocks, forgotten
passwords, and the record of unknown methods.

The commands run in their own process next to a running server (or none). Whatever
the server caches is told through Redis (``store.admin_events``); the rest is read
from the database the next time it is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from telesrv.services.accounts import AuthorizationService, Device, UserNotFound
from telesrv.services.audit import audit_line
from telesrv.services.compat import UnknownMethod, UnknownMethods
from telesrv.services.users import normalize_phone
from telesrv.store import admin_events, login_blocks
from telesrv.store import outbox as outbox_store
from telesrv.store import passwords as passwords_store
from telesrv.store import users as users_store
from telesrv.store.db import Db
from telesrv.store.redis_client import RedisClient

FailedRow = outbox_store.FailedRow


@dataclass(frozen=True)
class BlockResult:
    newly_blocked: bool
    ended_devices: int


class Admin:
    def __init__(self, db: Db, redis: RedisClient) -> None:
        self._db = db
        self._redis = redis
        self._authorizations = AuthorizationService(db)

    # -- outbox ------------------------------------------------------------------------

    async def failed_outbox(self, user_id: int | None, limit: int) -> list[FailedRow]:
        return await outbox_store.list_failed(self._db.pool, user_id=user_id, limit=limit)

    async def requeue_failed(self, user_id: int | None) -> int:
        return await outbox_store.requeue_failed(self._db.pool, user_id=user_id)

    async def purge_failed(self, user_id: int | None) -> int:
        return await outbox_store.purge_failed(self._db.pool, user_id=user_id)

    # -- devices -----------------------------------------------------------------------

    async def find_user(self, who: str) -> int:
        """A user id, or an account's phone (with a leading +)."""
        if who.startswith("+"):
            user = await users_store.get_user_by_phone(self._db.pool, normalize_phone(who))
        else:
            try:
                user = await users_store.get_user(self._db.pool, int(who))
            except ValueError:
                user = None
        if user is None:
            raise UserNotFound()
        return user.user_id

    async def devices(self, user_id: int) -> list[Device]:
        return await self._authorizations.devices(user_id)

    async def end_device(self, user_id: int, hash: int) -> int:
        """End one device by its hash (as listed); returns its auth key id."""
        key = await self._authorizations.reset_by_hash(user_id, hash)
        await admin_events.publish_ended(self._redis, [key])
        audit_line("reset_authorization", "ok", user_id, key, None, by="admin")
        return key

    # -- login blocks --------------------------------------------------------------------

    async def block_login(self, phone: str, *, end_sessions: bool) -> BlockResult:
        phone = normalize_phone(phone)
        newly = await login_blocks.block(self._db.pool, phone)
        ended: list[int] = []
        if end_sessions:
            user = await users_store.get_user_by_phone(self._db.pool, phone)
            if user is not None:
                ended = await self._authorizations.end_all(user.user_id)
                await admin_events.publish_ended(self._redis, ended)
                for key in ended:
                    audit_line("logout", "login_blocked", user.user_id, key, None, by="admin")
        return BlockResult(newly, len(ended))

    async def unblock_login(self, phone: str) -> bool:
        return await login_blocks.unblock(self._db.pool, normalize_phone(phone))

    async def blocked_logins(self) -> list[str]:
        return [phone for phone, _ in await login_blocks.list_all(self._db.pool)]

    # -- two-step verification ----------------------------------------------------------

    async def remove_password(self, who: str) -> bool:
        """Remove an account's password (its owner forgot it and has no signed-in device
        left to reset it from); whether it had one. Keys waiting for it stop waiting:
        they sign in again with a new code. (Their Redis markers go at their next
        look-up.)"""
        user_id = await self.find_user(who)

        async def txn(conn: asyncpg.Connection) -> bool:
            if not await passwords_store.remove_any_password(conn, user_id):
                return False
            await passwords_store.drop_logins_of_user_txn(conn, user_id)
            return True

        removed = await self._db.run_txn("admin_remove_password", txn)
        if removed:
            audit_line("remove_password", "ok", user_id, None, None, by="admin")
        return removed

    # -- compatibility -------------------------------------------------------------------

    async def unknown_methods(self) -> list[UnknownMethod]:
        return await UnknownMethods(self._db).counts()
