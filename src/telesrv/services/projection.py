"""The per-viewer projection of users: what one user looks like to another.

This is the only code that decides what one
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
import math
from collections.abc import Iterable
from typing import NamedTuple

from telesrv.services.access_hashes import AccessHashes
from telesrv.services.privacy import CONSULTED_KEY_NAMES, PrivacyKey, allows
from telesrv.services.projection_cache import Pair, ProjectionCache
from telesrv.store import users as users_store
from telesrv.store.db import Db
from telesrv.store.files import DC_ID

# account.updateStatus(offline=false) keeps a user online this long (clients repeat it).
ONLINE_TIMEOUT = 300
RECENTLY = 3 * 86_400
LAST_WEEK = 7 * 86_400
LAST_MONTH = 30 * 86_400


class Presence(enum.Enum):
    ONLINE = "online"  # StatusView.expires
    OFFLINE = "offline"  # StatusView.was_online
    RECENTLY = "recently"
    LAST_WEEK = "last_week"
    LAST_MONTH = "last_month"
    LONG_AGO = "long_ago"  # or never: no status shown


# The views are named tuples rather than frozen dataclasses: as immutable, and a view is
# made for every user of every push and answer, where a frozen dataclass's __init__
# (one object.__setattr__ per field) cost about as much as the rest of the view.
class StatusView(NamedTuple):
    presence: Presence
    expires: int = 0
    was_online: int = 0


class PhotoView(NamedTuple):
    """The photo a viewer sees for a user (their avatar)."""

    photo_id: int
    stripped: bytes | None
    personal: bool  # the viewer's own choice for this contact
    dc_id: int = DC_ID


class UserView(NamedTuple):
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
        return _LONG_AGO, math.inf
    seen = last.timestamp()
    if knows:
        return StatusView(Presence.OFFLINE, was_online=int(seen)), math.inf
    # Compared as now <= seen + span, so that the moment it changes is exactly the
    # first float past seen + span.
    for status, span in _APPROXIMATE:
        if now <= seen + span:
            return status, math.nextafter(seen + span, math.inf)
    return _LONG_AGO, math.inf


# The statuses that carry no time are shared: a view is never changed once made, and
# making one costs about as much as the rest of the view's status.
_LONG_AGO = StatusView(Presence.LONG_AGO)
# What a viewer who may not see the exact time sees, by how long ago the user was seen.
_APPROXIMATE = (
    (StatusView(Presence.RECENTLY), RECENTLY),
    (StatusView(Presence.LAST_WEEK), LAST_WEEK),
    (StatusView(Presence.LAST_MONTH), LAST_MONTH),
)


# What the projection computes a view from: one row per (viewer, target).


UserFacts = users_store.ProjectedUserRow


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
        pairs = {
            viewer_id: [(viewer_id, user_id) for user_id in dict.fromkeys(ids)]
            for viewer_id, ids in wanted.items()
        }
        for viewer_pairs in pairs.values():
            for pair in viewer_pairs:
                row = cache.get(*pair)
                if row is not None:
                    rows[pair] = row
                else:
                    viewers.append(pair[0])
                    targets.append(pair[1])
        if targets:
            epoch = cache.epoch
            for viewer_id, row in await users_store.project_user_pairs(
                self._db.pool,
                viewers,
                targets,
                CONSULTED_KEY_NAMES,
                split=self._db.distributed,
            ):
                rows[(viewer_id, row.user_id)] = row
                cache.put(viewer_id, row, epoch)
        return {
            viewer_id: [row for pair in viewer_pairs if (row := rows.get(pair)) is not None]
            for viewer_id, viewer_pairs in pairs.items()
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
            status, until = _LONG_AGO, math.inf
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
