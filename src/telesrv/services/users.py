"""Users: the per-viewer projection, access hashes, profiles, usernames and status.

The projection is the only code that decides what one
user looks like to another. It follows the *target's* privacy rules
(services/privacy.py), never the viewer's address book alone (anyone can add anyone
they found by username):

- the phone number: to viewers the target's PhoneNumber rules allow (by default the
  target's contacts), and to viewers who saved the target by that very number (they
  have it);
- "online" and the exact last-seen time: to viewers the target's StatusTimestamp
  rules allow (by default everybody); others see an approximation ("recently", "last
  week", ...), even while the target is online;
- across a block, when either user blocked the other, each sees no status at all for
  the other ("a long time ago").

A viewer's saved contact name replaces the name the target chose.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import math
import re
import struct
from collections import OrderedDict
from collections.abc import Callable, Iterable
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
from telesrv.services.privacy import CONSULTED_KEY_NAMES, PrivacyKey, allows
from telesrv.store import users as users_store
from telesrv.store.counters import Counters
from telesrv.store.db import Db
from telesrv.store.files import DC_ID

NAME_MAX = 64
ABOUT_MAX = 70
# account.updateStatus(offline=false) keeps a user online this long (clients repeat it).
ONLINE_TIMEOUT = 300
RECENTLY = 3 * 86_400
LAST_WEEK = 7 * 86_400
LAST_MONTH = 30 * 86_400

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


# -- access hashes -------------------------------------------------------------------


ACCESS_HASH_MEMO_SIZE = 50_000  # (viewer, target) pairs kept per process


class AccessHashes:
    """Per-viewer access hashes: HMAC-SHA256(secret, viewer id, target id), 8 bytes.

    A client can only present a correct hash for a user it was shown by this server,
    and the hash it got means nothing to any other account.
    """

    def __init__(self, secret: bytes, *, memo_size: int = ACCESS_HASH_MEMO_SIZE) -> None:
        if len(secret) < 16:
            raise ValueError("the access hash secret must have at least 16 bytes")
        self._mac = hmac.new(secret, digestmod=hashlib.sha256)
        # A hash never changes, and the same few pairs are asked for again and again
        # (every send checks the peer's hash, then shows both users in its answer and
        # its push): an HMAC costs far more than a lookup. Emptied when full.
        self._memo: dict[tuple[int, int], int] = {}
        self._memo_size = memo_size

    def for_user(self, viewer_id: int, target_id: int) -> int:
        pair = (viewer_id, target_id)
        value = self._memo.get(pair)
        if value is None:
            mac = self._mac.copy()
            mac.update(struct.pack("<qq", viewer_id, target_id))
            value = int.from_bytes(mac.digest()[:8], "little", signed=True)
            if len(self._memo) >= self._memo_size:
                self._memo.clear()
            self._memo[pair] = value
        return value

    def check(self, viewer_id: int, target_id: int, access_hash: int) -> bool:
        expected = self.for_user(viewer_id, target_id)
        return hmac.compare_digest(
            expected.to_bytes(8, "little", signed=True),
            (access_hash & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"),
        )


# -- the projection ------------------------------------------------------------------


class Presence(enum.Enum):
    ONLINE = "online"  # StatusView.expires
    OFFLINE = "offline"  # StatusView.was_online
    RECENTLY = "recently"
    LAST_WEEK = "last_week"
    LAST_MONTH = "last_month"
    LONG_AGO = "long_ago"  # or never: no status shown


@dataclass(frozen=True, slots=True)
class StatusView:
    presence: Presence
    expires: int = 0
    was_online: int = 0


@dataclass(frozen=True, slots=True)
class PhotoView:
    """The photo a viewer sees for a user (their avatar)."""

    photo_id: int
    stripped: bytes | None
    personal: bool  # the viewer's own choice for this contact
    dc_id: int = DC_ID


@dataclass(frozen=True, slots=True)
class UserView:
    """One user as one viewer sees them."""

    user_id: int
    access_hash: int
    first_name: str
    last_name: str
    username: str | None
    phone: str | None  # None: hidden from this viewer
    is_self: bool
    contact: bool  # the viewer has the user in contacts
    mutual_contact: bool  # ... and the user has the viewer
    status: StatusView
    photo: PhotoView | None = None  # None: no photo to show


# -- profile photos ------------------------------------------------------------------


def profile_photo_allowed(viewer_id: int, row: users_store.ProjectedUserRow) -> bool:
    """Whether the viewer may see the user's profile photo (the current one and the
    others listed): the one place this is decided, for avatars, full profiles, photo
    lists and downloads. Those who may not see it see the fallback photo instead (the
    ProfilePhoto privacy rules, everybody by default)."""
    return allows(row, PrivacyKey.PROFILE_PHOTO, viewer_id)


def avatar(viewer_id: int, row: users_store.ProjectedUserRow) -> PhotoView | None:
    """The photo the viewer sees for the user: the personal photo the viewer set for
    this contact, else the profile photo if allowed, else the fallback photo, else none."""
    if row.personal_photo_id is not None and row.in_viewer_contacts and row.user_id != viewer_id:
        return PhotoView(row.personal_photo_id, row.personal_stripped, personal=True)
    if row.photo_id is not None and (
        row.user_id == viewer_id or profile_photo_allowed(viewer_id, row)
    ):
        return PhotoView(row.photo_id, row.photo_stripped, personal=False)
    if row.fallback_photo_id is not None:
        return PhotoView(row.fallback_photo_id, row.fallback_stripped, personal=False)
    return None


def _status(row: users_store.ProjectedUserRow, knows: bool, now: float) -> tuple[StatusView, float]:
    """The status at ``now``, and the moment it next changes (inf: never, until the
    row's facts change): as time only moves a status on (online, then recently, last
    week, last month, long ago), the same status holds from ``now`` up to then."""
    if knows and row.online_until is not None:
        online_until = row.online_until.timestamp()
        if online_until > now:
            return StatusView(Presence.ONLINE, expires=int(online_until)), online_until
    # An online period that ran out without an explicit offline ended when it expired.
    last = row.online_until or row.last_online_at
    if last is None:
        return StatusView(Presence.LONG_AGO), math.inf
    seen = last.timestamp()
    if knows:
        return StatusView(Presence.OFFLINE, was_online=int(seen)), math.inf
    # Compared as now <= seen + span, so that the moment it changes is exactly the
    # first float past seen + span.
    for presence, span in _APPROXIMATE:
        if now <= seen + span:
            return StatusView(presence), math.nextafter(seen + span, math.inf)
    return StatusView(Presence.LONG_AGO), math.inf


# What a viewer who may not see the exact time sees, by how long ago the user was seen.
_APPROXIMATE = (
    (Presence.RECENTLY, RECENTLY),
    (Presence.LAST_WEEK, LAST_WEEK),
    (Presence.LAST_MONTH, LAST_MONTH),
)


# What the projection computes a view from: one row per (viewer, target).
UserFacts = users_store.ProjectedUserRow

PROJECTION_CACHE_SIZE = 200_000  # (viewer, target) rows kept per process

Pair = tuple[int, int]  # (viewer, target)


class ProjectionCache:
    """(viewer, target) -> the stored facts the projection is computed from, per process.

    The row holds everything that depends on the two users (names, phone, username,
    status times, contacts and blocks either way); the time-dependent parts of a view
    are computed from it on every use. Whatever changes one of those facts calls
    ``changed`` with the user whose data changed (for a contact or a block: its owner),
    which drops every cached pair the user takes part in, as viewer or as target, in
    this process and (through ``on_change``) in the others.

    A lookup that raced a change does not store its answer: each change bumps
    ``epoch``, and rows are only stored for lookups that began in the current one.
    """

    def __init__(self, size: int = PROJECTION_CACHE_SIZE) -> None:
        self.size = size
        self.epoch = 0
        self._rows: OrderedDict[Pair, users_store.ProjectedUserRow] = OrderedDict()
        self._by_user: dict[int, set[Pair]] = {}
        # Users whose facts changed here, for other server processes to ``forget``.
        self.on_change: Callable[[list[int]], None] | None = None

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, viewer_id: int, target_id: int) -> users_store.ProjectedUserRow | None:
        pair = (viewer_id, target_id)
        row = self._rows.get(pair)
        if row is not None:
            self._rows.move_to_end(pair)
        return row

    def put(self, viewer_id: int, row: users_store.ProjectedUserRow, epoch: int) -> None:
        if epoch != self.epoch:
            return
        pair = (viewer_id, row.user_id)
        self._rows[pair] = row
        self._rows.move_to_end(pair)
        self._by_user.setdefault(viewer_id, set()).add(pair)
        self._by_user.setdefault(row.user_id, set()).add(pair)
        while len(self._rows) > self.size:
            old, _ = self._rows.popitem(last=False)
            self._unindex(old)

    def _unindex(self, pair: Pair) -> None:
        for user_id in {pair[0], pair[1]}:
            pairs = self._by_user.get(user_id)
            if pairs is not None:
                pairs.discard(pair)
                if not pairs:
                    del self._by_user[user_id]

    def forget(self, user_ids: Iterable[int] | None = None) -> None:
        """Drop every pair of these users (None: everything)."""
        self.epoch += 1
        if user_ids is None:
            self._rows.clear()
            self._by_user.clear()
            return
        for user_id in user_ids:
            for pair in self._by_user.pop(user_id, ()):
                if self._rows.pop(pair, None) is not None:
                    self._unindex(pair)

    def changed(self, user_ids: Iterable[int]) -> None:
        """These users' facts changed (after commit): forget here and everywhere."""
        ids = list(dict.fromkeys(user_ids))
        self.forget(ids)
        if ids and self.on_change is not None:
            self.on_change(ids)


