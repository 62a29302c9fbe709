"""Two-step verification: an account's password, checked by SRP, and sign-ins that wait
for it.

The server stores the salts and the verifier the client made (``srp.py``), never the
password. Every check is one exchange: account.getPassword opens it (the server's
secret waits in Redis for one use, bound to the key and the account, for
``srp_ttl`` seconds) and the check that names its srp_id closes it, right or wrong.
Attempts are counted per key and per account before anything is checked.

A login code for an account with a password does not sign the key in: the key waits
(``password_logins``) until auth.checkPassword proves the password. Until then the
dispatcher answers its other calls SESSION_PASSWORD_NEEDED (``is_waiting``). Such keys
are marked in Redis too (``mark_waiting``), so that keys not signed in at all, the
common case, are answered without a query. When the password goes away (removed,
reset, or by the operator) the keys waiting for it stop waiting: they sign in again
with a new code, and then no password is asked. Signing them in instead would let a
login code alone, perhaps an intercepted one, in whenever the owner drops the password.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NoReturn

import asyncpg

from telesrv.services import srp
from telesrv.services.accounts import AuthorizationService, to_datetime
from telesrv.services.errors import (
    EmailNotAllowed,
    FloodWait,
    NewSaltInvalid,
    NewSettingsEmpty,
    NewSettingsInvalid,
    PasswordEmpty,
    PasswordHashInvalid,
    PasswordRecoveryNa,
    ResetRequestMissing,
    SrpIdInvalid,
    SrpPasswordChanged,
)
from telesrv.store import passwords as passwords_store
from telesrv.store.db import Db
from telesrv.store.srp_sessions import Exchange, SrpSessions

log = logging.getLogger(__name__)

NEW_SALT1_BYTES = 8  # the server's part of a new salt1; the client appends its own
NEW_SALT2_BYTES = 16
SECURE_SALT_BYTES = 8
SECURE_RANDOM_BYTES = 32
MAX_SALT_BYTES = 64  # of a salt a client sends back (Telegram's clients make 40 and 16)
MAX_SRP_DRAWS = 16  # a b whose g^b clients refuse is rare (about 2^-63); never loop forever


@dataclass(frozen=True)
class PasswordPolicy:
    srp_ttl: float = 600.0  # seconds an exchange of account.getPassword can be used
    login_ttl: float = 3600.0  # seconds a key that gave the login code waits for the password
    key_attempts: int = 5  # password checks per key per key_window (0: no limit)
    key_window: float = 60.0
    account_attempts: int = 20  # password checks per account per account_window
    account_window: float = 3600.0
    max_hint: int = 128  # code points of a hint
    reset_delay: float = 7 * 86400.0  # account.resetPassword goes through after this
    new_salt_ttl: int = 86400  # seconds the server's new-salt prefix stays the same
    state_calls: int = 30  # account.getPassword calls per key per state_window (0: no limit)
    state_window: float = 60.0


@dataclass(frozen=True, slots=True)
class SrpCheck:
    """inputCheckPasswordSRP: which exchange, and the client's A and M1."""

    srp_id: int
    a: bytes
    m1: bytes


@dataclass(frozen=True, slots=True)
class NewPassword:
    """A new password as the client made it: salts in the group of ``srp``, and v."""

    salt1: bytes
    salt2: bytes
    g: int
    p: bytes
    verifier: bytes
    hint: str

    def __repr__(self) -> str:  # keeps the verifier out of tracebacks and logs
        return f"NewPassword(hint={self.hint!r})"


@dataclass(frozen=True, slots=True)
class RemovePassword:
    """New settings that turn the password off."""


@dataclass(frozen=True, slots=True)
class PasswordState:
    """What account.getPassword answers: the current password's exchange (when there is
    one) and what a client needs to make a new one."""

    has_password: bool
    salt1: bytes
    salt2: bytes
    srp_b: bytes
    srp_id: int
    hint: str
    new_salt1: bytes
    new_salt2: bytes
    new_secure_salt: bytes
    secure_random: bytes
    pending_reset_date: int | None


@dataclass(frozen=True, slots=True)
class ResetRequested:
    """account.resetPassword: the reset goes through at ``until`` unless declined."""

    until: int


@dataclass(frozen=True, slots=True)
class ResetDone:
    """account.resetPassword after the wait: the password is gone."""


