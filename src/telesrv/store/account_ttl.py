"""The days of inactivity after which an account is deleted, as its owner chose them."""

from __future__ import annotations

from telesrv.store.db import Executor


async def get_days(db: Executor, user_id: int) -> int | None:
    """The days the user chose; None: never chose."""
    days: int | None = await db.fetchval("SELECT days FROM account_ttl WHERE user_id = $1", user_id)
    return days


async def set_days(db: Executor, user_id: int, days: int) -> None:
    await db.execute(
        """
        INSERT INTO account_ttl (user_id, days) VALUES ($1, $2)
        ON CONFLICT (user_id) DO UPDATE SET days = EXCLUDED.days
        """,
        user_id,
        days,
    )