class UserProjection:
    def __init__(
        self, db: Db, access_hashes: AccessHashes, cache: ProjectionCache | None = None
    ) -> None:
        self._db = db
        self.access_hashes = access_hashes
        # Without a cache shared with the services that change users, nothing is kept.
        self.cache = cache if cache is not None else ProjectionCache(size=0)

    async def views(self, viewer_id: int, target_ids: Iterable[int], now: float) -> list[UserView]:
        """The targets that exist, in the order given (duplicates once): at most one query."""
        found = await self.views_many({viewer_id: list(target_ids)}, now)
        return found.get(viewer_id, [])

    async def view(self, viewer_id: int, target_id: int, now: float) -> UserView | None:
        found = await self.views(viewer_id, [target_id], now)
        return found[0] if found else None

    async def views_many(
        self, wanted: dict[int, list[int]], now: float
    ) -> dict[int, list[UserView]]:
        """viewer -> the targets that exist, in the order given: one query for all the
        pairs not cached (none when all are)."""
        rows = await self.rows_many(wanted)
        return {
            viewer_id: [self.view_until(viewer_id, row, now)[0] for row in found]
            for viewer_id, found in rows.items()
        }

    async def rows_many(
        self, wanted: dict[int, list[int]]
    ) -> dict[int, list[users_store.ProjectedUserRow]]:
        """viewer -> the stored facts of the targets that exist, in the order given
        (duplicates once), for ``view_until``: one query for all the pairs not cached.
        While a pair's facts stay unchanged and cached, the same row object is returned
        for it, which callers may use to keep what they derived from it."""
        cache = self.cache
        rows: dict[Pair, users_store.ProjectedUserRow] = {}
        viewers: list[int] = []
        targets: list[int] = []
        for viewer_id, ids in wanted.items():
            for user_id in dict.fromkeys(ids):
                row = cache.get(viewer_id, user_id)
                if row is not None:
                    rows[(viewer_id, user_id)] = row
                else:
                    viewers.append(viewer_id)
                    targets.append(user_id)
        if targets:
            epoch = cache.epoch
            for viewer_id, row in await users_store.project_user_pairs(
                self._db.pool, viewers, targets, CONSULTED_KEY_NAMES
            ):
                rows[(viewer_id, row.user_id)] = row
                cache.put(viewer_id, row, epoch)
        return {
            viewer_id: [rows[(viewer_id, u)] for u in dict.fromkeys(ids) if (viewer_id, u) in rows]
            for viewer_id, ids in wanted.items()
        }

    def view_until(
        self, viewer_id: int, row: users_store.ProjectedUserRow, now: float
    ) -> tuple[UserView, float]:
        """The target of ``row`` as the viewer sees them at ``now``, and the moment that
        view next changes with time alone (inf: never): the same row gives the same
        view from ``now`` until then."""
        is_self = row.user_id == viewer_id
        shows_phone = allows(row, PrivacyKey.PHONE_NUMBER, viewer_id) or (
            row.in_viewer_contacts and row.saved_by_phone
        )
        blocked = not is_self and (row.viewer_blocked or row.blocked_viewer)
        first_name, last_name = row.first_name, row.last_name
        if not is_self and row.in_viewer_contacts and (row.saved_first_name or row.saved_last_name):
            first_name = row.saved_first_name or ""
            last_name = row.saved_last_name or ""
        if blocked:
            status, until = StatusView(Presence.LONG_AGO), math.inf
        else:
            status, until = _status(row, allows(row, PrivacyKey.STATUS_TIMESTAMP, viewer_id), now)
        view = UserView(
            user_id=row.user_id,
            access_hash=self.access_hashes.for_user(viewer_id, row.user_id),
            first_name=first_name,
            last_name=last_name,
            username=row.username,
            phone=row.phone if shows_phone else None,
            is_self=is_self,
            contact=not is_self and row.in_viewer_contacts,
            mutual_contact=not is_self and row.in_viewer_contacts and row.has_viewer_in_contacts,
            status=status,
            photo=avatar(viewer_id, row),
        )
        return view, until


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
        change_per_minute: int = 0,
    ) -> None:
        self._db = db
        self._events: AccountEvents = events or NoAccountEvents()
        # Names, username and status are part of every projection of the user.
        self._projections = projections if projections is not None else ProjectionCache(size=0)
        self._counters = counters
        self._change_per_minute = change_per_minute

    async def _count_change(self, user_id: int) -> None:
        """Names and username changes are bounded per user per minute (each one is
        pushed to everyone who has the user in their contacts or chat list)."""
        if self._counters is None:
            return
        wait = await self._counters.profile_change_rate_wait(user_id, self._change_per_minute)
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
