"""The chat list as the user organises it: listing (and custom filters), pins, unread
marks and the archive. One function per query; ``_txn`` ones run in the caller's
transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.dialog_list import DialogRow
from telesrv.store.log_payloads import FolderPeers
from telesrv.store.rows import from_row

_COLUMNS = """
    peer_user_id, top_message, top_message_date, read_inbox_max_id, read_outbox_max_id,
    unread_count, unread_mark, pinned_order, folder_id
"""

# pg_advisory_xact_lock class of "the user's pinned lists": changes to one user's pins
# run one at a time, so the per-folder limit holds under concurrent calls.
_PIN_LOCK = 0x1E1E5201


# -- listing -----------------------------------------------------------------------------


async def pinned(db: Executor, user_id: int, folder_id: int) -> list[DialogRow]:
    """The folder's pinned dialogs, top first."""
    rows = await db.fetch(
        f"""
        SELECT {_COLUMNS} FROM dialogs
         WHERE user_id = $1 AND folder_id = $2 AND pinned_order IS NOT NULL
         ORDER BY pinned_order, peer_user_id
        """,
        user_id,
        folder_id,
    )
    return [from_row(DialogRow, r) for r in rows]


# A folder's page past the offset, after "WHERE user_id = $1 AND folder_id = ...":
# $3..$5 the offset (date, id, peer; None: from the top), $6 the limit, $7 exclude
# every pinned dialog, $8 skip the pins of this folder.
_PAGE_OF_FOLDER = """
           AND (NOT $7 OR pinned_order IS NULL)
           AND ($8::integer IS NULL OR pinned_order IS NULL OR folder_id <> $8)
           -- with no offset, past the top (a date above every int4): one row comparison
           -- rather than "$3 IS NULL OR ...", which a generic plan could not use
           AND (top_message_date, top_message, peer_user_id)
               < (COALESCE($3::bigint, 2147483648), COALESCE($4::integer, 2147483647),
                  COALESCE($5::bigint, 9223372036854775807))
         ORDER BY top_message_date DESC, top_message DESC, peer_user_id DESC
         LIMIT $6
"""

_ONE_FOLDER = f"""
        SELECT {_COLUMNS} FROM dialogs
         WHERE user_id = $1 AND folder_id = $2 {_PAGE_OF_FOLDER}
"""

# Every folder (the folder's domain allows 0, the main list, and 1, the archive): each
# folder's page read in order from the index and the two merged. The index leads with
# the folder, so a single scan over both would read and sort every dialog of the user
# below the offset, where this reads at most a page per folder. $2 (None here) is still
# named, as PostgreSQL must know the type of every parameter it is given.
_ALL_FOLDERS = f"""
        SELECT {_COLUMNS} FROM (
            (SELECT {_COLUMNS} FROM dialogs
              WHERE user_id = $1 AND folder_id = 0 {_PAGE_OF_FOLDER})
            UNION ALL
            (SELECT {_COLUMNS} FROM dialogs
              WHERE user_id = $1 AND folder_id = 1 {_PAGE_OF_FOLDER})
        ) AS d
         WHERE $2::integer IS NULL
         ORDER BY top_message_date DESC, top_message DESC, peer_user_id DESC
         LIMIT $6
"""


async def page(
    db: Executor,
    user_id: int,
    *,
    folder_id: int | None,
    exclude_pinned: bool,
    offset_date: int | None,
    offset_id: int | None,
    offset_peer: int | None,
    limit: int,
    skip_pins_of: int | None = None,
) -> list[DialogRow]:
    """Seek pagination on (top_message_date, top_message, peer_user_id), newest first,
    in one folder (or all of them: ``folder_id`` None), without any pinned dialog
    (``exclude_pinned``) or without those pinned in folder ``skip_pins_of`` (listed
    apart, at the head)."""
    rows = await db.fetch(
        _ALL_FOLDERS if folder_id is None else _ONE_FOLDER,
        user_id,
        folder_id,
        offset_date,
        offset_id,
        offset_peer,
        limit,
        exclude_pinned,
        skip_pins_of,
    )
    return [from_row(DialogRow, r) for r in rows]


@dataclass(frozen=True, slots=True)
class FilterRule:
    """Which dialogs a custom filter shows (private chats only exist here)."""

    pinned: list[int]  # shown first, in this order
    included: list[int]  # always shown (with the pinned), whatever the flags say
    excluded: list[int]
    contacts: bool
    non_contacts: bool
    exclude_muted: bool
    exclude_read: bool
    exclude_archived: bool


