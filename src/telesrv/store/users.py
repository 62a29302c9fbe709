"""SQL for accounts: creation, profile, username, status, and the per-viewer projection.

Functions ending in `_txn` must run inside a transaction (`Db.run_txn`); the others
are single statements and take a pool or a connection.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.refusals import PhoneNumberOccupied, UsernameOccupied
from telesrv.store.rows import maker


@dataclass(frozen=True)
class UserRow:
    user_id: int
    phone: str
    first_name: str
    last_name: str
    about: str
    username: str | None
    online_until: datetime | None
    last_online_at: datetime | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ProjectedUserRow:
    """A user as one viewer sees them: the raw account plus the viewer's relationship."""

    user_id: int
    phone: str
    first_name: str
    last_name: str
    username: str | None
    online_until: datetime | None
    last_online_at: datetime | None
    # The names the viewer saved the user under; None when not in the viewer's contacts.
    saved_first_name: str | None
    saved_last_name: str | None
    in_viewer_contacts: bool
    has_viewer_in_contacts: bool
    # The viewer saved the user by phone number (so already has it).
    saved_by_phone: bool = False
    # Either side's block list names the other.
    viewer_blocked: bool = False
    blocked_viewer: bool = False
    # Photos (store/profile_photos.py): the user's current profile photo, fallback
    # photo and the viewer's personal photo for them, each id with its stripped preview.
    photo_id: int | None = None
    photo_stripped: bytes | None = None
    fallback_photo_id: int | None = None
    fallback_stripped: bytes | None = None
    personal_photo_id: int | None = None
    personal_stripped: bytes | None = None
    # The target's privacy keys with rules of their own (others have the defaults),
    # and those of them whose rules refuse this viewer (services/privacy.py reads them);
    # only the keys the query was asked for.
    privacy_set: frozenset[str] = frozenset()
    privacy_denied: frozenset[str] = frozenset()


_USER_COLUMNS = """
    user_id, phone, first_name, last_name, about, username,
    online_until, last_online_at, created_at
"""


def _user_row(record: asyncpg.Record) -> UserRow:
    return UserRow(
        user_id=record["user_id"],
        phone=record["phone"],
        first_name=record["first_name"],
        last_name=record["last_name"],
        about=record["about"],
        username=record["username"],
        online_until=record["online_until"],
        last_online_at=record["last_online_at"],
        created_at=record["created_at"],
    )


# The username's unique index, as its name appears in an error's text: alone, or on
# Citus with the shard's id (users_username_lower_102008).
_USERNAME_CONSTRAINT = re.compile(r"(?<!\w)users_username_lower(?:_\d+)?(?!\w)")


def _is_username_conflict(exc: asyncpg.UniqueViolationError) -> bool:
    # On Citus the constraint is named after the shard that met the conflict, and a
    # worker's error reaches us without its constraint field: only its message names
    # the constraint (in the worker's language, but names are never translated).
    name = getattr(exc, "constraint_name", None)
    text = name if name else str(exc)
    return _USERNAME_CONSTRAINT.search(text) is not None


# A new account's update log starts with pts 1 taken (a noop event), written with the
# account: its first state is then 1 from the start. Were it taken at the first
# updates.getState instead, a send racing that call could take pts 1 and leave the
# state answer with nothing contiguous to give (pts 0, which clients read as "no
# state") or with the send's own pts before its answer.
# (The statement reads from first_pts so that it runs: a CTE without a write of its own
# is evaluated only when read.)
_FIRST_PTS = """
first_pts AS (
    SELECT telesrv_fill_pts(
        p_user => user_id, p_pts => ARRAY[1], p_date => extract(epoch FROM now())::integer
    ) FROM inserted
)"""


async def create_user(
    db: Executor,
    phone: str,
    first_name: str,
    last_name: str = "",
    username: str | None = None,
) -> UserRow:
    """Insert an account; raises PhoneNumberOccupied, or UsernameOccupied when the
    (case-insensitive) username belongs to another account."""
    try:
        record = await db.fetchrow(
            f"""
            WITH inserted AS (
                INSERT INTO users (phone, first_name, last_name, username)
                VALUES ($1, $2, $3, $4)
                RETURNING {_USER_COLUMNS}
            ), {_FIRST_PTS}
            SELECT {_USER_COLUMNS} FROM inserted, first_pts
            """,
            phone,
            first_name,
            last_name,
            username,
        )
    except asyncpg.UniqueViolationError as exc:
        if _is_username_conflict(exc):
            raise UsernameOccupied() from None
        raise PhoneNumberOccupied() from None
    assert record is not None
    return _user_row(record)


