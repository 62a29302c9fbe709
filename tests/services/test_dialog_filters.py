"""Dialog filters on real PostgreSQL: limits and errors, order, tags, and their
state-log events (no pts)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from telesrv.parts import Parts
from telesrv.services.dialog_filters import (
    MAX_FILTER_CHATS,
    MAX_FILTERS,
    MAX_TITLE_LENGTH,
    DialogFilterService,
    FilterSpec,
)
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
from telesrv.store import state_log

ORIGIN = Origin(auth_key_id=11, session_id=22)
_ids = itertools.count(9_500_000)


def spec(filter_id: int, **kw: Any) -> FilterSpec:
    values: dict[str, Any] = {
        "filter_id": filter_id,
        "title": "Work",
        "any_category": True,
        "pinned": 0,
        "included": 0,
        "excluded": 0,
        "data": b"filter %d" % filter_id,
    }
    values.update(kw)
    return FilterSpec(**values)


@pytest.fixture
def filters(parts: Parts) -> DialogFilterService:
    return parts.dialog_filters


async def events(db: Any, user: int) -> list[tuple[str, Any]]:
    return [
        (e.event_type, e.payload) for _, e in await state_log.events_after(db.pool, user, 0, 100)
    ]


async def test_filters_are_created_replaced_ordered_and_deleted(
    filters: DialogFilterService, db: Any
) -> None:
    a = next(_ids)
    await filters.save(a, spec(2), ORIGIN, 1)
    await filters.save(a, spec(5), ORIGIN, 2)
    await filters.save(a, spec(2, data=b"renamed"), ORIGIN, 3)  # keeps its place
    assert [(f.filter_id, f.filter) for f in (await filters.filters(a)).filters] == [
        (2, b"renamed"),
        (5, b"filter 5"),
    ]
    await filters.reorder(a, [5, 0, 99], ORIGIN, 4)  # "all chats" and unknown ids skipped
    assert [f.filter_id for f in (await filters.filters(a)).filters] == [5, 2]
    await filters.reorder(a, [5, 2], ORIGIN, 5)  # no change, no event
    await filters.delete(a, 5, ORIGIN, 6)
    await filters.delete(a, 5, ORIGIN, 7)  # gone already: nothing
    await filters.toggle_tags(a, True, ORIGIN, 8)
    assert (await filters.filters(a)).tags_enabled
    assert await events(db, a) == [
        ("dialog_filter", {"id": 2, "filter": b"filter 2".hex()}),
        ("dialog_filter", {"id": 5, "filter": b"filter 5".hex()}),
        ("dialog_filter", {"id": 2, "filter": b"renamed".hex()}),
        ("dialog_filter_order", {"order": [5, 2]}),
        ("dialog_filter", {"id": 5}),
        ("dialog_filters", {"tags": True}),
    ]


async def test_filter_ids_from_2_to_255(filters: DialogFilterService) -> None:
    a = next(_ids)
    await filters.save(a, spec(2), ORIGIN, 1)
    await filters.save(a, spec(255), ORIGIN, 1)
    for bad in (0, 1, 256):
        with pytest.raises(FilterIdInvalid):
            await filters.save(a, spec(bad), ORIGIN, 1)
    with pytest.raises(FilterIdInvalid):
        await filters.delete(a, 1, ORIGIN, 1)


async def test_filter_title_and_content_are_checked(filters: DialogFilterService) -> None:
    a = next(_ids)
    with pytest.raises(FilterTitleEmpty):
        await filters.save(a, spec(2, title="  "), ORIGIN, 1)
    await filters.save(a, spec(2, title="x" * MAX_TITLE_LENGTH), ORIGIN, 1)
    with pytest.raises(MessageTooLong):
        await filters.save(a, spec(3, title="x" * (MAX_TITLE_LENGTH + 1)), ORIGIN, 1)
    with pytest.raises(FilterIncludeEmpty):
        await filters.save(a, spec(3, any_category=False), ORIGIN, 1)
    await filters.save(a, spec(3, any_category=False, included=1), ORIGIN, 1)
    await filters.save(a, spec(4, pinned=40, included=MAX_FILTER_CHATS - 40), ORIGIN, 1)
    with pytest.raises(FilterIncludeTooMuch):
        await filters.save(a, spec(5, pinned=41, included=MAX_FILTER_CHATS - 40), ORIGIN, 1)
    await filters.save(a, spec(5, excluded=MAX_FILTER_CHATS), ORIGIN, 1)
    with pytest.raises(ChatlistExcludeInvalid):
        await filters.save(a, spec(6, excluded=MAX_FILTER_CHATS + 1), ORIGIN, 1)


async def test_at_most_ten_filters(filters: DialogFilterService) -> None:
    a = next(_ids)
    for i in range(MAX_FILTERS):
        await filters.save(a, spec(2 + i), ORIGIN, 1)  # the tenth is at the limit
    with pytest.raises(DialogFiltersTooMuch):
        await filters.save(a, spec(2 + MAX_FILTERS), ORIGIN, 1)
    await filters.save(a, spec(2, title="Edited"), ORIGIN, 1)  # editing one still works
    assert len((await filters.filters(a)).filters) == MAX_FILTERS
