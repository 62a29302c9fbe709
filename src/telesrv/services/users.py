"""Users: accounts, their profiles (names, about, username) and online status; the
per-viewer projection is services/projection.py."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from telesrv.services.accounts import (
    AccountEvents,
    NoAccountEvents,
    Origin,
    UserNotFound,
    to_datetime,
)
from telesrv.services.errors import (
    AboutTooLong,
    FirstnameInvalid,
    FloodWait,
    LastnameInvalid,
    PhoneNotOccupied,
    PhoneNumberInvalid,
    UsernameInvalid,
    UsernameNotModified,
    UsernameNotOccupied,
    UsernameOccupied,
)
from telesrv.services.projection import ONLINE_TIMEOUT
from telesrv.services.projection_cache import ProjectionCache
from telesrv.store import users as users_store
from telesrv.store.counters import Counters
from telesrv.store.db import Db
from telesrv.store.rate_limits import RateLimits

NAME_MAX = 64
ABOUT_MAX = 70

_USERNAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{4,31}")
_PHONE_DIGITS = re.compile(r"[0-9]{5,15}")
_PHONE_DECORATION = re.compile(r"[\s\-().]")


# -- validation -----------------------------------------------------------------------


def normalize_phone(phone: str) -> str:
    """Digits only, as stored: '+1 555-0001' -> '15550001'; raises PhoneNumberInvalid."""
    digits = _PHONE_DECORATION.sub("", phone.strip())
    digits = digits.removeprefix("+")
    if not _PHONE_DIGITS.fullmatch(digits):
        raise PhoneNumberInvalid()
    return digits


def check_username(username: str) -> str:
    """5-32 characters of A-Z a-z 0-9 _, starting with a letter."""
    if not _USERNAME.fullmatch(username):
        raise UsernameInvalid()
    return username


def clean_first_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > NAME_MAX:
        raise FirstnameInvalid()
    return name


def clean_last_name(name: str) -> str:
    name = name.strip()
    if len(name) > NAME_MAX:
        raise LastnameInvalid()
    return name


def clean_about(about: str) -> str:
    about = about.strip()
    if len(about) > ABOUT_MAX:
        raise AboutTooLong()
    return about


# -- profiles ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Account:
    """An account as its owner (or an administrator) sees it."""

    user_id: int
    phone: str
    first_name: str
    last_name: str
    about: str
    username: str | None
    created_at: int  # unix time


def _account(row: users_store.UserRow) -> Account:
    return Account(
        user_id=row.user_id,
        phone=row.phone,
        first_name=row.first_name,
        last_name=row.last_name,
        about=row.about,
        username=row.username,
        created_at=int(row.created_at.timestamp()),
    )


class UserService:
    """Accounts and their profiles: creation, names, username, about, status."""

    def __init__(
        self,
        db: Db,
        events: AccountEvents | None = None,
        projections: ProjectionCache | None = None,
        *,
        counters: Counters | None = None,
        rate_limits: RateLimits | None = None,
        change_per_minute: int = 0,
    ) -> None:
        self._db = db
        self._events: AccountEvents = events or NoAccountEvents()
        # Names, username and status are part of every projection of the user.
        self._projections = projections if projections is not None else ProjectionCache(size=0)
        self._counters = counters
        self._rate_limits = rate_limits
        self._change_per_minute = change_per_minute

    async def _count_change(self, user_id: int) -> None:
        """Names and username changes are bounded per user per minute (each one is
        pushed to everyone who has the user in their contacts or chat list)."""
        if self._rate_limits is None:
            return
        wait = await self._rate_limits.profile_change_rate_wait(user_id, self._change_per_minute)
        if wait:
            raise FloodWait(wait)

    async def create(
        self, phone: str, first_name: str, last_name: str = "", username: str | None = None
    ) -> Account:
        """Create an account (admin CLI, auth.signUp)."""
        phone = normalize_phone(phone)
        first_name = clean_first_name(first_name)
        last_name = clean_last_name(last_name)
        if username:
            check_username(username)
        row = await users_store.create_user(
            self._db.pool, phone, first_name, last_name, username or None
        )
        if self._counters is not None:
            await self._counters.new_sender(row.user_id)
        return _account(row)

    async def get(self, user_id: int) -> Account:
        row = await users_store.get_user(self._db.pool, user_id)
        if row is None:
            raise UserNotFound()
        return _account(row)

    async def list_accounts(self, *, after_id: int = 0, limit: int = 1000) -> list[Account]:
        return [
            _account(r)
            for r in await users_store.list_users(self._db.pool, after_id=after_id, limit=limit)
        ]

    async def update_profile(
        self,
        user_id: int,
        *,
        first_name: str | None = None,
        last_name: str | None = None,
        about: str | None = None,
        origin: Origin | None = None,
    ) -> Account:
        first = clean_first_name(first_name) if first_name is not None else None
        last = clean_last_name(last_name) if last_name is not None else None
        bio = clean_about(about) if about is not None else None
        await self._count_change(user_id)

        async def change(conn: asyncpg.Connection) -> users_store.UserRow | None:
            row = await users_store.update_profile(
                conn, user_id, first_name=first, last_name=last, about=bio
            )
            if row is not None and (first is not None or last is not None):
                await self._events.profile_changed(conn, user_id, origin)
            return row

        row = await self._db.run_txn("update_profile", change)
        self._projections.changed([user_id])
        if row is None:
            raise UserNotFound()
        return _account(row)

    async def update_username(
        self, user_id: int, username: str, origin: Origin | None = None
    ) -> Account:
        """Set the username; "" removes it."""
        new = check_username(username) if username else None
        await self._count_change(user_id)

        async def change(conn: asyncpg.Connection) -> users_store.UserRow:
            current = await users_store.get_user(conn, user_id)
            if current is None:
                raise UserNotFound()
            if current.username == new:
                raise UsernameNotModified()
            row = await users_store.set_username(conn, user_id, new)
            assert row is not None
            await self._events.profile_changed(conn, user_id, origin)
            return row

        row = await self._db.run_txn("update_username", change)
        self._projections.changed([user_id])
        return _account(row)

    async def username_available(self, user_id: int, username: str) -> bool:
        """account.checkUsername: True when free or already this user's."""
        owner = await users_store.get_user_id_by_username(self._db.pool, check_username(username))
        if owner is not None and owner != user_id:
            raise UsernameOccupied()
        return True

    async def resolve_username(self, username: str) -> int:
        # Resolving takes what links carry, which may be shorter than what may be set.
        if not re.fullmatch(r"[A-Za-z0-9_]{1,32}", username):
            raise UsernameInvalid()
        user_id = await users_store.get_user_id_by_username(self._db.pool, username)
        if user_id is None:
            raise UsernameNotOccupied()
        return user_id

    async def resolve_phone(self, phone: str) -> int:
        found = await users_store.get_user_by_phone(self._db.pool, normalize_phone(phone))
        if found is None:
            raise PhoneNotOccupied()
        return found.user_id

    async def set_status(self, user_id: int, *, offline: bool, now: float) -> None:
        at = to_datetime(now)
        online_until = None if offline else at + timedelta(seconds=ONLINE_TIMEOUT)
        await users_store.set_status(
            self._db.pool, user_id, online_until=online_until, last_online_at=at
        )
        self._projections.changed([user_id])
