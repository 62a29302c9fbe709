"""Account changes (contacts, blocks, profile) as owner-view events of the state log.

Their updates (updateContactsReset, updatePeerBlocked) have no pts in the schema, so
they go to the account's state log, not the pts log: durable, pushed to online
devices, handed to offline ones by getDifference, and never consuming a pts (a pts
taken for an update that carries none opens a gap on every online device).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Sequence

import asyncpg

from telesrv.services.accounts import Origin
from telesrv.services.peer_settings import NO_BAR
from telesrv.store import log_payloads as log_payloads
from telesrv.store import peer_settings as bar_store
from telesrv.store import state_log
from telesrv.store import update_log as update_log_store
from telesrv.store.counters import Counters
from telesrv.store.db import after_commit
from telesrv.store.log_payloads import LogPayload, PeerBlocked

# What a write took, and how it keeps the log dense, are the store's write unit's.
from telesrv.store.log_writes import PtsRange as PtsRange
from telesrv.store.log_writes import fill_unused_pts as fill_unused_pts
from telesrv.store.log_writes import pts_range as pts_range

log = logging.getLogger(__name__)


class EventType(enum.StrEnum):
    """The kinds of event in an account's logs: the pts log (``user_update_events``) and
    the state log of updates without pts (``user_state_events``: contacts_reset,
    peer_blocked).

    Members equal their strings, so rows read from the store (and the SQL that writes
    them) need no conversion.
    """

    NEW_MESSAGE = "new_message"
    EDIT_MESSAGE = "edit_message"
    DELETE_MESSAGES = "delete_messages"
    READ_HISTORY_INBOX = "read_history_inbox"
    READ_HISTORY_OUTBOX = "read_history_outbox"
    READ_MESSAGE_CONTENTS = "read_message_contents"
    # Messages pinned or unpinned in a chat (services/pins.py), in the pts log.
    PINNED_MESSAGES = "pinned_messages"
    CONTACTS_RESET = "contacts_reset"
    PEER_BLOCKED = "peer_blocked"
    # Fills a pts that was allocated but never used: clients only move past it.
    NOOP = "noop"
    # The chat list (services/dialogs.py and its parts, dialog_filters.py): folder moves in
    # the pts log; pins, unread marks, notify settings, drafts, action bars and dialog
    # filters in the state log.
    FOLDER_PEERS = "folder_peers"
    DIALOG_PINNED = "dialog_pinned"
    PINNED_DIALOGS = "pinned_dialogs"
    DIALOG_UNREAD_MARK = "dialog_unread_mark"
    NOTIFY_SETTINGS = "notify_settings"
    DRAFT = "draft"
    PEER_SETTINGS = "peer_settings"
    DIALOG_FILTER = "dialog_filter"
    DIALOG_FILTER_ORDER = "dialog_filter_order"
    DIALOG_FILTERS = "dialog_filters"
    # A message's reactions (services/reactions.py), in the state log.
    MESSAGE_REACTIONS = "message_reactions"
    # The photo the owner sees for a user changed (services/profile_photos.py: their own
    # profile photo, or a personal photo they set), in the state log: updateUser.
    USER_PHOTO = "user_photo"
    # A privacy key's new rules (services/privacy.py), in the state log.
    PRIVACY = "privacy"


# An event of an owner's pts or state log, as the store reads it (event_type: an EventType value).
UpdateEvent = update_log_store.UpdateEvent


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
        payload: LogPayload | None = None,
    ) -> None:
        await state_event(
            conn,
            user_id,
            event_type,
            int(time.time()),
            origin,
            peer=peer_user_id,
            payload=payload,
        )
        # The dispatcher claims only committed rows: woken now, it would find nothing
        # and leave the row to its next poll.
        after_commit(self._on_commit)

    async def contacts_changed(
        self, conn: asyncpg.Connection, owner_user_id: int, origin: Origin | None
    ) -> None:
        await self._append(conn, owner_user_id, EventType.CONTACTS_RESET, origin)

    async def contacts_adding(
        self,
        conn: asyncpg.Connection,
        owner_user_id: int,
        user_ids: Sequence[int],
        origin: Origin | None,
    ) -> None:
        # Every device is told, the one adding too: its answer does not carry the bar.
        for peer in await bar_store.shown_bars_txn(conn, owner_user_id, user_ids):
            await self._append(
                conn,
                owner_user_id,
                EventType.PEER_SETTINGS,
                None,
                peer_user_id=peer,
                payload=NO_BAR,
            )

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
            payload=PeerBlocked(blocked),
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


async def state_event(
    conn: asyncpg.Connection,
    user: int,
    kind: str,
    now: int,
    origin: Origin | None,
    *,
    peer: int | None = None,
    payload: LogPayload | None = None,
) -> None:
    """Append a state-log event (contacts, blocks, pins, marks, settings, drafts,
    action bars, filters, reactions) in the caller's transaction: the one place they
    are written."""
    await state_log.append_txn(
        conn,
        user,
        kind,
        now,
        peer_user_id=peer,
        payload=payload.to_json() if payload is not None else None,
        exclude_auth_key_id=origin.auth_key_id if origin else None,
        exclude_session_id=origin.session_id if origin else None,
    )
