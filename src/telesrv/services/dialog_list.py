"""The dialog list: pages of dialogs with their top messages."""

from __future__ import annotations

from telesrv.store import dialog_list as dialog_list_store
from telesrv.store import messages as messages_store
from telesrv.store.db import Db

DialogRow = dialog_list_store.DialogRow


class DialogListing:
    """The dialog list pages and the dialogs' top messages.

    A part of the service class that inherits it, whose constructor sets these fields.
    """

    _db: Db
    _answer_bytes: int

    async def dialogs_summary(self, owner: int, folder_id: int) -> tuple[int, int]:
        return await dialog_list_store.dialogs_summary(self._db.pool, owner, folder_id)

    async def dialogs(
        self,
        owner: int,
        *,
        folder_id: int,
        offset_date: int | None,
        offset_id: int | None,
        offset_peer: int | None,
        limit: int,
    ) -> tuple[list[dialog_list_store.DialogRow], list[messages_store.BoxMessage]]:
        """A page of dialogs (newest first) and their top messages."""
        rows = await dialog_list_store.get_dialogs(
            self._db.pool,
            owner,
            folder_id=folder_id,
            offset_date=offset_date,
            offset_id=offset_id,
            offset_peer=offset_peer,
            limit=limit,
        )
        return rows, await self._top_messages(owner, rows)

    async def peer_dialogs(
        self, owner: int, peers: list[int]
    ) -> tuple[list[dialog_list_store.DialogRow], list[messages_store.BoxMessage]]:
        rows = await dialog_list_store.get_peer_dialogs(self._db.pool, owner, peers)
        return rows, await self._top_messages(owner, rows)

    async def _top_messages(
        self, owner: int, rows: list[dialog_list_store.DialogRow]
    ) -> list[messages_store.BoxMessage]:
        """The dialogs' top messages, in the dialogs' order, up to MAX_ANSWER_BYTES: past
        it a dialog is listed without its message (clients page on by the dialogs)."""
        ids = [d.top_message for d in rows if d.top_message > 0]
        if not ids:
            return []
        return (
            await messages_store.get_boxes_within(self._db.pool, owner, ids, self._answer_bytes)
        ).boxes