def _password_digest(row: passwords_store.PasswordRow) -> bytes:
    # Which password an exchange was made for. The verifier is in it (hashed, so Redis
    # never holds it): a client may well send the salts of the password before.
    # Lengths first, so that no two (salt1, salt2) pairs run together the same way.
    h = hashlib.sha256()
    for part in (row.salt1, row.salt2, hashlib.sha256(row.verifier).digest()):
        h.update(len(part).to_bytes(4, "big"))
        h.update(part)
    return h.digest()[:16]


class Passwords:
    def __init__(
        self,
        db: Db,
        sessions: SrpSessions,
        authorizations: AuthorizationService,
        policy: PasswordPolicy | None = None,
        random_bytes: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self._db = db
        self._sessions = sessions
        self._authorizations = authorizations
        self.policy = policy or PasswordPolicy()
        self._random_bytes = random_bytes

    # -- the account's password ------------------------------------------------------

    async def state(self, user_id: int, perm_auth_key_id: int, now: float) -> PasswordState:
        """account.getPassword: the key's exchange when there is a password. The key's
        open one is offered again while it has at least half its time left; else a new
        one replaces it. Calls are counted per key (FloodWait past the limit)."""
        policy = self.policy
        if policy.state_calls > 0:
            wait = await self._sessions.state_rate_wait(
                perm_auth_key_id, policy.state_calls, policy.state_window
            )
            if wait:
                raise FloodWait(wait)
        row = await passwords_store.get_password(self._db.pool, user_id)
        prefix = await self._sessions.new_salt_prefix(
            user_id, self._random_bytes(NEW_SALT1_BYTES), self.policy.new_salt_ttl
        )
        new_salt2 = self._random_bytes(NEW_SALT2_BYTES)
        new_secure_salt = self._random_bytes(SECURE_SALT_BYTES)
        secure_random = self._random_bytes(SECURE_RANDOM_BYTES)
        if row is None:
            return PasswordState(
                has_password=False,
                salt1=b"",
                salt2=b"",
                srp_b=b"",
                srp_id=0,
                hint="",
                new_salt1=prefix,
                new_salt2=new_salt2,
                new_secure_salt=new_secure_salt,
                secure_random=secure_random,
                pending_reset_date=None,
            )
        exchange = await self._exchange(row, perm_auth_key_id, now)
        return PasswordState(
            has_password=True,
            salt1=row.salt1,
            salt2=row.salt2,
            srp_b=exchange.big_b,
            srp_id=exchange.srp_id,
            hint=row.hint,
            new_salt1=prefix,
            new_salt2=new_salt2,
            new_secure_salt=new_secure_salt,
            secure_random=secure_random,
            pending_reset_date=None if row.reset_at is None else int(row.reset_at.timestamp()),
        )

    async def update(
        self,
        user_id: int,
        perm_auth_key_id: int,
        check: SrpCheck | None,
        new: NewPassword | RemovePassword | None,
        email: str | None,
        now: float,
    ) -> None:
        """account.updatePasswordSettings: set, change or remove the password (``new``;
        None changes nothing). The current password, if any, must be proved first."""
        if email:
            raise EmailNotAllowed()
        if isinstance(new, NewPassword):
            await self._validate(user_id, new)
        row = await passwords_store.get_password(self._db.pool, user_id)
        if row is None:
            if check is not None:
                raise PasswordEmpty()
            if isinstance(new, RemovePassword):
                raise NewSettingsEmpty()
        else:
            await self._prove(row, perm_auth_key_id, check, now)
        # Written only over the password just proved (or over none): a change another
        # device made meanwhile is not overwritten unseen (compared on salts and
        # verifier: a new password may come with the old salts).
        if isinstance(new, NewPassword):
            done = await passwords_store.set_password(
                self._db.pool,
                user_id,
                new.salt1,
                new.salt2,
                new.verifier,
                new.hint,
                to_datetime(now),
                replaces=row,
            )
        elif isinstance(new, RemovePassword) and row is not None:
            done = await self._remove(row, "password_remove")
        else:
            done = True
        if not done:
            raise SrpPasswordChanged()

    async def verify(
        self, user_id: int, perm_auth_key_id: int, check: SrpCheck | None, now: float
    ) -> None:
        """account.getPasswordSettings and the like: the caller proves the password."""
        row = await passwords_store.get_password(self._db.pool, user_id)
        if row is None:
            raise PasswordEmpty()
        await self._prove(row, perm_auth_key_id, check, now)

    async def has_password(self, user_id: int) -> bool:
        return await passwords_store.has_password(self._db.pool, user_id)

    async def recovery(self, user_id: int) -> NoReturn:
        """auth.requestPasswordRecovery: recovery goes by e-mail, and no account has one
        here."""
        if not await passwords_store.has_password(self._db.pool, user_id):
            raise PasswordEmpty()
        raise PasswordRecoveryNa()

    async def reset(self, user_id: int, now: float) -> ResetRequested | ResetDone:
        """account.resetPassword: the first call asks for a reset after the delay, a call
        once it is due removes the password."""
        row = await passwords_store.get_password(self._db.pool, user_id)
        if row is None:
            raise PasswordEmpty()
        if row.reset_at is not None and row.reset_at <= to_datetime(now):
            if await self._remove(row, "password_reset", due=to_datetime(now)):
                # Nothing tells the account's other sessions; this line is the record.
                log.warning("password of user %d removed by its reset", user_id)
                return ResetDone()
        until = await passwords_store.request_reset(
            self._db.pool, user_id, to_datetime(now + self.policy.reset_delay)
        )
        if until is None:  # removed meanwhile
            raise PasswordEmpty()
        if row.reset_at is None:
            log.warning(
                "password reset of user %d asked, goes through at %s",
                user_id,
                until.isoformat(),
            )
        return ResetRequested(int(until.timestamp()))

    async def decline_reset(self, user_id: int) -> None:
        if not await passwords_store.decline_reset(self._db.pool, user_id):
            raise ResetRequestMissing()

    # -- sign-ins that wait for the password --------------------------------------------

    async def is_waiting(self, perm_auth_key_id: int, now: float) -> bool:
        """Whether the key gave a login code and now owes the account's password."""
        return await self.waiting_user(perm_auth_key_id, now) is not None

    async def waiting_user(self, perm_auth_key_id: int, now: float) -> int | None:
        """The account whose password the key owes. Asked by any key not signed in, so
        only keys marked as waiting cost a query."""
        if not await self._sessions.is_marked_waiting(perm_auth_key_id):
            return None
        user_id = await passwords_store.login_user(
            self._db.pool, perm_auth_key_id, to_datetime(now)
        )
        if user_id is None:  # its wait ended otherwise: the next call costs nothing
            await self._sessions.unmark_waiting([perm_auth_key_id])
        return user_id

    async def mark_waiting(self, perm_auth_key_id: int) -> None:
        """A sign-in just made the key wait for the password (after its commit)."""
        await self._sessions.mark_waiting(perm_auth_key_id, math.ceil(self.policy.login_ttl))

    async def complete_login(
        self, perm_auth_key_id: int, check: SrpCheck | None, now: float
    ) -> int | None:
        """auth.checkPassword: the waiting key proves the password and is signed in;
        returns the account (None: the key waits for no password)."""
        user_id = await self.waiting_user(perm_auth_key_id, now)
        if user_id is None:
            return None
        row = await passwords_store.get_password(self._db.pool, user_id)
        if row is None:
            # The password went away after the wait began (its removal ends the
            # waits, this covers any path that does not): the key signs in anew.
            await self.cancel_login(perm_auth_key_id)
            return None
        await self._prove(row, perm_auth_key_id, check, now)

        async def txn(conn: asyncpg.Connection) -> bool:
            if not await passwords_store.take_login_txn(
                conn, perm_auth_key_id, user_id, to_datetime(now)
            ):
                return False  # it expired or was cancelled meanwhile
            await AuthorizationService.bind_txn(conn, perm_auth_key_id, user_id, now)
            return True

        taken = await self._db.run_txn("password_login", txn)
        await self._sessions.unmark_waiting([perm_auth_key_id])
        if not taken:
            return None
        self._authorizations.logged_in(perm_auth_key_id, user_id)
        return user_id

    async def cancel_login(self, perm_auth_key_id: int) -> bool:
        """auth.logOut of a waiting key: it stops waiting; whether it waited. Any key
        not signed in may ask: only a marked one costs a query."""
        await self._sessions.forget(perm_auth_key_id)
        if not await self._sessions.is_marked_waiting(perm_auth_key_id):
            return False
        waited = await passwords_store.drop_login(self._db.pool, perm_auth_key_id)
        await self._sessions.unmark_waiting([perm_auth_key_id])
        return waited

    # -- inside -------------------------------------------------------------------------

    async def _validate(self, user_id: int, new: NewPassword) -> None:
        if new.g != srp.G or new.p != srp.P_BYTES:
            raise NewSettingsInvalid()
        if not srp.valid_verifier(new.verifier):
            raise NewSettingsInvalid()
        if len(new.hint) > self.policy.max_hint:
            raise NewSettingsInvalid()
        if not 0 < len(new.salt2) <= MAX_SALT_BYTES or len(new.salt1) > MAX_SALT_BYTES:
            raise NewSaltInvalid()
        prefix = await self._sessions.current_salt_prefix(user_id)
        # The client must extend the server's part: salts then differ across accounts
        # whatever the client draws.
        if prefix is None or len(new.salt1) <= len(prefix) or not new.salt1.startswith(prefix):
            raise NewSaltInvalid()

    async def _prove(
        self,
        row: passwords_store.PasswordRow,
        perm_auth_key_id: int,
        check: SrpCheck | None,
        now: float,
    ) -> None:
        if check is None:
            raise PasswordHashInvalid()
        policy = self.policy
        # Per key first: a key over its own limit must not use up the account's.
        wait = await self._sessions.key_rate_wait(
            perm_auth_key_id, policy.key_attempts, policy.key_window
        )
        if not wait:
            wait = await self._sessions.account_rate_wait(
                row.user_id, policy.account_attempts, policy.account_window
            )
        if wait:
            raise FloodWait(wait)
        exchange = await self._sessions.take(perm_auth_key_id, check.srp_id)
        if exchange is None or exchange.user_id != row.user_id or exchange.expires <= now:
            raise SrpIdInvalid()
        if exchange.password_digest != _password_digest(row):
            raise SrpPasswordChanged()
        if not srp.check(
            verifier=row.verifier,
            salt1=row.salt1,
            salt2=row.salt2,
            b=exchange.b,
            big_b=exchange.big_b,
            a=check.a,
            m1=check.m1,
        ):
            raise PasswordHashInvalid()

    async def _exchange(
        self, row: passwords_store.PasswordRow, perm_auth_key_id: int, now: float
    ) -> Exchange:
        """The key's exchange for the password ``row``: the open one while it has half
        its time left (a client takes a while to hash the password), else a new one."""
        digest = _password_digest(row)
        current = await self._sessions.current(perm_auth_key_id)
        if (
            current is not None
            and current.user_id == row.user_id
            and current.password_digest == digest
            and current.expires - now >= self.policy.srp_ttl / 2
        ):
            return current
        # About 6 ms of modular exponentiation: off the event loop.
        b, big_b = await asyncio.to_thread(self._draw_secret, row.verifier)
        exchange = Exchange(
            srp_id=self._new_srp_id(),
            user_id=row.user_id,
            b=b,
            big_b=big_b,
            password_digest=digest,
            expires=int(now + self.policy.srp_ttl),
        )
        await self._sessions.open(perm_auth_key_id, exchange, int(self.policy.srp_ttl) + 60)
        return exchange

    async def _remove(
        self, row: passwords_store.PasswordRow, name: str, *, due: datetime | None = None
    ) -> bool:
        """Remove the password ``row`` (``due``: only if its asked reset is due by
        then); the keys waiting for it stop waiting. Whether it was removed."""

        async def txn(conn: asyncpg.Connection) -> list[int] | None:
            if due is None:
                gone = await passwords_store.delete_password(conn, row)
            else:
                gone = await passwords_store.delete_if_reset_due(conn, row.user_id, due)
            if not gone:
                return None
            return await passwords_store.drop_logins_of_user_txn(conn, row.user_id)

        waited = await self._db.run_txn(name, txn)
        if waited is None:
            return False
        await self._sessions.unmark_waiting(waited)
        return True

    def _draw_secret(self, verifier: bytes) -> tuple[int, bytes]:
        for _ in range(MAX_SRP_DRAWS):
            b = int.from_bytes(self._random_bytes(srp.SIZE), "big")
            big_b = srp.server_public(verifier, b)
            if big_b is not None:
                return b, big_b
        raise RuntimeError("no usable SRP secret drawn")

    def _new_srp_id(self) -> int:
        while True:
            value = int.from_bytes(self._random_bytes(8), "little", signed=True)
            if value != 0:
                return value


async def wait_for_password_txn(
    conn: asyncpg.Connection, perm_auth_key_id: int, user_id: int, now: float, ttl: float
) -> bool:
    """Inside a login transaction, in place of binding the key: if the account has a
    password the key waits for it (and is not signed in). Whether it must wait."""
    if not await passwords_store.has_password_locked_txn(conn, user_id):
        return False
    await passwords_store.put_login_txn(
        conn, perm_auth_key_id, user_id, to_datetime(now) + timedelta(seconds=ttl)
    )
    return True