_FILTER_WHERE = """
         WHERE d.user_id = $1
           AND NOT (d.peer_user_id = ANY($4::bigint[]))
           AND (d.peer_user_id = ANY($3::bigint[])
                OR (($5 OR $6)
                    AND (($5 AND $6)
                         OR (EXISTS (SELECT 1 FROM contacts c
                                      WHERE c.owner_user_id = d.user_id
                                        AND c.contact_user_id = d.peer_user_id)) = $5)
                    AND (NOT $9 OR d.folder_id = 0)
                    AND (NOT $8 OR d.unread_count > 0 OR d.unread_mark)
                    AND (NOT $7 OR COALESCE((SELECT n.mute_until FROM notify_settings n
                                              WHERE n.user_id = d.user_id AND n.kind = 'peer'
                                                AND n.peer_user_id = d.peer_user_id),
                                             0) <= $10)))
"""


def _rule_args(rule: FilterRule, now: int) -> list[object]:
    return [
        rule.pinned + rule.included,
        rule.excluded,
        rule.contacts,
        rule.non_contacts,
        rule.exclude_muted,
        rule.exclude_read,
        rule.exclude_archived,
        now,
    ]


async def filter_page(
    db: Executor,
    user_id: int,
    rule: FilterRule,
    now: int,
    *,
    skip: Sequence[int],
    offset_date: int | None,
    offset_id: int | None,
    offset_peer: int | None,
    limit: int,
) -> list[DialogRow]:
    """The dialogs a filter shows, newest first, without those in ``skip``."""
    rows = await db.fetch(
        f"""
        SELECT {_COLUMNS} FROM dialogs d
        {_FILTER_WHERE}
           AND NOT (d.peer_user_id = ANY($11::bigint[]))
           AND (top_message_date, top_message, peer_user_id)
               < (COALESCE($12::bigint, 2147483648), COALESCE($13::integer, 2147483647),
                  COALESCE($14::bigint, 9223372036854775807))
         ORDER BY top_message_date DESC, top_message DESC, peer_user_id DESC
         LIMIT $2
        """,
        user_id,
        limit,
        *_rule_args(rule, now),
        list(skip),
        offset_date,
        offset_id,
        offset_peer,
    )
    return [from_row(DialogRow, r) for r in rows]


async def filter_count(db: Executor, user_id: int, rule: FilterRule, now: int) -> int:
    value = await db.fetchval(
        f"""
        SELECT count(*) FROM dialogs d
        {_FILTER_WHERE}
           AND $2::integer IS NOT NULL  -- unused: keeps the numbering of filter_page
        """,
        user_id,
        0,
        *_rule_args(rule, now),
    )
    return int(value)


async def filter_summary(db: Executor, user_id: int, rule: FilterRule, now: int) -> tuple[int, int]:
    """(count, hash) of the dialogs a filter shows, hashed as ``summary`` hashes a
    folder's, with each chat's place among the filter's pins."""
    row = await db.fetchrow(
        f"""
        SELECT count(*) AS n,
               COALESCE(sum(hashtextextended(
                   d.peer_user_id::text || ':' || d.top_message || ':' || d.folder_id || ':'
                   || COALESCE(array_position($11::bigint[], d.peer_user_id), 0) || ':'
                   || d.unread_mark, 0)), 0) AS h
          FROM dialogs d
        {_FILTER_WHERE}
           AND $2::integer IS NOT NULL  -- unused: keeps the numbering of filter_page
        """,
        user_id,
        0,
        *_rule_args(rule, now),
        list(rule.pinned),
    )
    assert row is not None
    return int(row["n"]), int(row["h"])


async def count(db: Executor, user_id: int, folder_id: int | None) -> int:
    """How many dialogs the folder (every folder: None) holds: a count, without reading
    and hashing each row's columns as ``summary`` does (so from an index where the
    table's visibility map allows)."""
    value = await db.fetchval(
        """
        SELECT count(*) FROM dialogs
         WHERE user_id = $1 AND ($2::integer IS NULL OR folder_id = $2)
        """,
        user_id,
        folder_id,
    )
    return int(value)


