"""SQL for profile photos: a user's list of them, the current and fallback one, and the
personal photos viewers set for their contacts (the photos themselves are rows of
``photos``, see store/files.py).

Functions ending in ``_txn`` must run inside a transaction (``Db.run_txn``); they lock
the user's ``users`` row first, so changes to one user's photos take turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.files import PhotoRow
from telesrv.store.rows import from_row

_PHOTO_COLUMNS = """
    p.id, p.access_hash, p.file_reference, p.owner_user_id, p.date, p.dc_id, p.has_stickers,
    p.stripped, p.sizes
"""


@dataclass(frozen=True)
class PhotoChoice:
    """A user's current profile photo and fallback photo (None: none)."""

    photo_id: int | None
    fallback_photo_id: int | None


async def _lock_user_txn(conn: asyncpg.Connection, user_id: int) -> PhotoChoice | None:
    record = await conn.fetchrow(
        "SELECT photo_id, fallback_photo_id FROM users WHERE user_id = $1 FOR UPDATE", user_id
    )
    return None if record is None else from_row(PhotoChoice, record)


async def _set_choice_txn(conn: asyncpg.Connection, user_id: int, choice: PhotoChoice) -> None:
    await conn.execute(
        "UPDATE users SET photo_id = $2, fallback_photo_id = $3 WHERE user_id = $1",
        user_id,
        choice.photo_id,
        choice.fallback_photo_id,
    )


async def _newest_txn(conn: asyncpg.Connection, user_id: int) -> int | None:
    """The user's listed photo first in order (the one to show when the current goes)."""
    value = await conn.fetchval(
        """
        SELECT photo_id FROM profile_photos WHERE user_id = $1 AND NOT fallback
         ORDER BY ord DESC LIMIT 1
        """,
        user_id,
    )
    return None if value is None else int(value)


async def _next_ord_txn(conn: asyncpg.Connection, user_id: int) -> int:
    value = await conn.fetchval(
        "SELECT COALESCE(max(ord), 0) + 1 FROM profile_photos WHERE user_id = $1", user_id
    )
    return int(value)


async def add_photo_txn(
    conn: asyncpg.Connection, user_id: int, photo_id: int, *, fallback: bool, keep: int
) -> list[int]:
    """Make ``photo_id`` the user's current (or, with ``fallback``, fallback) photo.

    A new fallback photo replaces the previous one; a new profile photo goes first in
    the list, and the list keeps the ``keep`` first photos: the ids of those that fall
    off its end (and a replaced fallback) are returned, no longer anyone's profile
    photo."""
    choice = await _lock_user_txn(conn, user_id)
    if choice is None:
        return []
    ord_ = await _next_ord_txn(conn, user_id)
    await conn.execute(
        "INSERT INTO profile_photos (user_id, photo_id, fallback, ord) VALUES ($1, $2, $3, $4)",
        user_id,
        photo_id,
        fallback,
        ord_,
    )
    if fallback:
        dropped = await conn.fetch(
            """
            DELETE FROM profile_photos WHERE user_id = $1 AND fallback AND photo_id <> $2
            RETURNING photo_id
            """,
            user_id,
            photo_id,
        )
        await _set_choice_txn(conn, user_id, PhotoChoice(choice.photo_id, photo_id))
    else:
        dropped = await conn.fetch(
            """
            DELETE FROM profile_photos WHERE user_id = $1 AND photo_id IN (
                SELECT photo_id FROM profile_photos WHERE user_id = $1 AND NOT fallback
                 ORDER BY ord DESC OFFSET $2)
            RETURNING photo_id
            """,
            user_id,
            keep,
        )
        await _set_choice_txn(conn, user_id, PhotoChoice(photo_id, choice.fallback_photo_id))
    return [int(r["photo_id"]) for r in dropped]


async def set_current_txn(
    conn: asyncpg.Connection, user_id: int, photo_id: int | None, *, fallback: bool
) -> bool:
    """Show ``photo_id`` (one of the user's listed photos) as the current profile photo,
    moving it first in the list; None shows none (the list stays). With ``fallback``:
    only None is taken, and removes the fallback photo. False when the photo is not one
    of the user's (nothing changed)."""
    choice = await _lock_user_txn(conn, user_id)
    if choice is None:
        return False
    if fallback:
        if photo_id is not None:
            return False
        await conn.execute("DELETE FROM profile_photos WHERE user_id = $1 AND fallback", user_id)
        await _set_choice_txn(conn, user_id, PhotoChoice(choice.photo_id, None))
        return True
    if photo_id is None:
        await _set_choice_txn(conn, user_id, PhotoChoice(None, choice.fallback_photo_id))
        return True
    ord_ = await _next_ord_txn(conn, user_id)
    moved = await conn.execute(
        """
        UPDATE profile_photos SET ord = $3
         WHERE user_id = $1 AND photo_id = $2 AND NOT fallback
        """,
        user_id,
        photo_id,
        ord_,
    )
    if moved != "UPDATE 1":
        return False
    await _set_choice_txn(conn, user_id, PhotoChoice(photo_id, choice.fallback_photo_id))
    return True


