"""SQL for privacy rules (one jsonb list per user and key, with its kinds in order and
the users its lists name as rows of their own, for the projection) and for the
audience of a user's status and profile pushes."""

from __future__ import annotations

from typing import Any

from telesrv.store.db import Executor


async def get_rules(db: Executor, user_id: int, key: str) -> list[dict[str, Any]] | None:
    """The rules the user chose for the key, in order; None: never chose."""
    rules: list[dict[str, Any]] | None = await db.fetchval(
        "SELECT rules FROM privacy_rules WHERE user_id = $1 AND key = $2", user_id, key
    )
    return rules


async def set_rules_txn(
    conn: Executor, user_id: int, key: str, rules: list[dict[str, Any]]
) -> None:
    """Replace the key's list: the list itself, its kinds in order, and the users its
    lists name (with the place of the first rule naming each)."""
    kinds = [str(r["rule"]) for r in rules]
    first: dict[int, int] = {}
    for n, rule in enumerate(rules, start=1):
        for member in rule.get("users", ()):
            first.setdefault(int(member), n)
    await conn.execute(
        """
        INSERT INTO privacy_rules (user_id, key, rules, kinds) VALUES ($1, $2, $3, $4)
        ON CONFLICT (user_id, key) DO UPDATE SET rules = EXCLUDED.rules, kinds = EXCLUDED.kinds
        """,
        user_id,
        key,
        rules,
        kinds,
    )
    await conn.execute(
        "DELETE FROM privacy_rule_members WHERE user_id = $1 AND key = $2", user_id, key
    )
    if first:
        await conn.execute(
            """
            INSERT INTO privacy_rule_members (user_id, key, member, n)
            SELECT $1, $2, m, n FROM unnest($3::bigint[], $4::integer[]) AS t(m, n)
            """,
            user_id,
            key,
            list(first),
            list(first.values()),
        )


async def profile_audience(db: Executor, user_id: int, limit: int) -> list[int]:
    """Users who have ``user_id`` in their contacts or who share a chat with them (a
    private chat shows in both sides' lists, so the user's own dialogs name them), the
    user excluded, at most ``limit``, in ascending id order."""
    records = await db.fetch(
        """
        SELECT owner_user_id AS viewer FROM contacts
         WHERE contact_user_id = $1 AND owner_user_id <> $1
        UNION
        SELECT peer_user_id FROM dialogs WHERE user_id = $1 AND peer_user_id <> $1
        ORDER BY viewer
        LIMIT $2
        """,
        user_id,
        limit,
    )
    return [r["viewer"] for r in records]
