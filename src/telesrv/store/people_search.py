"""contacts.search: users by a prefix of a word of their name, or of their username.

A pattern is matched case-insensitively (lower() on both sides) against the user's
full name "first last": at its start, or after a space (a later word). Usernames are
matched at their start only.
"""

from __future__ import annotations

from dataclasses import dataclass

from telesrv.store.db import Executor


def _escaped(text: str) -> str:
    """``text`` as the literal part of a LIKE pattern."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@dataclass(frozen=True, slots=True)
class Prefix:
    """What a query looks for: ``name`` at the start of a word of the full name,
    ``username`` (None: the query cannot be one) at the start of the username."""

    name: str
    username: str | None


def _patterns(prefix: Prefix) -> tuple[str, str, str | None]:
    name = _escaped(prefix.name)
    username = None if prefix.username is None else _escaped(prefix.username) + "%"
    return name + "%", "% " + name + "%", username


async def contacts_matching(db: Executor, owner: int, prefix: Prefix, limit: int) -> list[int]:
    """The owner's contacts matching by the name the owner saved, their own name or
    their username (one partition of contacts: the owner's)."""
    start, word, username = _patterns(prefix)
    rows = await db.fetch(
        """
        SELECT c.contact_user_id
          FROM contacts c
          JOIN users u ON u.user_id = c.contact_user_id
         WHERE c.owner_user_id = $1
           AND (lower(c.first_name || ' ' || c.last_name) LIKE lower($2)
                OR lower(c.first_name || ' ' || c.last_name) LIKE lower($3)
                OR lower(u.first_name || ' ' || u.last_name) LIKE lower($2)
                OR lower(u.first_name || ' ' || u.last_name) LIKE lower($3)
                OR lower(u.username) LIKE lower($4))
         ORDER BY c.contact_user_id
         LIMIT $5
        """,
        owner,
        start,
        word,
        username,
        limit,
    )
    return [r["contact_user_id"] for r in rows]


_OTHERS = """
        WITH by_username AS (
            SELECT u.user_id FROM users u
             WHERE $4::text IS NOT NULL AND u.username IS NOT NULL
               AND lower(u.username) LIKE lower($4)
               AND u.user_id <> $1
               AND NOT EXISTS (SELECT 1 FROM contacts c
                                WHERE c.owner_user_id = $1 AND c.contact_user_id = u.user_id)
               AND NOT EXISTS (SELECT 1 FROM contact_blocks b
                                WHERE b.owner_user_id = u.user_id AND b.blocked_user_id = $1)
             ORDER BY lower(u.username)
             LIMIT $5
        ), by_name AS (
            SELECT u.user_id FROM users u
             WHERE (lower(u.first_name || ' ' || u.last_name) LIKE lower($2)
                    OR lower(u.first_name || ' ' || u.last_name) LIKE lower($3))
               AND u.user_id <> $1
               AND NOT EXISTS (SELECT 1 FROM contacts c
                                WHERE c.owner_user_id = $1 AND c.contact_user_id = u.user_id)
               AND (u.username IS NOT NULL
                    OR EXISTS (SELECT 1 FROM dialogs d
                                WHERE d.user_id = $1 AND d.peer_user_id = u.user_id))
               AND NOT EXISTS (SELECT 1 FROM contact_blocks b
                                WHERE b.owner_user_id = u.user_id AND b.blocked_user_id = $1)
             LIMIT $5
        )
        SELECT user_id FROM (
            SELECT user_id, 0 AS rank FROM by_username
            UNION ALL
            SELECT user_id, 1 AS rank FROM by_name
        ) found
         GROUP BY user_id
         ORDER BY min(rank), user_id
         LIMIT $5
        """

# On Citus: the viewer's contacts and chats (the viewer's shard) and who blocked the
# viewer (every shard, by the blocked user) are read first, in subqueries of their own;
# the search over users (a reference table) then tests the candidates against those.
_OTHERS_DISTRIBUTED = """
        WITH mine AS MATERIALIZED (
            SELECT contact_user_id FROM contacts WHERE owner_user_id = $1
        ), chats AS MATERIALIZED (
            SELECT peer_user_id FROM dialogs WHERE user_id = $1
        ), blockers AS MATERIALIZED (
            SELECT owner_user_id FROM contact_blocks WHERE blocked_user_id = $1
        ), """ + _OTHERS.replace("WITH by_username AS (", "by_username AS (", 1).replace(
    """SELECT 1 FROM contacts c
                                WHERE c.owner_user_id = $1 AND c.contact_user_id = u.user_id""",
    "SELECT 1 FROM mine c WHERE c.contact_user_id = u.user_id",
).replace(
    """SELECT 1 FROM contact_blocks b
                                WHERE b.owner_user_id = u.user_id AND b.blocked_user_id = $1""",
    "SELECT 1 FROM blockers b WHERE b.owner_user_id = u.user_id",
).replace(
    """SELECT 1 FROM dialogs d
                                WHERE d.user_id = $1 AND d.peer_user_id = u.user_id""",
    "SELECT 1 FROM chats d WHERE d.peer_user_id = u.user_id",
)


async def others_matching(
    db: Executor, viewer: int, prefix: Prefix, limit: int, *, distributed: bool = False
) -> list[int]:
    """Users other than the viewer and the viewer's contacts matching by their own name
    or username, username matches first. Each branch is served by its trigram index
    (users_username_trigrams, users_name_trigrams) and stops at ``limit``. A stranger
    is found by name only once findable at all: with a public username, or in a chat
    with the viewer (so names alone cannot list everyone); nobody who blocked the
    viewer is found. ``distributed``: the shape for Citus (_OTHERS_DISTRIBUTED)."""
    start, word, username = _patterns(prefix)
    rows = await db.fetch(
        _OTHERS_DISTRIBUTED if distributed else _OTHERS,
        viewer,
        start,
        word,
        username,
        limit,
    )
    return [r["user_id"] for r in rows]