async def delete_photos_txn(
    conn: asyncpg.Connection, user_id: int, photo_ids: Sequence[int]
) -> list[int]:
    """Remove these of the user's profile photos (the fallback one too); the ids
    removed. When the current photo goes, the next in the list becomes current."""
    choice = await _lock_user_txn(conn, user_id)
    if choice is None:
        return []
    records = await conn.fetch(
        """
        DELETE FROM profile_photos WHERE user_id = $1 AND photo_id = ANY($2::bigint[])
        RETURNING photo_id
        """,
        user_id,
        list(photo_ids),
    )
    gone = {int(r["photo_id"]) for r in records}
    current = choice.photo_id
    if current in gone:
        current = await _newest_txn(conn, user_id)
    fallback = None if choice.fallback_photo_id in gone else choice.fallback_photo_id
    if (current, fallback) != (choice.photo_id, choice.fallback_photo_id):
        await _set_choice_txn(conn, user_id, PhotoChoice(current, fallback))
    return [p for p in photo_ids if p in gone]


async def choice(db: Executor, user_id: int) -> PhotoChoice | None:
    record = await db.fetchrow(
        "SELECT photo_id, fallback_photo_id FROM users WHERE user_id = $1", user_id
    )
    return None if record is None else from_row(PhotoChoice, record)


async def count_photos(db: Executor, user_id: int) -> int:
    value = await db.fetchval(
        "SELECT count(*) FROM profile_photos WHERE user_id = $1 AND NOT fallback", user_id
    )
    return int(value)


async def list_photos(
    db: Executor, user_id: int, *, after_photo_id: int, offset: int, limit: int
) -> list[PhotoRow]:
    """The user's listed photos in order: from the one after ``after_photo_id`` (0:
    from the first; one that is not listed: nothing), skipping ``offset``."""
    records = await db.fetch(
        f"""
        SELECT {_PHOTO_COLUMNS}
          FROM profile_photos pp JOIN photos p ON p.id = pp.photo_id
         WHERE pp.user_id = $1 AND NOT pp.fallback
           AND ($2::bigint = 0 OR pp.ord < (SELECT ord FROM profile_photos
                                     WHERE user_id = $1 AND photo_id = $2 AND NOT fallback))
         ORDER BY pp.ord DESC
        OFFSET $3 LIMIT $4
        """,
        user_id,
        after_photo_id,
        offset,
        limit,
    )
    return [from_row(PhotoRow, r) for r in records]


async def photos_by_ids(db: Executor, photo_ids: Sequence[int]) -> dict[int, PhotoRow]:
    records = await db.fetch(
        f"SELECT {_PHOTO_COLUMNS} FROM photos p WHERE p.id = ANY($1::bigint[])", list(photo_ids)
    )
    return {r["id"]: from_row(PhotoRow, r) for r in records}


async def profile_photo_user(db: Executor, photo_id: int) -> tuple[int, bool] | None:
    """Whose profile photo this photo is, if anyone's, and whether it is their
    fallback photo."""
    record = await db.fetchrow(
        "SELECT user_id, fallback FROM profile_photos WHERE photo_id = $1 LIMIT 1", photo_id
    )
    return None if record is None else (int(record["user_id"]), bool(record["fallback"]))


async def personal_photo_id(db: Executor, owner_user_id: int, user_id: int) -> int | None:
    value = await db.fetchval(
        "SELECT photo_id FROM personal_photos WHERE owner_user_id = $1 AND user_id = $2",
        owner_user_id,
        user_id,
    )
    return None if value is None else int(value)


async def set_personal_photo(
    db: Executor, owner_user_id: int, user_id: int, photo_id: int | None
) -> None:
    """Set (or, None, remove) the photo the owner sees for ``user_id``."""
    if photo_id is None:
        await db.execute(
            "DELETE FROM personal_photos WHERE owner_user_id = $1 AND user_id = $2",
            owner_user_id,
            user_id,
        )
        return
    await db.execute(
        """
        INSERT INTO personal_photos (owner_user_id, user_id, photo_id) VALUES ($1, $2, $3)
        ON CONFLICT (owner_user_id, user_id) DO UPDATE SET photo_id = EXCLUDED.photo_id
        """,
        owner_user_id,
        user_id,
        photo_id,
    )
