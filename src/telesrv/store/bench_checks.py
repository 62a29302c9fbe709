"""Checks the send benchmark runs on what it wrote: counts over the messages and the
update log of the accounts it made (their ids from ``first_user`` on)."""

from __future__ import annotations

from telesrv.store.db import Executor


async def count_messages_sent_by(db: Executor, first_user: int) -> int:
    """Messages whose sender id is >= first_user."""
    return int(
        await db.fetchval(
            "SELECT count(*) FROM private_messages WHERE sender_user_id >= $1", first_user
        )
    )


async def count_duplicate_sends(db: Executor, first_user: int) -> int:
    """Messages stored more than once for one (sender, random_id): must be 0."""
    return int(
        await db.fetchval(
            """
            SELECT count(*) - count(DISTINCT (sender_user_id, random_id))
              FROM private_messages WHERE sender_user_id >= $1
            """,
            first_user,
        )
    )


async def count_users_with_pts_holes(db: Executor, first_user: int) -> int:
    """Accounts whose log does not cover 1..max(pts) exactly: must be 0."""
    return int(
        await db.fetchval(
            """
            SELECT count(*) FROM (
                SELECT user_id FROM user_update_events WHERE user_id >= $1
                 GROUP BY user_id HAVING max(pts) <> sum(pts_count)
            ) t
            """,
            first_user,
        )
    )
