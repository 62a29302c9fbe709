"""A prepared statement runs on a generic plan once PostgreSQL finds it no worse than
the custom ones, so a seek's optional bound must still be an index bound in a plan
made without its value: otherwise a page deep in a long chat or chat list would read
every row above it. Each seek is written so ("x < COALESCE($n, past the top)", never
"$n IS NULL OR x < $n"; one text per chat-list folder case), checked here on the
generic plan of each seek that walks an index in order (SEEKS)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from generic_plans import generic_plans

from telesrv.store import dialogs as dialogs_store
from telesrv.store import history as history_store
from telesrv.store import reactions as reactions_store
from telesrv.store import search as search_store
from telesrv.store.db import Db


class _Recorder:
    """An executor that runs nothing and keeps the statements it was given."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        self.statements.append(sql)
        return []

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        self.statements.append(sql)
        return None

    async def fetchval(self, sql: str, *args: Any) -> Any:
        self.statements.append(sql)
        return 0


Seek = Callable[[Any], Awaitable[Any]]
# A sort node (a Merge Append's "Sort Key" is the ordered merge of index scans)
_SORT = re.compile(r"^\s*(->\s+)?(Incremental )?Sort\s*$", re.MULTILINE)

_FILTER = search_store.SearchFilter(
    owner_user_id=1, peer_user_id=2, out=None, min_id=0, min_date=0, max_date=0
)


def _chat_list(folder_id: int | None) -> Seek:
    return lambda db: dialogs_store.page(
        db,
        1,
        folder_id=folder_id,
        exclude_pinned=False,
        offset_date=10,
        offset_id=5,
        offset_peer=3,
        limit=20,
    )


SEEKS: dict[str, tuple[Seek, str]] = {
    "history page": (
        lambda db: history_store.history_page(db, 1, 2, above=0, below=50, limit=20, budget=10**6),
        "box_id < COALESCE",
    ),
    "history ids": (
        lambda db: history_store.history_ids(
            db, 1, 2, above=0, below=50, limit=20, ascending=False
        ),
        "box_id < COALESCE",
    ),
    "unread reactions": (
        lambda db: reactions_store.unread_box_ids(db, 1, 2, above=0, below=50, limit=20),
        "box_id < COALESCE",
    ),
    "listing": (
        lambda db: search_store.list_messages(db, _FILTER, below=50, limit=20, budget=10**6),
        "box_id < COALESCE",
    ),
    "chat list": (_chat_list(0), "< ROW(COALESCE"),
    # every folder: a page from each folder's index, merged
    "chat list of every folder": (_chat_list(None), "< ROW(COALESCE"),
}


@pytest.mark.parametrize("name", list(SEEKS))
async def test_a_seek_bound_is_an_index_bound_in_a_generic_plan(db: Db, name: str) -> None:
    seek, bound = SEEKS[name]
    recorder = _Recorder()
    await seek(recorder)
    async with db.pool.acquire() as conn:
        plans = await generic_plans(conn, recorder.statements)
    assert plans
    for plan in plans:
        conditions = [line for line in plan.splitlines() if bound in line]
        assert conditions, plan
        # the bound narrows an index scan in the order asked for, never filters rows
        # afterwards or sorts them all
        assert all("Index Cond" in line for line in conditions), plan
        assert not _SORT.search(plan) and "Bitmap" not in plan, plan