async def summary(db: Executor, user_id: int, folder_id: int | None) -> tuple[int, int]:
    """(count, a hash of what a listing shows of every dialog) for messages.getDialogs:
    it reads every dialog of the folder, so only a request that can be answered "not
    modified" needs it."""
    row = await db.fetchrow(
        """
        SELECT count(*) AS n,
               COALESCE(sum(hashtextextended(
                   peer_user_id::text || ':' || top_message || ':' || folder_id || ':'
                   || COALESCE(pinned_order, 0) || ':' || unread_mark, 0)), 0) AS h
          FROM dialogs
         WHERE user_id = $1 AND ($2::integer IS NULL OR folder_id = $2)
        """,
        user_id,
        folder_id,
    )
    assert row is not None
    return int(row["n"]), int(row["h"])


@dataclass(frozen=True, slots=True)
class FolderSummary:
    """The archive as one entry of the main list (dialogFolder)."""

    top: DialogRow
    unread_muted_peers: int
    unread_unmuted_peers: int
    unread_muted_messages: int
    unread_unmuted_messages: int


async def folder_summary(
    db: Executor, user_id: int, folder_id: int, now: int
) -> FolderSummary | None:
    """None when the folder is empty."""
    rows = await db.fetch(
        f"""
        SELECT {_COLUMNS} FROM dialogs
         WHERE user_id = $1 AND folder_id = $2
         ORDER BY top_message_date DESC, top_message DESC, peer_user_id DESC
         LIMIT 1
        """,
        user_id,
        folder_id,
    )
    if not rows:
        return None
    counts = await db.fetchrow(
        """
        WITH d AS (
            SELECT d.unread_count + (d.unread_mark AND d.unread_count = 0)::int AS unread,
                   COALESCE(n.mute_until, 0) > $3 AS muted
              FROM dialogs d
              LEFT JOIN notify_settings n ON n.user_id = d.user_id AND n.kind = 'peer'
                                         AND n.peer_user_id = d.peer_user_id
             WHERE d.user_id = $1 AND d.folder_id = $2
        )
        SELECT count(*) FILTER (WHERE unread > 0 AND muted) AS muted_peers,
               count(*) FILTER (WHERE unread > 0 AND NOT muted) AS unmuted_peers,
               COALESCE(sum(unread) FILTER (WHERE muted), 0) AS muted_messages,
               COALESCE(sum(unread) FILTER (WHERE NOT muted), 0) AS unmuted_messages
          FROM d
        """,
        user_id,
        folder_id,
        now,
    )
    assert counts is not None
    return FolderSummary(
        from_row(DialogRow, rows[0]),
        int(counts["muted_peers"]),
        int(counts["unmuted_peers"]),
        int(counts["muted_messages"]),
        int(counts["unmuted_messages"]),
    )


# -- pins --------------------------------------------------------------------------------


async def lock_pins_txn(conn: asyncpg.Connection, user_id: int) -> None:
    """Hold the user's pins lock until commit (ids sharing a remainder share the lock,
    which only makes them wait for each other)."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock($1::int, ($2::bigint % 2147483647)::int)",
        _PIN_LOCK,
        user_id,
    )


async def dialog_for_update_txn(
    conn: asyncpg.Connection, user_id: int, peer_user_id: int
) -> DialogRow | None:
    row = await conn.fetchrow(
        f"""
        SELECT {_COLUMNS} FROM dialogs
         WHERE user_id = $1 AND peer_user_id = $2
           FOR UPDATE
        """,
        user_id,
        peer_user_id,
    )
    return None if row is None else from_row(DialogRow, row)


async def pinned_peers_txn(conn: asyncpg.Connection, user_id: int, folder_id: int) -> list[int]:
    """The folder's pinned peers, top first."""
    rows = await conn.fetch(
        """
        SELECT peer_user_id FROM dialogs
         WHERE user_id = $1 AND folder_id = $2 AND pinned_order IS NOT NULL
         ORDER BY pinned_order, peer_user_id
        """,
        user_id,
        folder_id,
    )
    return [r["peer_user_id"] for r in rows]


async def set_pinned_order_txn(
    conn: asyncpg.Connection, user_id: int, folder_id: int, order: Sequence[int]
) -> None:
    """Pin exactly ``order`` (top first) in the folder and unpin the folder's others."""
    await conn.execute(
        """
        UPDATE dialogs d SET pinned_order = o.pos
          FROM unnest($3::bigint[]) WITH ORDINALITY AS o(peer, pos)
         WHERE d.user_id = $1 AND d.folder_id = $2 AND d.peer_user_id = o.peer
        """,
        user_id,
        folder_id,
        list(order),
    )
    await conn.execute(
        """
        UPDATE dialogs SET pinned_order = NULL
         WHERE user_id = $1 AND folder_id = $2 AND pinned_order IS NOT NULL
           AND NOT (peer_user_id = ANY($3::bigint[]))
        """,
        user_id,
        folder_id,
        list(order),
    )


