"""Account changes (contacts, blocks, profile) as owner-view events of the state log.

Their updates (updateContactsReset, updatePeerBlocked) have no pts in the schema, so
they go to the account's state log, not the pts log: durable, pushed to online
devices, handed to offline ones by getDifference, and never consuming a pts (a pts
taken for an update that carries none opens a gap on every online device).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import asyncpg

from telesrv.services.accounts import Origin
from telesrv.store import state_log
from telesrv.store.counters import Counters


class UpdateLogEvents:
    """The AccountEvents hook: runs inside the account transaction that makes the change,
    so the event commits or rolls back with it."""

    def __init__(self, counters: Counters, on_commit: Callable[[], None] = lambda: None) -> None:
        self._counters = counters
        self._on_commit = on_commit

    async def _append(
        self,
        conn: asyncpg.Connection,
        user_id: int,
        event_type: str,
        origin: Origin | None,
        *,
        peer_user_id: int | None = None,
        payload: dict[str, object] | None = None,
    ) -> None:
        await state_log.append_txn(
            conn,
            user_id,
            event_type,
            int(time.time()),
            peer_user_id=peer_user_id,
            payload=payload,
            exclude_auth_key_id=origin.auth_key_id if origin else None,
            exclude_session_id=origin.session_id if origin else None,
        )
        # The dispatcher claims only committed rows; waking it early is harmless.
        self._on_commit()

    async def contacts_changed(
        self, conn: asyncpg.Connection, owner_user_id: int, origin: Origin | None
    ) -> None:
        await self._append(conn, owner_user_id, "contacts_reset", origin)

    async def block_changed(
        self,
        conn: asyncpg.Connection,
        owner_user_id: int,
        peer_user_id: int,
        blocked: bool,
        origin: Origin | None,
    ) -> None:
        # Sends consult the "blocks nobody" mark: drop it now and again after commit.
        await self._counters.forget_no_blocks(owner_user_id)
        await self._append(
            conn,
            owner_user_id,
            "peer_blocked",
            origin,
            peer_user_id=peer_user_id,
            payload={"blocked": blocked},
        )

    async def blocks_committed(self, owner_user_id: int) -> None:
        await self._counters.forget_no_blocks(owner_user_id)

    async def profile_changed(
        self, conn: asyncpg.Connection, user_id: int, origin: Origin | None
    ) -> None:
        # Not logged: updateUserName carries no pts, so a log entry would only open a
        # pts gap on every device (a forced getDifference, and pushes that arrive during
        # it are dropped by clients). Names travel with the users of every update and
        # answer instead.
        return None
