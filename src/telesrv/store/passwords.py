"""SQL for two-step verification: each account's password (salts and SRP verifier) and
the keys waiting for the password before they are signed in.

Functions ending in `_txn` must run inside a transaction (`Db.run_txn`); the others
are single statements and take a pool or a connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from telesrv.store.db import Executor
from telesrv.store.rows import from_row


@dataclass(frozen=True, slots=True)
class PasswordRow:
    user_id: int
    salt1: bytes
    salt2: bytes
    # The SRP verifier: never logged, never returned to a client.
    verifier: bytes
    hint: str
    updated_at: datetime
    reset_at: datetime | None

    def __repr__(self) -> str:  # keeps the verifier out of tracebacks and logs
        return f"PasswordRow(user_id={self.user_id}, hint={self.hint!r})"


_COLUMNS = "user_id, salt1, salt2, verifier, hint, updated_at, reset_at"


async def get_password(db: Executor, user_id: int) -> PasswordRow | None:
    row = await db.fetchrow(f"SELECT {_COLUMNS} FROM account_passwords WHERE user_id = $1", user_id)
    return None if row is None else from_row(PasswordRow, row)


async def has_password(db: Executor, user_id: int) -> bool:
    found = await db.fetchval("SELECT 1 FROM account_passwords WHERE user_id = $1", user_id)
    return found is not None


async def has_password_locked_txn(conn: asyncpg.Connection, user_id: int) -> bool:
    """Whether the account has a password, holding it until the transaction ends: a
    removal of the password waits, and then sees the wait this transaction writes."""
    found = await conn.fetchval(
        "SELECT 1 FROM account_passwords WHERE user_id = $1 FOR KEY SHARE", user_id
    )
    return found is not None


async def set_password(
    db: Executor,
    user_id: int,
    salt1: bytes,
    salt2: bytes,
    verifier: bytes,
    hint: str,
    now: datetime,
    *,
    replaces: PasswordRow | None,
) -> bool:
    """Set the password if the current one is still the one the caller proved:
    ``replaces`` is it as read (None: the account had none). Whether it was set. A reset
    asked for the old password goes with it."""
    if replaces is None:
        done = await db.fetchval(
            """
            INSERT INTO account_passwords (user_id, salt1, salt2, verifier, hint, updated_at)
            VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (user_id) DO NOTHING
            RETURNING 1
            """,
            user_id,
            salt1,
            salt2,
            verifier,
            hint,
            now,
        )
    else:
        done = await db.fetchval(
            """
            UPDATE account_passwords
               SET salt1 = $2, salt2 = $3, verifier = $4, hint = $5, updated_at = $6,
                   reset_at = NULL
             WHERE user_id = $1 AND salt1 = $7 AND salt2 = $8 AND verifier = $9
            RETURNING 1
            """,
            user_id,
            salt1,
            salt2,
            verifier,
            hint,
            now,
            replaces.salt1,
            replaces.salt2,
            replaces.verifier,
        )
    return done is not None


async def delete_password(db: Executor, replaces: PasswordRow) -> bool:
    """Remove the password if it is still ``replaces`` (salts and verifier alike);
    whether it was removed."""
    gone = await db.fetchval(
        """
        DELETE FROM account_passwords
         WHERE user_id = $1 AND salt1 = $2 AND salt2 = $3 AND verifier = $4
        RETURNING 1
        """,
        replaces.user_id,
        replaces.salt1,
        replaces.salt2,
        replaces.verifier,
    )
    return gone is not None


async def remove_any_password(db: Executor, user_id: int) -> bool:
    """The operator removes the account's password, whichever it is; whether it had one."""
    gone = await db.fetchval(
        "DELETE FROM account_passwords WHERE user_id = $1 RETURNING 1", user_id
    )
    return gone is not None


async def request_reset(db: Executor, user_id: int, reset_at: datetime) -> datetime | None:
    """Mark the password for reset at ``reset_at`` unless a reset is already asked;
    returns the time of the reset in force (None: the account has no password)."""
    value: datetime | None = await db.fetchval(
        """
        UPDATE account_passwords SET reset_at = COALESCE(reset_at, $2)
         WHERE user_id = $1
        RETURNING reset_at
        """,
        user_id,
        reset_at,
    )
    return value


async def decline_reset(db: Executor, user_id: int) -> bool:
    """Cancel an asked reset; whether one was asked."""
    done = await db.fetchval(
        """
        UPDATE account_passwords SET reset_at = NULL
         WHERE user_id = $1 AND reset_at IS NOT NULL
        RETURNING 1
        """,
        user_id,
    )
    return done is not None


async def delete_if_reset_due(db: Executor, user_id: int, now: datetime) -> bool:
    """Remove the password if its asked reset is due; whether it was removed."""
    gone = await db.fetchval(
        """
        DELETE FROM account_passwords
         WHERE user_id = $1 AND reset_at IS NOT NULL AND reset_at <= $2
        RETURNING 1
        """,
        user_id,
        now,
    )
    return gone is not None


# -- keys waiting for the password ----------------------------------------------------


async def put_login_txn(
    conn: asyncpg.Connection, auth_key_id: int, user_id: int, expires_at: datetime
) -> None:
    """The key proved the login code of ``user_id``; it waits for the password."""
    await conn.execute(
        """
        INSERT INTO password_logins (auth_key_id, user_id, expires_at) VALUES ($1, $2, $3)
        ON CONFLICT (auth_key_id) DO UPDATE
           SET user_id = EXCLUDED.user_id, expires_at = EXCLUDED.expires_at
        """,
        auth_key_id,
        user_id,
        expires_at,
    )


async def login_user(db: Executor, auth_key_id: int, now: datetime) -> int | None:
    """The account whose password the key still has to give (None: none, or expired)."""
    user_id = await db.fetchval(
        "SELECT user_id FROM password_logins WHERE auth_key_id = $1 AND expires_at > $2",
        auth_key_id,
        now,
    )
    return None if user_id is None else int(user_id)


async def take_login_txn(
    conn: asyncpg.Connection, auth_key_id: int, user_id: int, now: datetime
) -> bool:
    """End the key's wait for ``user_id``'s password (it was given); whether it was
    still waiting for that account."""
    taken = await conn.fetchval(
        """
        DELETE FROM password_logins
         WHERE auth_key_id = $1 AND user_id = $2 AND expires_at > $3
        RETURNING 1
        """,
        auth_key_id,
        user_id,
        now,
    )
    return taken is not None


async def drop_logins_of_user_txn(conn: asyncpg.Connection, user_id: int) -> list[int]:
    """The account's password went away: its waiting keys stop waiting (they sign in
    again with a new code). Run after the password's removal in the same transaction:
    a sign-in that saw the password holds it (``has_password_locked_txn``), so the
    removal waited for that sign-in's wait to commit and this statement sees it.
    Returns the keys that waited."""
    rows = await conn.fetch(
        "DELETE FROM password_logins WHERE user_id = $1 RETURNING auth_key_id", user_id
    )
    return [int(row["auth_key_id"]) for row in rows]


async def drop_login(db: Executor, auth_key_id: int) -> bool:
    """The key stops waiting (it logged out or signed in otherwise); whether it waited."""
    gone = await db.fetchval(
        "DELETE FROM password_logins WHERE auth_key_id = $1 RETURNING 1", auth_key_id
    )
    return gone is not None