async def peers_in_folder_txn(
    conn: asyncpg.Connection, user_id: int, folder_id: int, peers: Sequence[int]
) -> set[int]:
    """Those of ``peers`` with a dialog in the folder."""
    rows = await conn.fetch(
        """
        SELECT peer_user_id FROM dialogs
         WHERE user_id = $1 AND folder_id = $2 AND peer_user_id = ANY($3::bigint[])
        """,
        user_id,
        folder_id,
        list(peers),
    )
    return {r["peer_user_id"] for r in rows}


# -- unread marks ------------------------------------------------------------------------


async def set_unread_mark_txn(
    conn: asyncpg.Connection, user_id: int, peer_user_id: int, unread: bool
) -> bool | None:
    """Set the mark; the mark before (None: no such dialog)."""
    before = await conn.fetchval(
        "SELECT unread_mark FROM dialogs WHERE user_id = $1 AND peer_user_id = $2 FOR UPDATE",
        user_id,
        peer_user_id,
    )
    if before is not None and before != unread:
        await conn.execute(
            "UPDATE dialogs SET unread_mark = $3 WHERE user_id = $1 AND peer_user_id = $2",
            user_id,
            peer_user_id,
            unread,
        )
    return None if before is None else bool(before)


async def has_unread_mark(db: Executor, user_id: int, peer_user_id: int) -> bool:
    value = await db.fetchval(
        "SELECT unread_mark FROM dialogs WHERE user_id = $1 AND peer_user_id = $2",
        user_id,
        peer_user_id,
    )
    return bool(value)


async def unread_marks(db: Executor, user_id: int) -> list[int]:
    rows = await db.fetch(
        """
        SELECT peer_user_id FROM dialogs WHERE user_id = $1 AND unread_mark
         ORDER BY top_message_date DESC, peer_user_id DESC
        """,
        user_id,
    )
    return [r["peer_user_id"] for r in rows]


# -- archive -----------------------------------------------------------------------------


async def move_to_folder_txn(
    conn: asyncpg.Connection, user_id: int, peer_user_id: int, folder_id: int
) -> bool:
    """Whether the dialog moved (it exists and was in another folder). A moved dialog
    leaves its old folder's pins."""
    moved = await conn.fetchval(
        """
        UPDATE dialogs SET folder_id = $3, pinned_order = NULL
         WHERE user_id = $1 AND peer_user_id = $2 AND folder_id <> $3
        RETURNING true
        """,
        user_id,
        peer_user_id,
        folder_id,
    )
    return bool(moved)


async def write_folder_peers_txn(
    conn: asyncpg.Connection,
    user_id: int,
    pts: int,
    date: int,
    moves: Sequence[tuple[int, int]],
    exclude_auth_key_id: int | None,
    exclude_session_id: int | None,
) -> None:
    """The pts event of updateFolderPeers and its push."""
    await conn.execute(
        """
        SELECT telesrv_append_event(
               p_user_id => $1, p_pts => $2, p_pts_count => 1, p_event_type => 'folder_peers',
               p_date => $3, p_payload => $4,
               p_exclude_auth_key_id => $5, p_exclude_session_id => $6)
        """,
        user_id,
        pts,
        date,
        FolderPeers(list(moves)).to_json(),
        exclude_auth_key_id,
        exclude_session_id,
    )


async def archived_unmuted(db: Executor, user_id: int, peer_user_id: int, now: int) -> bool:
    """Whether the dialog is archived and not muted (a new message brings it back)."""
    value = await db.fetchval(
        """
        SELECT true FROM dialogs d
          LEFT JOIN notify_settings n ON n.user_id = d.user_id AND n.kind = 'peer'
                                     AND n.peer_user_id = d.peer_user_id
         WHERE d.user_id = $1 AND d.peer_user_id = $2 AND d.folder_id = 1
           AND COALESCE(n.mute_until, 0) <= $3
        """,
        user_id,
        peer_user_id,
        now,
    )
    return bool(value)