async def create_user_if_absent(
    db: Executor, phone: str, first_name: str, last_name: str = ""
) -> UserRow:
    """The account of `phone`, created when there is none (safe under concurrent calls)."""
    record = await db.fetchrow(
        f"""
        WITH inserted AS (
            INSERT INTO users (phone, first_name, last_name)
            VALUES ($1, $2, $3)
            ON CONFLICT (phone) DO NOTHING
            RETURNING {_USER_COLUMNS}
        ), {_FIRST_PTS}
        SELECT {_USER_COLUMNS} FROM inserted, first_pts
        UNION ALL
        SELECT {_USER_COLUMNS} FROM users WHERE phone = $1
        LIMIT 1
        """,
        phone,
        first_name,
        last_name,
    )
    if record is None:
        # A concurrent insert of the same phone had not committed when the statement's
        # snapshot was taken; it has by now (ON CONFLICT waited for it).
        found = await get_user_by_phone(db, phone)
        assert found is not None
        return found
    return _user_row(record)


async def get_user(db: Executor, user_id: int) -> UserRow | None:
    record = await db.fetchrow(f"SELECT {_USER_COLUMNS} FROM users WHERE user_id = $1", user_id)
    return None if record is None else _user_row(record)


async def get_user_by_phone(db: Executor, phone: str) -> UserRow | None:
    record = await db.fetchrow(f"SELECT {_USER_COLUMNS} FROM users WHERE phone = $1", phone)
    return None if record is None else _user_row(record)


async def get_user_ids_by_phones(db: Executor, phones: Sequence[str]) -> dict[str, int]:
    records = await db.fetch(
        "SELECT phone, user_id FROM users WHERE phone = ANY($1::text[])", list(phones)
    )
    return {r["phone"]: r["user_id"] for r in records}


async def get_user_id_by_username(db: Executor, username: str) -> int | None:
    user_id = await db.fetchval(
        "SELECT user_id FROM users WHERE lower(username) = lower($1)", username
    )
    return None if user_id is None else int(user_id)


async def list_users(db: Executor, *, after_id: int = 0, limit: int = 1000) -> list[UserRow]:
    records = await db.fetch(
        f"SELECT {_USER_COLUMNS} FROM users WHERE user_id > $1 ORDER BY user_id LIMIT $2",
        after_id,
        limit,
    )
    return [_user_row(r) for r in records]


async def update_profile(
    db: Executor,
    user_id: int,
    *,
    first_name: str | None,
    last_name: str | None,
    about: str | None,
) -> UserRow | None:
    """Set the given fields (None keeps a field as it is)."""
    record = await db.fetchrow(
        f"""
        UPDATE users
           SET first_name = COALESCE($2, first_name),
               last_name = COALESCE($3, last_name),
               about = COALESCE($4, about)
         WHERE user_id = $1
        RETURNING {_USER_COLUMNS}
        """,
        user_id,
        first_name,
        last_name,
        about,
    )
    return None if record is None else _user_row(record)


async def set_username(db: Executor, user_id: int, username: str | None) -> UserRow | None:
    """Set or (None) clear the username; raises UsernameOccupied."""
    try:
        record = await db.fetchrow(
            f"UPDATE users SET username = $2 WHERE user_id = $1 RETURNING {_USER_COLUMNS}",
            user_id,
            username,
        )
    except asyncpg.UniqueViolationError as exc:
        if _is_username_conflict(exc):
            raise UsernameOccupied() from None
        raise
    return None if record is None else _user_row(record)


async def set_status(
    db: Executor, user_id: int, *, online_until: datetime | None, last_online_at: datetime
) -> None:
    await db.execute(
        "UPDATE users SET online_until = $2, last_online_at = $3 WHERE user_id = $1",
        user_id,
        online_until,
        last_online_at,
    )


