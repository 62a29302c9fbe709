"""Users as TL: the only place a TL ``User`` is built (from the projection's views)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from telesrv.services.projection import (
    PhotoView,
    Presence,
    StatusView,
    UserFacts,
    UserProjection,
    UserView,
)
from telesrv.tl import types

# TL objects are never changed once built (a layer's downgrade copies), so those
# whose fields all keep their defaults are made once and shared by every user that
# shows them.
_RECENTLY = types.UserStatusRecently()
_LAST_WEEK = types.UserStatusLastWeek()
_LAST_MONTH = types.UserStatusLastMonth()
_NO_STATUS = types.UserStatusEmpty()
_NO_PHOTO = types.UserProfilePhotoEmpty()


def status_to_tl(status: StatusView) -> types.TypeUserStatus:
    presence = status.presence
    if presence is Presence.ONLINE:
        return types.UserStatusOnline(expires=status.expires)
    if presence is Presence.OFFLINE:
        return types.UserStatusOffline(was_online=status.was_online)
    if presence is Presence.RECENTLY:
        return _RECENTLY
    if presence is Presence.LAST_WEEK:
        return _LAST_WEEK
    if presence is Presence.LAST_MONTH:
        return _LAST_MONTH
    return _NO_STATUS


def photo_to_tl(photo: PhotoView | None) -> types.TypeUserProfilePhoto:
    if photo is None:
        return _NO_PHOTO
    return types.UserProfilePhoto(
        photo_id=photo.photo_id,
        dc_id=photo.dc_id,
        stripped_thumb=photo.stripped,
        personal=photo.personal,
        has_video=False,
    )


def user_to_tl(view: UserView) -> types.User:
    return types.User(
        id=view.user_id,
        self_=view.is_self,
        contact=view.contact,
        mutual_contact=view.mutual_contact,
        access_hash=view.access_hash,
        first_name=view.first_name,
        last_name=view.last_name or None,
        username=view.username,
        phone=view.phone,
        photo=photo_to_tl(view.photo),
        status=status_to_tl(view.status),
    )


# (viewer, target) pairs whose TL user is kept per process: a push, a getDifference
# or an answer mentioning a user again reuses it while its facts and status hold.
USERS_TL_CACHE_SIZE = 20_000


# Not frozen: made on every miss and never leaves this module, and a frozen
# dataclass costs several times as much to make.
@dataclass(slots=True)
class _Built:
    row: UserFacts  # the facts it was built from (the projection's own object)
    since: float  # valid from this moment ...
    until: float  # ... to just before this one (the status changes then)
    user: types.User


class UsersTl:
    """(viewer, user ids) -> TL users through the projection: for every handler.

    A built user is kept per (viewer, target) when the projection keeps the pair's
    row (from the pair's second sighting), and given again while the projection
    returns that same row object (its facts unchanged: a change makes the projection
    read a new row) and the time is within the span its status holds. TL
    objects are never changed once built (a layer's downgrade copies), so one object
    can go into many answers."""

    def __init__(self, projection: UserProjection, cache_size: int = USERS_TL_CACHE_SIZE) -> None:
        self.projection = projection
        self.cache_size = cache_size
        self._built: OrderedDict[tuple[int, int], _Built] = OrderedDict()

    async def __call__(
        self, viewer_id: int, user_ids: Iterable[int], now: float | None = None
    ) -> list[types.TypeUser]:
        found = await self.many({viewer_id: list(user_ids)}, now)
        return list(found.get(viewer_id, []))

    async def many(
        self, wanted: dict[int, list[int]], now: float | None = None
    ) -> dict[int, list[types.TypeUser]]:
        """viewer -> TL users, for many viewers in one query."""
        at = time.time() if now is None else now
        rows = await self.projection.rows_many(wanted)
        return {
            viewer: [self._user(viewer, row, at) for row in found] for viewer, found in rows.items()
        }

    async def one(self, viewer_id: int, user_id: int, now: float) -> types.User:
        """The user, who must exist (a missing one is a bug upstream: KeyError)."""
        rows = await self.projection.rows_many({viewer_id: [user_id]})
        found = rows.get(viewer_id)
        if not found:
            raise KeyError(user_id)
        return self._user(viewer_id, found[0], now)

    def _user(self, viewer_id: int, row: UserFacts, now: float) -> types.User:
        key = (viewer_id, row.user_id)
        built = self._built.get(key)
        if built is not None and built.row is row and built.since <= now < built.until:
            self._built.move_to_end(key)
            return built.user
        view, until = self.projection.view_until(viewer_id, row, now)
        user = user_to_tl(view)
        # Kept only while the projection keeps its row: a row it did not keep (a pair
        # seen once) is never returned again, so neither would this user be.
        if self.cache_size > 0 and self.projection.cache.keeps(viewer_id, row):
            self._built[key] = _Built(row, now, until, user)
            self._built.move_to_end(key)
            while len(self._built) > self.cache_size:
                self._built.popitem(last=False)
        return user
