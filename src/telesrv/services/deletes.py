"""Deleting private messages: deleteMessages and deleteHistory.

Each operation reads a plan (which owners' boxes it touches, how many), allocates
exactly those pts in Redis, then writes in one server-side call. The write re-checks
everything under locks; what it no longer needs it fills with noops itself, and when
it fails every allocated pts is filled here, so the log stays dense either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from telesrv.services.errors import (
    DeleteMessagesForbidden,
)
from telesrv.services.ids import INT32_MAX, valid_ids
from telesrv.services.messages import Origin
from telesrv.store import deletes as deletes_store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db
from telesrv.store.log_writes import LogWrites, PtsDelivery

MAX_DELETE_IDS = 1000  # per deleteMessages call


DELETE_HISTORY_BATCH = 1000  # per deleteHistory call (the client repeats while offset > 0)


@dataclass(frozen=True, slots=True)
class Deleted:
    pts: int  # the caller's delete_messages event
    pts_count: int  # how many of the caller's ids it deleted
    box_ids: list[int]


@dataclass(frozen=True, slots=True)
class HistoryDeleted:
    deleted: Deleted | None  # None: nothing was left to delete
    more: bool  # another call is needed (affectedHistory.offset > 0)


class Deletes:
    """deleteMessages and deleteHistory."""

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

    async def delete_messages(
        self, owner: int, ids: list[int], revoke: bool, origin: Origin, now: int
    ) -> Deleted | None:
        """Soft-delete the owner's messages ``ids`` (any chats); with ``revoke`` the
        peers' boxes of the same messages too. None when none of ids was visible."""
        ids = valid_ids(ids)[:MAX_DELETE_IDS]
        box_ids = await deletes_store.visible_box_ids(self._db.pool, owner, ids) if ids else []
        if not box_ids:
            return None
        return await self._delete(owner, box_ids, revoke, False, origin, now)

    async def delete_history(
        self,
        owner: int,
        peer: int,
        max_id: int,
        *,
        just_clear: bool,
        revoke: bool,
        origin: Origin,
        now: int,
    ) -> HistoryDeleted:
        """Delete the newest DELETE_HISTORY_BATCH messages of the chat up to ``max_id``
        (<= 0: all). Without ``just_clear`` an emptied dialog is removed; with it the
        dialog stays listed, empty (top message 0), dated by the clear."""
        if not 0 < max_id <= INT32_MAX:
            max_id = 0
        newest = await deletes_store.newest_box_ids(
            self._db.pool, owner, peer, max_id, DELETE_HISTORY_BATCH + 1
        )
        batch, more = newest[:DELETE_HISTORY_BATCH], len(newest) > DELETE_HISTORY_BATCH
        if not batch:
            if not just_clear and await deletes_store.drop_empty_dialog(self._db.pool, owner, peer):
                self._on_commit()
            return HistoryDeleted(None, False)
        deleted = await self._delete(owner, batch, revoke, just_clear, origin, now)
        if just_clear and not more:
            await deletes_store.date_cleared_dialog(self._db.pool, owner, peer, now)
        return HistoryDeleted(deleted, more)

    async def _delete(
        self,
        owner: int,
        box_ids: list[int],
        revoke: bool,
        keep_empty_dialog: bool,
        origin: Origin,
        now: int,
    ) -> Deleted | None:
        others = (
            await deletes_store.revoke_targets(
                self._db.pool, owner, box_ids, distributed=self._db.distributed
            )
            if revoke
            else []
        )
        if any(t.blocked_deleter for t in others):
            raise DeleteMessagesForbidden()
        requests = [(owner, len(box_ids), 0)] + [(t.owner_user_id, t.boxes, 0) for t in others]

        async def txn(
            conn: asyncpg.Connection, allocations: list[Allocation]
        ) -> list[deletes_store.OwnerDeletion]:
            ranges = [
                deletes_store.PtsRange(a.user_id, a.first_pts, r[1])
                for a, r in zip(allocations, requests, strict=True)
            ]
            return await deletes_store.delete_message_boxes_txn(
                conn,
                owner,
                box_ids,
                revoke,
                keep_empty_dialog,
                now,
                ranges,
                origin.auth_key_id,
                origin.session_id,
            )

        result, _ = await self._log.write(
            "delete_messages", requests, txn, now=now, single_statement=True
        )
        self._on_commit()
        mine = next(d for d in result if d.user_id == owner)
        if mine.pts is None:
            return None  # deleted by a concurrent call: the pts became noops
        return Deleted(mine.pts, len(mine.box_ids), mine.box_ids)
