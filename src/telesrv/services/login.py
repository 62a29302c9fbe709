"""Login: codes (auth.sendCode), sign-in and sign-up.

Codes live in PostgreSQL, so any server process (and `telesrv codes PHONE`) sees
them. Sending is rate limited per phone; each code allows a few wrong attempts and
then stops working. How a code reaches the person is a pluggable `CodeSender`: the
operator's hooks (services/code_delivery.py), or nothing but `telesrv codes PHONE`.
A code is a secret: it is written to the log only at DEBUG and only when asked for
(--log-login-codes).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

import asyncpg

from telesrv.services.accounts import AuthorizationService, SendCodeFlood, to_datetime
from telesrv.services.code_delivery import CodeDelivery
from telesrv.services.errors import (
    PhoneCodeEmpty,
    PhoneCodeExpired,
    PhoneCodeHashEmpty,
    PhoneCodeInvalid,
    PhoneNumberBanned,
    SessionPasswordNeeded,
)
from telesrv.services.passwords import PasswordPolicy, Passwords, wait_for_password_txn
from telesrv.services.users import clean_first_name, clean_last_name, normalize_phone
from telesrv.store import login_blocks
from telesrv.store import login_codes as codes_store
from telesrv.store import users as users_store
from telesrv.store.counters import Counters
from telesrv.store.db import Db
from telesrv.store.rate_limits import RateLimits

log = logging.getLogger(__name__)

CODE_LENGTH = 5


class CodeSender(Protocol):
    """Makes login codes and gets them to the person."""

    def new_code(self) -> str: ...

    async def send(self, phone: str, code: str) -> None: ...

    async def close(self) -> None: ...


class FixedCodeSender:
    """--dev-login-code: every code is the same value and nothing is sent."""

    def __init__(self, code: str) -> None:
        self.code = code

    def new_code(self) -> str:
        return self.code

    async def send(self, phone: str, code: str) -> None:
        log.debug("login code for +%s is the development code", phone)

    async def close(self) -> None:
        return None


class RandomCodeSender:
    """Random codes, handed to the delivery hooks (when any) and shown by
    `telesrv codes PHONE`; in the log only with ``log_codes`` and at DEBUG."""

    def __init__(self, delivery: CodeDelivery | None = None, *, log_codes: bool = False) -> None:
        self.delivery = delivery if delivery is not None and delivery.hooks else None
        self._log_codes = log_codes

    def new_code(self) -> str:
        return "".join(secrets.choice("0123456789") for _ in range(CODE_LENGTH))

    async def send(self, phone: str, code: str) -> None:
        if self._log_codes:
            log.debug("login code for +%s: %s", phone, code)
        if self.delivery is None:
            log.info("login code for +%s issued (no delivery hook; `telesrv codes`)", phone)
            return
        self.delivery.submit(f"+{phone}", code)

    async def close(self) -> None:
        if self.delivery is not None:
            await self.delivery.close()


@dataclass(frozen=True)
class LoginPolicy:
    code_ttl: float = 300.0  # seconds a code works
    max_attempts: int = 5  # wrong codes before a code stops working
    send_window: float = 600.0  # seconds over which sends per phone are counted
    max_sends: int = 5  # codes per phone per window; 0: no limit
    # Codes asked for from one client address per window, whatever the phones; 0: no
    # limit. auth.sendCode needs no login: this keeps one address from having codes sent
    # to many phones (each a text message the operator may pay for).
    max_sends_per_ip: int = 0
    resend_timeout: int = 60  # what auth.sentCode.timeout tells the client
    auto_register: bool = False  # auth.signIn creates unknown accounts


@dataclass(frozen=True)
class SentCode:
    phone_code_hash: str
    code_length: int
    timeout: int


def auto_register_name(phone: str) -> str:
    """The first name of an account auth.signIn creates (--auto-register)."""
    return f"+{phone}"


@dataclass(frozen=True)
class SignedIn:
    """Who a code signed in, and whether the sign-in made the account (auto-registration)."""

    user_id: int
    created: bool


class LoginService:
    def __init__(
        self,
        db: Db,
        sender: CodeSender,
        authorizations: AuthorizationService,
        policy: LoginPolicy | None = None,
        passwords: Passwords | None = None,
        counters: Counters | None = None,
        rate_limits: RateLimits | None = None,
    ) -> None:
        self._db = db
        # Where a new account's send claims are marked whole, and where the per-address
        # limit counts (Redis, shared by every process); None: not done.
        self._counters = counters
        self._rate_limits = rate_limits
        self._sender = sender
        self._authorizations = authorizations
        self.policy = policy or LoginPolicy()
        # How long a key waits for the account's password is the passwords' policy;
        # they are told of each key that waits.
        self._passwords = passwords

    async def close(self) -> None:
        """Stop deliveries still running (the server stops)."""
        await self._sender.close()

    async def send_code(self, phone: str, now: float, client_ip: str | None = None) -> SentCode:
        phone = normalize_phone(phone)
        if await login_blocks.is_blocked(self._db.pool, phone):
            raise PhoneNumberBanned()
        policy = self.policy
        if client_ip is not None and self._rate_limits is not None and policy.max_sends_per_ip:
            wait = await self._rate_limits.login_code_ip_rate_wait(
                client_ip, policy.max_sends_per_ip, int(policy.send_window * 1000)
            )
            if wait:
                raise SendCodeFlood(wait)
        code = self._sender.new_code()
        phone_code_hash = secrets.token_hex(8)
        result = await self._db.run_txn(
            "issue_login_code",
            _issue,
            phone,
            phone_code_hash,
            code,
            now,
            self.policy,
        )
        if not result.issued:
            raise SendCodeFlood(int(result.retry_after + 0.999))
        await self._sender.send(phone, code)
        return SentCode(phone_code_hash, len(code), self.policy.resend_timeout)

    async def resend_code(
        self, phone: str, phone_code_hash: str, now: float, client_ip: str | None = None
    ) -> SentCode:
        """auth.resendCode: the old code stops working, a new one is sent."""
        await self.cancel_code(phone, phone_code_hash)
        return await self.send_code(phone, now, client_ip)

    async def cancel_code(self, phone: str, phone_code_hash: str) -> bool:
        if not phone_code_hash:
            raise PhoneCodeHashEmpty()
        return await codes_store.cancel_code(
            self._db.pool, phone=normalize_phone(phone), phone_code_hash=phone_code_hash
        )

    async def sign_in(
        self, phone: str, phone_code_hash: str, code: str | None, perm_auth_key_id: int, now: float
    ) -> SignedIn | None:
        """Check the code and log the key in; None when the phone has no account yet
        (the client may then call auth.signUp with the same phone_code_hash). An
        account with a password is not signed in: the key waits for the password
        (SessionPasswordNeeded, once the code is used up)."""
        phone = normalize_phone(phone)
        if not phone_code_hash:
            raise PhoneCodeHashEmpty()
        if not code:
            raise PhoneCodeEmpty()
        policy = self.policy
        password_wait = (
            PasswordPolicy.login_ttl
            if self._passwords is None
            else self._passwords.policy.login_ttl
        )

        async def txn(
            conn: asyncpg.Connection,
        ) -> tuple[codes_store.CodeCheck, SignedIn | None, bool]:
            # Checked again here: a code sent before the block must not log anyone in.
            if await login_blocks.is_blocked(conn, phone):
                raise PhoneNumberBanned()
            check = await codes_store.check_code_txn(
                conn,
                phone=phone,
                phone_code_hash=phone_code_hash,
                code=code,
                now=to_datetime(now),
                max_attempts=policy.max_attempts,
            )
            if check is not codes_store.CodeCheck.OK:
                return check, None, False  # commit the counted attempt, then refuse
            user = await users_store.get_user_by_phone(conn, phone)
            # With auto-registration the account is made here. Two sign-ins of one new
            # phone at once may both say so: either way it has sent nothing yet.
            created = user is None and policy.auto_register
            if created:
                user = await users_store.create_user_if_absent(
                    conn, phone, auto_register_name(phone)
                )
            if user is None:
                return check, None, False
            signed = SignedIn(user.user_id, created)
            await codes_store.consume_code(conn, phone_code_hash)
            if await wait_for_password_txn(
                conn, perm_auth_key_id, user.user_id, now, password_wait
            ):
                return check, signed, True
            await AuthorizationService.bind_txn(conn, perm_auth_key_id, user.user_id, now)
            return check, signed, False

        check, signed, needs_password = await self._db.run_txn("sign_in", txn)
        if signed is not None and signed.created and self._counters is not None:
            await self._counters.new_sender(signed.user_id)
        if check is codes_store.CodeCheck.WRONG:
            raise PhoneCodeInvalid()
        if check is codes_store.CodeCheck.EXPIRED:
            raise PhoneCodeExpired()
        if needs_password:
            if self._passwords is not None:
                await self._passwords.mark_waiting(perm_auth_key_id)
            raise SessionPasswordNeeded()
        if signed is not None:
            self._authorizations.logged_in(perm_auth_key_id, signed.user_id)
        return signed

    async def sign_up(
        self,
        phone: str,
        phone_code_hash: str,
        first_name: str,
        last_name: str,
        perm_auth_key_id: int,
        now: float,
    ) -> int:
        """Create the account of a phone auth.signIn verified, and log the key in."""
        phone = normalize_phone(phone)
        if not phone_code_hash:
            raise PhoneCodeHashEmpty()
        first = clean_first_name(first_name)
        last = clean_last_name(last_name)

        async def txn(conn: asyncpg.Connection) -> int:
            if await login_blocks.is_blocked(conn, phone):
                raise PhoneNumberBanned()
            if not await codes_store.consume_verified_code(
                conn, phone=phone, phone_code_hash=phone_code_hash, now=to_datetime(now)
            ):
                raise PhoneCodeExpired()
            # A savepoint: the error must not abort the whole transaction first.
            async with conn.transaction():
                user = await users_store.create_user(conn, phone, first, last)
            await AuthorizationService.bind_txn(conn, perm_auth_key_id, user.user_id, now)
            return user.user_id

        user_id = await self._db.run_txn("sign_up", txn)
        if self._counters is not None:
            await self._counters.new_sender(user_id)
        self._authorizations.logged_in(perm_auth_key_id, user_id)
        return user_id


async def pending_codes(
    db: Db, phone: str, now: float, *, max_attempts: int = LoginPolicy.max_attempts
) -> list[codes_store.PendingCode]:
    """Codes that can still log `phone` in, newest first (for `telesrv codes PHONE`)."""
    return await codes_store.pending_codes(
        db.pool, normalize_phone(phone), to_datetime(now), max_attempts=max_attempts
    )


async def _issue(
    conn: asyncpg.Connection,
    phone: str,
    phone_code_hash: str,
    code: str,
    now: float,
    policy: LoginPolicy,
) -> codes_store.IssueResult:
    return await codes_store.issue_code_txn(
        conn,
        phone=phone,
        phone_code_hash=phone_code_hash,
        code=code,
        now=to_datetime(now),
        ttl=timedelta(seconds=policy.code_ttl),
        window=timedelta(seconds=policy.send_window),
        max_per_window=policy.max_sends,
    )