async def project_users(
    db: Executor, viewer_id: int, target_ids: Sequence[int], privacy_keys: Sequence[str] = ()
) -> list[ProjectedUserRow]:
    """The targets that exist, each with the viewer's relationship to them: one query
    (the privacy rules of ``privacy_keys`` only)."""
    pairs = await project_user_pairs(db, [viewer_id] * len(target_ids), target_ids, privacy_keys)
    return [row for _, row in pairs]


# The target's chosen privacy keys among those asked ($3), and those of them refusing
# the viewer, for the Citus shape below (its rules and members read beforehand): each
# key's rules are read in order and the first that matches the viewer decides (allow_*
# allows); none matching refuses. "Contacts" are the target's contacts (``theirs``). A
# users rule matches when it is the first naming the viewer: one probe of the members
# per key, the lists themselves unread. The function of the plain shape does the same.
_PRIVACY_OF_SUBQUERIES = """
    SELECT array_agg(s.key) AS privacy_set,
           array_agg(s.key) FILTER (WHERE NOT COALESCE((
               SELECT r.kind LIKE 'allow%'
                 FROM unnest(s.kinds) WITH ORDINALITY AS r(kind, n)
                WHERE r.kind IN ('allow_all', 'disallow_all')
                   OR (r.kind IN ('allow_contacts', 'disallow_contacts')
                       AND theirs.owner_user_id IS NOT NULL)
                   OR r.n = (SELECT m.n FROM members m
                              WHERE m.user_id = s.user_id AND m.key = s.key
                                AND m.member = p.viewer_id)
                ORDER BY r.n
                LIMIT 1), false)) AS privacy_denied
      FROM rules s
     WHERE s.user_id = u.user_id AND s.key = ANY($3::text[])
"""
_NO_KEYS: frozenset[str] = frozenset()


# A projected row is made of its columns by name, the last two fields (lists of
# privacy keys) turned into sets on the way: the outbox makes thousands of them.
_PROJECTED_FIELDS = tuple(f.name for f in dataclasses.fields(ProjectedUserRow))
assert _PROJECTED_FIELDS[-2:] == ("privacy_set", "privacy_denied")
_read_projected = itemgetter(*_PROJECTED_FIELDS[:-2])
_make_projected = maker(ProjectedUserRow)


def _keys(keys: list[str] | None) -> frozenset[str]:
    # Most users choose nothing: they share one empty set.
    return frozenset(keys) if keys else _NO_KEYS


# The facts of the pairs, by index probes per pair: a function, so that its statement
# keeps one plan per connection (store/functions/telesrv_project_user_pairs.sql).
_PROJECTION = """
        SELECT viewer_id, user_id, phone, first_name, last_name, username, online_until,
               last_online_at, saved_first_name, saved_last_name, in_viewer_contacts,
               has_viewer_in_contacts, saved_by_phone, viewer_blocked, blocked_viewer,
               photo_id, photo_stripped, fallback_photo_id, fallback_stripped,
               personal_photo_id, personal_stripped, privacy_set, privacy_denied
          FROM telesrv_project_user_pairs(p_viewer_ids => $1, p_target_ids => $2, p_keys => $3)
"""

