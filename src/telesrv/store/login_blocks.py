"""Phones barred from signing in by the operator."""

from __future__ import annotations

from datetime import datetime

from telesrv.store.db import Executor


async def block(db: Executor, phone: str) -> bool:
    """True when the phone was not blocked before."""
    status: str = await db.execute(
        "INSERT INTO login_blocks (phone) VALUES ($1) ON CONFLICT (phone) DO NOTHING", phone
    )
    return status.endswith(" 1")


async def unblock(db: Executor, phone: str) -> bool:
    """True when the phone was blocked."""
    status: str = await db.execute("DELETE FROM login_blocks WHERE phone = $1", phone)
    return status.endswith(" 1")


async def is_blocked(db: Executor, phone: str) -> bool:
    return bool(
        await db.fetchval("SELECT EXISTS (SELECT 1 FROM login_blocks WHERE phone = $1)", phone)
    )


async def list_all(db: Executor) -> list[tuple[str, datetime]]:
    rows = await db.fetch("SELECT phone, blocked_at FROM login_blocks ORDER BY phone")
    return [(r["phone"], r["blocked_at"]) for r in rows]
