"""The chat list's pages of every folder: read as one page per folder merged, they must
be exactly what one ordered scan over all the user's dialogs gives, at every offset,
with or without the pinned dialogs. Checked against a model on dialogs whose dates tie
within and across folders."""

from __future__ import annotations

import itertools
import random

import pytest

from telesrv.store import dialogs as dialogs_store
from telesrv.store.db import Db
from telesrv.store.dialog_list import DialogRow

_users = itertools.count(9_600_000, 1000)


def _model(
    rows: list[tuple[int, int, int, int | None, int]],
    *,
    exclude_pinned: bool,
    skip_pins_of: int | None,
    offset: tuple[int, int, int] | None,
    limit: int,
) -> list[int]:
    """Peers of the page, from (peer, top_message, date, pinned_order, folder) rows."""
    kept = [
        r
        for r in rows
        if not (exclude_pinned and r[3] is not None)
        and not (skip_pins_of is not None and r[3] is not None and r[4] == skip_pins_of)
        and (offset is None or (r[2], r[1], r[0]) < offset)
    ]
    kept.sort(key=lambda r: (r[2], r[1], r[0]), reverse=True)
    return [r[0] for r in kept[:limit]]


async def _store(db: Db, user: int, rows: list[tuple[int, int, int, int | None, int]]) -> None:
    """The user's dialogs, from (peer, top_message, date, pinned_order, folder) rows."""
    await db.pool.executemany(
        """
        INSERT INTO dialogs (user_id, peer_user_id, top_message, top_message_date,
                             pinned_order, folder_id)
        VALUES ($1, $2, $3, $4, $5, $6)
        """,
        [(user, *r) for r in rows],
    )


async def _page(
    db: Db,
    user: int,
    *,
    exclude_pinned: bool,
    skip_pins_of: int | None,
    offset: tuple[int, int, int] | None,
    limit: int,
) -> list[DialogRow]:
    return await dialogs_store.page(
        db.pool,
        user,
        folder_id=None,
        exclude_pinned=exclude_pinned,
        skip_pins_of=skip_pins_of,
        offset_date=offset[0] if offset else None,
        offset_id=offset[1] if offset else None,
        offset_peer=offset[2] if offset else None,
        limit=limit,
    )


@pytest.mark.parametrize("seed", range(4))
async def test_pages_of_every_folder_walk_all_dialogs_in_order(db: Db, seed: int) -> None:
    rng = random.Random(seed)
    user = next(_users)
    rows: list[tuple[int, int, int, int | None, int]] = []
    for peer in range(user + 1, user + 1 + rng.randrange(20, 60)):
        folder = rng.choice((0, 0, 1))
        pinned = rng.randrange(5) if rng.random() < 0.15 else None
        # few distinct dates and top messages, so the order's later keys decide
        rows.append((peer, rng.randrange(1, 4), 1000 + rng.randrange(6), pinned, folder))
    assert {r[4] for r in rows} == {0, 1}  # both folders, for every seed here
    await _store(db, user, rows)
    for exclude_pinned, skip_pins_of in ((False, None), (True, None), (False, 0), (False, 1)):
        limit = rng.randrange(1, 8)
        offset: tuple[int, int, int] | None = None
        walked: list[int] = []
        while True:
            page = await _page(
                db,
                user,
                exclude_pinned=exclude_pinned,
                skip_pins_of=skip_pins_of,
                offset=offset,
                limit=limit,
            )
            expected = _model(
                rows,
                exclude_pinned=exclude_pinned,
                skip_pins_of=skip_pins_of,
                offset=offset,
                limit=limit,
            )
            assert [d.peer_user_id for d in page] == expected
            if not page:
                break
            walked += expected
            last = page[-1]
            offset = (last.top_message_date, last.top_message, last.peer_user_id)
        # every dialog the filters keep, each once, newest first
        assert walked == _model(
            rows,
            exclude_pinned=exclude_pinned,
            skip_pins_of=skip_pins_of,
            offset=None,
            limit=len(rows),
        )


async def test_pages_of_every_folder_at_any_offset(db: Db) -> None:
    """Offsets that fall between dialogs, past either end, at the integer extremes or
    with only some of their keys (each missing key: past the top of its type)."""
    rng = random.Random(7)
    user = next(_users)
    rows: list[tuple[int, int, int, int | None, int]] = [
        (peer, rng.randrange(1, 4), 1000 + rng.randrange(6), rng.choice((None, None, 1)), folder)
        for peer, folder in zip(range(user + 1, user + 41), itertools.cycle((0, 1, 0)))
    ]
    await _store(db, user, rows)
    dates = [None, -(2**31), 999, *range(1000, 1006), 1006, 2**31 - 1, 2**31]
    ids = [None, -(2**31), 0, 1, 2, 3, 4, 2**31 - 1]
    peers = [None, -(2**63), user, user + 20, user + 41, 2**63 - 1]
    for _ in range(200):
        date, top, peer = rng.choice(dates), rng.choice(ids), rng.choice(peers)
        exclude_pinned, skip_pins_of = rng.choice(((False, None), (True, None), (False, 0)))
        limit = rng.choice((1, 3, 20, 100))
        page = await dialogs_store.page(
            db.pool,
            user,
            folder_id=None,
            exclude_pinned=exclude_pinned,
            skip_pins_of=skip_pins_of,
            offset_date=date,
            offset_id=top,
            offset_peer=peer,
            limit=limit,
        )
        # as the query fills in a missing key: above every value of its column's type
        offset = (
            2**31 if date is None else date,
            2**31 - 1 if top is None else top,
            2**63 - 1 if peer is None else peer,
        )
        expected = _model(
            rows,
            exclude_pinned=exclude_pinned,
            skip_pins_of=skip_pins_of,
            offset=offset,
            limit=limit,
        )
        assert [d.peer_user_id for d in page] == expected, (date, top, peer, limit)


async def test_every_folder_is_the_main_list_and_the_archive(db: Db) -> None:
    """The page of every folder reads folders 0 and 1 by name: a dialog in any other
    folder would be left out of it, so the table must allow no other."""
    # the rule is the column's type, a domain (a table CHECK costs every write more)
    checks = await db.pool.fetch(
        """
        SELECT pg_get_constraintdef(c.oid) AS rule FROM pg_constraint c
         WHERE c.contypid = (SELECT atttypid FROM pg_attribute
                              WHERE attrelid = 'dialogs'::regclass AND attname = 'folder_id')
            OR (c.conrelid = 'dialogs'::regclass AND c.contype = 'c')
        """
    )
    assert [r["rule"] for r in checks] == ["CHECK ((VALUE = ANY (ARRAY[0, 1])))"]
    nullable = await db.pool.fetchval(
        """
        SELECT NOT attnotnull FROM pg_attribute
         WHERE attrelid = 'dialogs'::regclass AND attname = 'folder_id'
        """
    )
    assert nullable is False
