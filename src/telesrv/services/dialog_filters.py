"""Custom dialog filters (the apps' chat folders): create, edit, delete, order, tags.

Every change is a state-log event (the updates have no pts) carrying the resulting
filter or order, so a device applies it live or gets it from getDifference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.services.errors import (
    ChatlistExcludeInvalid,
    DialogFiltersTooMuch,
    FilterIdInvalid,
    FilterIncludeEmpty,
    FilterIncludeTooMuch,
    FilterTitleEmpty,
    MessageTooLong,
)
from telesrv.services.messages import Origin
from telesrv.services.update_log import EventType, state_event
from telesrv.store import dialog_filters as dialog_filters_store
from telesrv.store.db import Db
from telesrv.store.log_payloads import (
    DialogFilterChanged,
    DialogFilterOrder,
    DialogFiltersChanged,
    LogPayload,
)

# Telegram's defaults for accounts without Premium (app config
# dialog_filters_limit_default, dialog_filters_chats_limit_default).
MAX_FILTERS = 10
MAX_FILTER_CHATS = 100  # pinned + included; excluded have the same bound of their own
MAX_TITLE_LENGTH = 12  # as the apps allow
FIRST_ID, LAST_ID = 2, 255  # 0 is "all chats", 1 the archive


@dataclass(frozen=True, slots=True)
class FilterSpec:
    """A filter as a client sent it, its peers already checked."""

    filter_id: int
    title: str
    any_category: bool  # contacts, non-contacts, groups, channels or bots
    pinned: int
    included: int
    excluded: int
    data: bytes  # TL DialogFilter, stored and sent back as it is


@dataclass(frozen=True, slots=True)
class Filters:
    tags_enabled: bool
    filters: list[dialog_filters_store.FilterRow]


def check_filter_id(filter_id: int) -> None:
    if not FIRST_ID <= filter_id <= LAST_ID:
        raise FilterIdInvalid()


def check(spec: FilterSpec) -> None:
    check_filter_id(spec.filter_id)
    if not spec.title.strip():
        raise FilterTitleEmpty()
    if len(spec.title) > MAX_TITLE_LENGTH:
        raise MessageTooLong()
    if not spec.any_category and spec.pinned + spec.included == 0:
        raise FilterIncludeEmpty()
    if spec.pinned + spec.included > MAX_FILTER_CHATS:
        raise FilterIncludeTooMuch()
    if spec.excluded > MAX_FILTER_CHATS:
        raise ChatlistExcludeInvalid()


class DialogFilterService:
    def __init__(self, db: Db, *, on_commit: Callable[[], None] = lambda: None) -> None:
        self._db = db
        self._on_commit = on_commit

    async def filters(self, owner: int) -> Filters:
        pool = self._db.pool
        return Filters(
            await dialog_filters_store.tags_enabled(pool, owner),
            await dialog_filters_store.filters(pool, owner),
        )

    async def stored(self, owner: int, filter_id: int) -> bytes | None:
        """The filter as stored (None: the user has no such filter)."""
        for f in await dialog_filters_store.filters(self._db.pool, owner):
            if f.filter_id == filter_id:
                return f.filter
        return None

    async def _event(
        self,
        conn: asyncpg.Connection,
        owner: int,
        kind: str,
        payload: LogPayload,
        origin: Origin,
        now: int,
    ) -> None:
        await state_event(conn, owner, kind, now, origin, payload=payload)

    async def save(self, owner: int, spec: FilterSpec, origin: Origin, now: int) -> None:
        """Create or replace a filter (a new one goes last). DIALOG_FILTERS_TOO_MUCH past
        MAX_FILTERS."""
        check(spec)

        async def txn(conn: asyncpg.Connection) -> None:
            existing = await dialog_filters_store.lock_filters_txn(conn, owner)
            ids = [f.filter_id for f in existing]
            position = max((f.position for f in existing), default=0) + 1
            if spec.filter_id in ids:
                position = next(f.position for f in existing if f.filter_id == spec.filter_id)
            elif len(existing) >= MAX_FILTERS:
                raise DialogFiltersTooMuch()
            await dialog_filters_store.save_filter_txn(
                conn, owner, spec.filter_id, position, spec.data
            )
            await self._event(
                conn,
                owner,
                EventType.DIALOG_FILTER,
                DialogFilterChanged(spec.filter_id, spec.data),
                origin,
                now,
            )

        await self._db.run_txn("update_dialog_filter", txn)
        self._on_commit()

    async def delete(self, owner: int, filter_id: int, origin: Origin, now: int) -> None:
        check_filter_id(filter_id)

        async def txn(conn: asyncpg.Connection) -> bool:
            await dialog_filters_store.lock_filters_txn(conn, owner)
            if not await dialog_filters_store.delete_filter_txn(conn, owner, filter_id):
                return False
            await self._event(
                conn, owner, EventType.DIALOG_FILTER, DialogFilterChanged(filter_id), origin, now
            )
            return True

        if await self._db.run_txn("delete_dialog_filter", txn):
            self._on_commit()

    async def reorder(self, owner: int, order: Sequence[int], origin: Origin, now: int) -> None:
        """Unknown ids are skipped; filters left out keep their order after the given ones."""

        async def txn(conn: asyncpg.Connection) -> bool:
            existing = [
                f.filter_id for f in await dialog_filters_store.lock_filters_txn(conn, owner)
            ]
            wanted = [i for i in dict.fromkeys(order) if i in existing]
            new = wanted + [i for i in existing if i not in wanted]
            if new == existing:
                return False
            await dialog_filters_store.set_order_txn(conn, owner, new)
            await self._event(
                conn, owner, EventType.DIALOG_FILTER_ORDER, DialogFilterOrder(new), origin, now
            )
            return True

        if await self._db.run_txn("update_dialog_filters_order", txn):
            self._on_commit()

    async def toggle_tags(self, owner: int, enabled: bool, origin: Origin, now: int) -> None:
        async def txn(conn: asyncpg.Connection) -> bool:
            if not await dialog_filters_store.set_tags_txn(conn, owner, enabled):
                return False
            # updateDialogFilters: the other devices reload the filters and the switch.
            await self._event(
                conn, owner, EventType.DIALOG_FILTERS, DialogFiltersChanged(enabled), origin, now
            )
            return True

        if await self._db.run_txn("toggle_dialog_filter_tags", txn):
            self._on_commit()
