"""Users as TL: the only place a TL ``User`` is built (from the projection's views)."""

from __future__ import annotations

import struct
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
from telesrv.tl.core import write_object, write_string

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


# The user that ``user_to_tl`` makes, written without making it (a push's user whose
# pair is seen once, see push_wire.py):
# user#b1b8cc83 flags flags2 id access_hash:flags.0? first_name:flags.1?
# last_name:flags.2? username:flags.3? phone:flags.4? photo:flags.5? status:flags.6? ...
_USER_HEAD = struct.Struct("<IIIq")
_ACCESS_HASH = 1 << 0
_FIRST_NAME = 1 << 1
_LAST_NAME = 1 << 2
_USERNAME = 1 << 3
_PHONE = 1 << 4
_PHOTO = 1 << 5
_STATUS = 1 << 6
_SELF = 1 << 10
_CONTACT = 1 << 11
_MUTUAL_CONTACT = 1 << 12

_I64 = struct.Struct("<q")


def user_bytes(view: UserView) -> bytes:
    """``user_to_tl(view).to_bytes()``."""
    last_name = view.last_name or None
    flags = _PHOTO | _STATUS
    if view.is_self:
        flags |= _SELF
    if view.contact:
        flags |= _CONTACT
    if view.mutual_contact:
        flags |= _MUTUAL_CONTACT
    if view.access_hash is not None:
        flags |= _ACCESS_HASH
    if view.first_name is not None:
        flags |= _FIRST_NAME
    if last_name is not None:
        flags |= _LAST_NAME
    if view.username is not None:
        flags |= _USERNAME
    if view.phone is not None:
        flags |= _PHONE
    buf = bytearray(_USER_HEAD.pack(types.User.CONSTRUCTOR_ID, flags, 0, view.user_id))
    if view.access_hash is not None:
        buf += _I64.pack(view.access_hash)
    if view.first_name is not None:
        write_string(buf, view.first_name)
    if last_name is not None:
        write_string(buf, last_name)
    if view.username is not None:
        write_string(buf, view.username)
    if view.phone is not None:
        write_string(buf, view.phone)
    write_object(buf, photo_to_tl(view.photo))
    write_object(buf, status_to_tl(view.status))
    return bytes(buf)


# (viewer, target) pairs whose TL user is kept per process: a push, a getDifference
# or an answer mentioning a user again reuses it while its facts and status hold.
USERS_TL_CACHE_SIZE = 20_000


# Not frozen: made on every miss and never leaves this module, and a frozen
# dataclass costs several times as much to make (store/frozen_slots.quick_init halves that
# for the classes that must stay frozen).
@dataclass(slots=True)
class _Built:
    row: UserFacts  # the facts it was built from (the projection's own object)
    since: float  # valid from this moment ...
    until: float  # ... to just before this one (the status changes then)
    user: types.User
    wire: bytes | None = None  # the user written, once a push asked for it


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

    async def wire_many(
        self, wanted: dict[int, list[int]], now: float | None = None
    ) -> dict[int, list[tuple[int, bytes]]]:
        """viewer -> (user id, the TL user written) of the users that exist, in the
        order given: what ``many`` gives, for a push that only writes them. A kept
        user is written once; one the projection did not keep is written from its
        view without a TL object (push_wire.py)."""
        at = time.time() if now is None else now
        rows = await self.projection.rows_many(wanted)
        return {
            viewer: [(row.user_id, self._wire(viewer, row, at)) for row in found]
            for viewer, found in rows.items()
        }

    async def wire(
        self, viewer_id: int, user_ids: Iterable[int], now: float | None = None
    ) -> list[bytes]:
        """What ``__call__`` gives, written: for an answer written without its objects."""
        found = await self.wire_many({viewer_id: list(user_ids)}, now)
        return [written for _user_id, written in found.get(viewer_id, [])]

    async def one(self, viewer_id: int, user_id: int, now: float) -> types.User:
        """The user, who must exist (a missing one is a bug upstream: KeyError)."""
        rows = await self.projection.rows_many({viewer_id: [user_id]})
        found = rows.get(viewer_id)
        if not found:
            raise KeyError(user_id)
        return self._user(viewer_id, found[0], now)

    def _user(self, viewer_id: int, row: UserFacts, now: float) -> types.User:
        return self._built_for(viewer_id, row, now).user

    def _wire(self, viewer_id: int, row: UserFacts, now: float) -> bytes:
        if not self._cacheable(viewer_id, row):
            return user_bytes(self.projection.view_until(viewer_id, row, now)[0])
        built = self._built_for(viewer_id, row, now)
        if built.wire is None:
            built.wire = built.user.to_bytes()
        return built.wire

    def _built_for(self, viewer_id: int, row: UserFacts, now: float) -> _Built:
        """The pair's user as built from ``row`` for ``now``: the one cached while it
        holds, else built (and cached if the projection keeps the row)."""
        key = (viewer_id, row.user_id)
        built = self._built.get(key)
        if built is not None and built.row is row and built.since <= now < built.until:
            self._built.move_to_end(key)
            return built
        view, until = self.projection.view_until(viewer_id, row, now)
        built = _Built(row, now, until, user_to_tl(view))
        if self._cacheable(viewer_id, row):
            self._built[key] = built
            self._built.move_to_end(key)
            while len(self._built) > self.cache_size:
                self._built.popitem(last=False)
        return built

    def _cacheable(self, viewer_id: int, row: UserFacts) -> bool:
        # Kept only while the projection keeps its row: a row it did not keep (a pair
        # seen once) is never returned again, so neither would this user be.
        return self.cache_size > 0 and self.projection.cache.keeps(viewer_id, row)
