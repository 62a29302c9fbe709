"""Notification settings of the user's chats (per peer) and kinds of chat, kept in step
across the user's devices: each change appends a state-log event carrying the
resulting settings (no pts)."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg

from telesrv.services.origin import Origin
from telesrv.services.update_log import EventType, state_event
from telesrv.store import notify_settings as notify_settings_store
from telesrv.store.db import Db
from telesrv.store.log_payloads import NotifySettingsChanged

# The store's row is the domain's record: rpc builds and renders it as it is.
NotifyRow = notify_settings_store.NotifyRow


def notify_payload(
    kind: str, peer: int, row: notify_settings_store.NotifyRow | None
) -> NotifySettingsChanged:
    if row is None:
        return NotifySettingsChanged(kind, peer)
    return NotifySettingsChanged(
        kind, peer, row.show_previews, row.silent, row.mute_until, row.sound
    )


class NotifySettings:
    """Reading and changing notification settings."""

    def __init__(self, db: Db, *, on_commit: Callable[[], None] = lambda: None) -> None:
        self._db = db
        self._on_commit = on_commit  # wakes the outbox delivery

    async def notify_settings(
        self, owner: int, kind: str, peer: int
    ) -> notify_settings_store.NotifyRow | None:
        return await notify_settings_store.notify_settings(self._db.pool, owner, kind, peer)

    async def update_notify_settings(
        self, owner: int, row: notify_settings_store.NotifyRow, origin: Origin, now: int
    ) -> None:
        async def txn(conn: asyncpg.Connection) -> None:
            await notify_settings_store.save_notify_settings_txn(conn, owner, row)
            await state_event(
                conn,
                owner,
                EventType.NOTIFY_SETTINGS,
                now,
                origin,
                payload=notify_payload(row.kind, row.peer_user_id, row),
            )

        await self._db.run_txn("update_notify_settings", txn)
        self._on_commit()

    async def reset_notify_settings(self, owner: int, origin: Origin, now: int) -> None:
        async def txn(conn: asyncpg.Connection) -> bool:
            reset = await notify_settings_store.reset_notify_settings_txn(conn, owner)
            for kind, peer in reset:
                await state_event(
                    conn,
                    owner,
                    EventType.NOTIFY_SETTINGS,
                    now,
                    origin,
                    payload=notify_payload(kind, peer, None),
                )
            return bool(reset)

        if await self._db.run_txn("reset_notify_settings", txn):
            self._on_commit()
