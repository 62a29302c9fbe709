"""SQL for privacy rules (one jsonb list per user and key) and for the audience of a
user's status and profile pushes."""

from __future__ import annotations

from typing import Any

from telesrv.store.db import Executor


async def get_rules(db: Executor, user_id: int, key: str) -> list[dict[str, Any]] | None:
    """The rules the user chose for the key, in order; None: never chose."""
    rules: list[dict[str, Any]] | None = await db.fetchval(
        "SELECT rules FROM privacy_rules WHERE user_id = $1 AND key = $2", user_id, key
    )
    return rules


async def set_rules(db: Executor, user_id: int, key: str, rules: list[dict[str, Any]]) -> None:
    await db.execute(
        """
        INSERT INTO privacy_rules (user_id, key, rules) VALUES ($1, $2, $3)
        ON CONFLICT (user_id, key) DO UPDATE SET rules = EXCLUDED.rules
        """,
        user_id,
        key,
        rules,
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
