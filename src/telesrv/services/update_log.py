"""Account changes (contacts, blocks, profile) as owner-view events of the update log.

They share the durable pts log with messages so every device of the account
learns them, online (outbox push) or offline (getDifference).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

import asyncpg

from telesrv.services.accounts import Origin
from telesrv.store import messages as store
from telesrv.store.counters import Counters


class EventType(enum.StrEnum):
    """The kinds of update-log event (``user_update_events.event_type``).

    Members equal their strings, so rows read from the store (and the SQL that writes
    them) need no conversion.
    """

    NEW_MESSAGE = "new_message"
    EDIT_MESSAGE = "edit_message"
    DELETE_MESSAGES = "delete_messages"
    READ_HISTORY_INBOX = "read_history_inbox"
    READ_HISTORY_OUTBOX = "read_history_outbox"
    READ_MESSAGE_CONTENTS = "read_message_contents"
    CONTACTS_RESET = "contacts_reset"
    PEER_BLOCKED = "peer_blocked"
    # Fills a pts that was allocated but never used: clients only move past it.
    NOOP = "noop"


# An event of an owner's log, as the store reads it (event_type: an EventType value).
UpdateEvent = store.UpdateEvent


class UpdateLogEvents:
    """The AccountEvents hook: runs inside the account transaction that makes the change.

    The pts comes from Redis inside that transaction; should the transaction roll
    back, the pts stays unused and the update service fills it once it is stale.
    """

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
        first, _ = await self._counters.allocate_pts(user_id, 1)
        await store.append_event_txn(
            conn,
            user_id,
            first,
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
        await self._append(conn, owner_user_id, EventType.CONTACTS_RESET, origin)

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
            EventType.PEER_BLOCKED,
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
