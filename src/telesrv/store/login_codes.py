"""SQL for login codes (auth.sendCode / auth.signIn / auth.signUp).

Functions ending in `_txn` must run inside a transaction (`Db.run_txn`); the others
are single statements and take a pool or a connection.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from telesrv.store.db import Executor

SWEEP_BATCH = 100


class CodeCheck(enum.Enum):
    OK = "ok"
    WRONG = "wrong"  # counted as a failed attempt
    EXPIRED = "expired"  # unknown hash, expired, used up, or too many wrong attempts


@dataclass(frozen=True)
class IssueResult:
    issued: bool
    # When not issued: seconds until the phone may ask again.
    retry_after: float = 0.0


@dataclass(frozen=True)
class PendingCode:
    phone: str
    code: str
    phone_code_hash: str
    created_at: datetime
    expires_at: datetime
    attempts: int


async def issue_code_txn(
    conn: asyncpg.Connection,
    *,
    phone: str,
    phone_code_hash: str,
    code: str,
    now: datetime,
    ttl: timedelta,
    window: timedelta,
    max_per_window: int,
) -> IssueResult:
    """Store a new code unless `phone` had `max_per_window` codes within `window`
    (0: no limit)."""
    # Serialize the phone's issuers so that two concurrent requests cannot both pass
    # the count below.
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('telesrv login code ' || $1, 0))", phone
    )
    window_start = now - window
    await conn.execute(
        "DELETE FROM login_codes WHERE phone = $1 AND created_at < $2 AND expires_at < $3",
        phone,
        window_start,
        now,
    )
    # Also sweep a few long-dead codes of phones that never came back.
    await conn.execute(
        """
        DELETE FROM login_codes
         WHERE phone_code_hash IN (SELECT phone_code_hash FROM login_codes
                                    WHERE expires_at < $1 LIMIT $2)
        """,
        window_start,
        SWEEP_BATCH,
    )
    # A code counts until exactly `window` after it was sent: retry_after then holds.
    recent = await conn.fetchrow(
        """
        SELECT count(*) AS n, min(created_at) AS oldest
          FROM login_codes
         WHERE phone = $1 AND created_at > $2
        """,
        phone,
        window_start,
    )
    assert recent is not None
    if max_per_window and recent["n"] >= max_per_window:
        wait = (recent["oldest"] + window - now).total_seconds()
        return IssueResult(issued=False, retry_after=max(wait, 1.0))
    await conn.execute(
        """
        INSERT INTO login_codes (phone_code_hash, phone, code, created_at, expires_at)
        VALUES ($1, $2, $3, $4, $5)
        """,
        phone_code_hash,
        phone,
        code,
        now,
        now + ttl,
    )
    return IssueResult(issued=True)


async def check_code_txn(
    conn: asyncpg.Connection,
    *,
    phone: str,
    phone_code_hash: str,
    code: str,
    now: datetime,
    max_attempts: int,
) -> CodeCheck:
    """auth.signIn's code check. A wrong code counts an attempt; a right one verifies."""
    row = await conn.fetchrow(
        """
        SELECT code, expires_at, attempts, consumed
          FROM login_codes
         WHERE phone_code_hash = $1 AND phone = $2
           FOR UPDATE
        """,
        phone_code_hash,
        phone,
    )
    if row is None or row["consumed"] or row["expires_at"] <= now:
        return CodeCheck.EXPIRED
    if row["attempts"] >= max_attempts:
        return CodeCheck.EXPIRED
    if row["code"] != code:
        await conn.execute(
            "UPDATE login_codes SET attempts = attempts + 1 WHERE phone_code_hash = $1",
            phone_code_hash,
        )
        return CodeCheck.WRONG
    await conn.execute(
        "UPDATE login_codes SET verified = true WHERE phone_code_hash = $1", phone_code_hash
    )
    return CodeCheck.OK


async def consume_code(db: Executor, phone_code_hash: str) -> None:
    await db.execute(
        "UPDATE login_codes SET consumed = true WHERE phone_code_hash = $1", phone_code_hash
    )


async def consume_verified_code(
    db: Executor, *, phone: str, phone_code_hash: str, now: datetime
) -> bool:
    """auth.signUp: use up a code auth.signIn verified. False when there is none."""
    used = await db.fetchval(
        """
        UPDATE login_codes SET consumed = true
         WHERE phone_code_hash = $1 AND phone = $2
           AND verified AND NOT consumed AND expires_at > $3
        RETURNING 1
        """,
        phone_code_hash,
        phone,
        now,
    )
    return used is not None


async def cancel_code(db: Executor, *, phone: str, phone_code_hash: str) -> bool:
    cancelled = await db.fetchval(
        """
        UPDATE login_codes SET consumed = true
         WHERE phone_code_hash = $1 AND phone = $2 AND NOT consumed
        RETURNING 1
        """,
        phone_code_hash,
        phone,
    )
    return cancelled is not None


async def pending_codes(
    db: Executor, phone: str, now: datetime, *, max_attempts: int
) -> list[PendingCode]:
    """Codes of `phone` that can still log in, newest first."""
    records = await db.fetch(
        """
        SELECT phone, code, phone_code_hash, created_at, expires_at, attempts
          FROM login_codes
         WHERE phone = $1 AND NOT consumed AND expires_at > $2 AND attempts < $3
         ORDER BY created_at DESC
        """,
        phone,
        now,
        max_attempts,
    )
    return [
        PendingCode(
            phone=r["phone"],
            code=r["code"],
            phone_code_hash=r["phone_code_hash"],
            created_at=r["created_at"],
            expires_at=r["expires_at"],
            attempts=r["attempts"],
        )
        for r in records
    ]
