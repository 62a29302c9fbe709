"""Editing private messages (deleting them is Deletes, in deletes.py).

Each operation reads a plan (which owners' boxes it touches, how many), allocates
exactly those pts in Redis, then writes in one server-side call. The write re-checks
everything under locks; what it no longer needs it fills with noops itself, and when
it fails every allocated pts is filled here, so the log stays dense either way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from telesrv.services.errors import (
    EditMessagesForbidden,
    MessageAuthorRequired,
    MessageIdInvalid,
    MessageNotModified,
)
from telesrv.services.ids import INT32_MAX
from telesrv.services.messages import MessageService, Origin
from telesrv.store import edits as edits_store
from telesrv.store import messages as messages_store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db
from telesrv.store.log_writes import LogWrites, PtsDelivery


@dataclass(frozen=True, slots=True)
class Edited:
    message: messages_store.BoxMessage  # in the editor's view, as edited
    pts: int  # the editor's edit_message event (pts_count 1)


class Edits:
    """Edits of a message's text."""

    def __init__(
        self,
        db: Db,
        counters: Counters,
        *,
        on_commit: Callable[[], None] = lambda: None,
        delivery: PtsDelivery | None = None,
    ) -> None:
        self._db = db
        self._log = LogWrites(db, counters, delivery)
        self._on_commit = on_commit  # wakes the outbox delivery

    async def edit_text(
        self,
        editor: int,
        peer: int,
        box_id: int,
        text: str | None,
        entities: bytes | None,
        origin: Origin,
        now: int,
        link: bool | None = None,
    ) -> Edited:
        """Edit the text of one of the editor's outgoing messages in the chat with
        ``peer``. ``text`` None keeps text and entities (a media-only edit request).
        ``link``: whether the new text holds a link (None: not said, left as it was)."""
        if not 0 < box_id <= INT32_MAX:
            raise MessageIdInvalid()
        boxes = await messages_store.get_boxes(
            self._db.pool, editor, [box_id], distributed=self._db.distributed
        )
        target = await edits_store.edit_target(
            self._db.pool, editor, peer, box_id, distributed=self._db.distributed
        )
        if not boxes or target is None:
            raise MessageIdInvalid()
        if target.sender_user_id != editor:
            raise MessageAuthorRequired()
        if text is None:
            text, entities, link = target.message, target.entities, None
        else:
            # A media message's text is its caption: it may be emptied.
            MessageService.check_text(text, caption=boxes[0].media is not None)
        if text == target.message and entities == target.entities:
            raise MessageNotModified()
        if target.peer_blocked_editor:
            raise EditMessagesForbidden()

        async def txn(
            conn: asyncpg.Connection, allocations: list[Allocation]
        ) -> list[edits_store.EditedBox]:
            return await edits_store.edit_private_message_txn(
                conn,
                editor,
                peer,
                box_id,
                text,
                entities,
                now,
                [(a.user_id, a.first_pts) for a in allocations],
                origin.auth_key_id,
                origin.session_id,
                link,
            )

        edited, _ = await self._log.write(
            "edit_message",
            [(u, 1, 0) for u in target.owners],
            txn,
            now=now,
            single_statement=True,
        )
        self._on_commit()
        mine = next(e for e in edited if e.owner_user_id == editor)
        message = dataclasses.replace(boxes[0], message=text, entities=entities, edit_date=now)
        return Edited(message, mine.pts)