# The same answer in a shape Citus can plan. Citus cannot join two users' distributed
# rows in one query (the viewer's contacts with the target's), so each table is read in
# a subquery of its own, by the user columns it is distributed by (the viewer's side:
# its contacts, blocks and personal photos; the target's side: its contacts, blocks
# and privacy rules), which Citus runs first, each on the shards of those users; the
# outer query then joins their results with the reference tables only. On plain
# PostgreSQL the function's single query keeps its per-pair index probes.
_SPLIT_PROJECTION = f"""
        WITH mine AS MATERIALIZED (
            SELECT owner_user_id, contact_user_id, first_name, last_name, saved_by_phone
              FROM contacts
             WHERE owner_user_id = ANY($1::bigint[]) AND contact_user_id = ANY($2::bigint[])),
        theirs_all AS MATERIALIZED (
            SELECT owner_user_id, contact_user_id FROM contacts
             WHERE owner_user_id = ANY($2::bigint[]) AND contact_user_id = ANY($1::bigint[])),
        viewer_blocks AS MATERIALIZED (
            SELECT owner_user_id, blocked_user_id FROM contact_blocks
             WHERE owner_user_id = ANY($1::bigint[]) AND blocked_user_id = ANY($2::bigint[])),
        target_blocks AS MATERIALIZED (
            SELECT owner_user_id, blocked_user_id FROM contact_blocks
             WHERE owner_user_id = ANY($2::bigint[]) AND blocked_user_id = ANY($1::bigint[])),
        personal AS MATERIALIZED (
            SELECT owner_user_id, user_id, photo_id FROM personal_photos
             WHERE owner_user_id = ANY($1::bigint[]) AND user_id = ANY($2::bigint[])),
        rules AS MATERIALIZED (
            SELECT user_id, key, kinds FROM privacy_rules
             WHERE user_id = ANY($2::bigint[]) AND key = ANY($3::text[])),
        members AS MATERIALIZED (
            SELECT user_id, key, member, n FROM privacy_rule_members
             WHERE user_id = ANY($2::bigint[]) AND key = ANY($3::text[])
               AND member = ANY($1::bigint[]))
        SELECT p.viewer_id, u.user_id, u.phone, u.first_name, u.last_name, u.username,
               u.online_until, u.last_online_at,
               mine.first_name AS saved_first_name, mine.last_name AS saved_last_name,
               mine.owner_user_id IS NOT NULL AS in_viewer_contacts,
               theirs.owner_user_id IS NOT NULL AS has_viewer_in_contacts,
               COALESCE(mine.saved_by_phone, false) AS saved_by_phone,
               EXISTS (SELECT 1 FROM viewer_blocks b
                        WHERE b.owner_user_id = p.viewer_id
                          AND b.blocked_user_id = u.user_id) AS viewer_blocked,
               EXISTS (SELECT 1 FROM target_blocks b
                        WHERE b.owner_user_id = u.user_id
                          AND b.blocked_user_id = p.viewer_id) AS blocked_viewer,
               u.photo_id, cur.stripped AS photo_stripped,
               u.fallback_photo_id, fb.stripped AS fallback_stripped,
               pe.photo_id AS personal_photo_id, pep.stripped AS personal_stripped,
               pv.privacy_set, pv.privacy_denied
          FROM unnest($1::bigint[], $2::bigint[]) AS p(viewer_id, target_id)
          JOIN users u ON u.user_id = p.target_id
          LEFT JOIN mine
                 ON mine.owner_user_id = p.viewer_id AND mine.contact_user_id = u.user_id
          LEFT JOIN theirs_all theirs
                 ON theirs.owner_user_id = u.user_id AND theirs.contact_user_id = p.viewer_id
          LEFT JOIN photos cur ON cur.id = u.photo_id
          LEFT JOIN photos fb ON fb.id = u.fallback_photo_id
          LEFT JOIN personal pe
                 ON pe.owner_user_id = p.viewer_id AND pe.user_id = u.user_id
          LEFT JOIN photos pep ON pep.id = pe.photo_id
          LEFT JOIN LATERAL ({_PRIVACY_OF_SUBQUERIES}) pv
                 ON true
"""


async def project_user_pairs(
    db: Executor,
    viewer_ids: Sequence[int],
    target_ids: Sequence[int],
    privacy_keys: Sequence[str],
    *,
    split: bool = False,
) -> list[tuple[int, ProjectedUserRow]]:
    """(viewer, target) pairs -> (viewer, the target as it relates to that viewer), for
    the targets that exist: one query for many viewers (the outbox renders a batch).
    Of the privacy rules, only those of ``privacy_keys`` are evaluated. ``split``: the
    shape for Citus (see _SPLIT_PROJECTION)."""
    records = await db.fetch(
        _SPLIT_PROJECTION if split else _PROJECTION,
        list(viewer_ids),
        list(target_ids),
        list(privacy_keys),
    )
    plain, make = _read_projected, _make_projected
    return [
        (
            r["viewer_id"],
            make((*plain(r), _keys(r["privacy_set"]), _keys(r["privacy_denied"]))),
        )
        for r in records
    ]
