"""Drafts, one per chat, kept in step across the user's devices: each change appends a
state-log event carrying the resulting draft (no pts)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import asyncpg

from telesrv.services.errors import MessageTooLong
from telesrv.services.messages import MAX_TEXT_LENGTH
from telesrv.services.origin import Origin
from telesrv.services.update_log import EventType, state_event
from telesrv.store import drafts as drafts_store
from telesrv.store.db import Db
from telesrv.store.log_payloads import DraftChanged

# The store's row is the domain's record: rpc builds and renders it as it is.
DraftRow = drafts_store.DraftRow


def draft_payload(d: drafts_store.DraftRow | None, date: int) -> DraftChanged:
    if d is None:
        return DraftChanged(date)
    return DraftChanged(
        d.date, d.message, d.entities, d.reply_to_msg_id, d.no_webpage, d.invert_media
    )


class Drafts:
    """Saving, listing and clearing drafts."""

    def __init__(self, db: Db, *, on_commit: Callable[[], None] = lambda: None) -> None:
        self._db = db
        self._on_commit = on_commit  # wakes the outbox delivery

    async def save_draft(
        self, owner: int, draft: drafts_store.DraftRow, origin: Origin, now: int
    ) -> None:
        """Save the chat's draft; an empty one (no text, no reply) deletes it."""
        if len(draft.message) > MAX_TEXT_LENGTH:
            raise MessageTooLong()
        peer = draft.peer_user_id
        empty = not draft.message and draft.reply_to_msg_id is None

        async def txn(conn: asyncpg.Connection) -> bool:
            if empty:
                if not await drafts_store.delete_drafts_txn(conn, owner, [peer]):
                    return False
                payload = draft_payload(None, now)
            else:
                await drafts_store.save_draft_txn(conn, owner, draft)
                payload = draft_payload(draft, now)
            await state_event(conn, owner, EventType.DRAFT, now, origin, peer=peer, payload=payload)
            return True

        if await self._db.run_txn("save_draft", txn):
            self._on_commit()

    async def clear_draft_on_send(self, owner: int, peer: int, now: int) -> None:
        """A message sent with clear_draft empties the chat's draft on every device."""
        if await drafts_store.drafts(self._db.pool, owner, [peer]):
            await self.clear_drafts(owner, [peer], None, now)

    async def all_drafts(self, owner: int) -> list[drafts_store.DraftRow]:
        return await drafts_store.drafts(self._db.pool, owner)

    async def clear_drafts(
        self, owner: int, peers: Sequence[int] | None, origin: Origin | None, now: int
    ) -> None:
        """Delete the drafts of ``peers`` (None: every draft), telling the other devices."""

        async def txn(conn: asyncpg.Connection) -> bool:
            cleared = await drafts_store.delete_drafts_txn(conn, owner, peers)
            for peer in cleared:
                await state_event(
                    conn,
                    owner,
                    EventType.DRAFT,
                    now,
                    origin,
                    peer=peer,
                    payload=draft_payload(None, now),
                )
            return bool(cleared)

        if await self._db.run_txn("clear_drafts", txn):
            self._on_commit()
