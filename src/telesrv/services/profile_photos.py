"""Profile photos: a user's photos (the current one, a fallback, the list of earlier
ones) and the personal photos viewers set for their contacts.

The photos are made from uploads as message photos are (services/files.py), square, in
the sizes lists and profiles show. What a viewer sees for a user (the personal photo,
else the profile photo if allowed, else the fallback) is the projection's
(services/projection.py ``avatar``, ``profile_photo_allowed``). Every change counts against
the user's media rate, as uploads do (services/files.py). A change is a state-log event
for the devices of the user whose view changed (updateUser, durable: their other
devices get it live or from getDifference), and drops the user's cached projections
in every process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from telesrv.services.accounts import Origin
from telesrv.services.errors import ContactIdInvalid, LocationInvalid, PhotoIdInvalid
from telesrv.services.files import FileLocation, MediaFiles, PhotoRow
from telesrv.services.projection import UserProjection, profile_photo_allowed
from telesrv.services.update_log import EventType, state_event
from telesrv.services.uploads import UploadedFile
from telesrv.store import profile_photos as store
from telesrv.store.db import Db, after_commit

# Telegram keeps a long history of profile photos; past this many, the oldest goes
# (still downloadable by those who hold it in a message, else collected later).
MAX_PROFILE_PHOTOS = 100
# users.getUserPhotos: at most this many a page.
MAX_PAGE = 100


@dataclass(frozen=True)
class FullPhotos:
    """users.getFullUser's photos of a user, as one viewer may see them."""

    profile: PhotoRow | None
    personal: PhotoRow | None
    fallback: PhotoRow | None


class ProfilePhotoAccess:
    """Who may see a user's profile photos: the one decision that avatars, listings and
    downloads share (MediaFiles asks it of a photo the viewer holds in no message)."""

    def __init__(self, db: Db, projection: UserProjection) -> None:
        self._db = db
        self._projection = projection

    async def allowed(self, viewer_id: int, user_id: int) -> bool:
        if viewer_id == user_id:
            return True
        rows = await self._projection.rows_many({viewer_id: [user_id]})
        found = rows.get(viewer_id)
        return found is not None and bool(found) and profile_photo_allowed(viewer_id, found[0])

    async def may_see_photo(self, viewer_id: int, photo_id: int) -> bool:
        """Whether the photo is a profile photo the viewer may see: the fallback photo
        to anyone, the others to those allowed."""
        found = await store.profile_photo_user(self._db.pool, photo_id)
        if found is None:
            return False
        user_id, fallback = found
        return fallback or await self.allowed(viewer_id, user_id)


class ProfilePhotos:
    def __init__(
        self,
        db: Db,
        media: MediaFiles,
        access: ProfilePhotoAccess,
        projection: UserProjection,
        on_commit: Callable[[], None] = lambda: None,
    ) -> None:
        self._db = db
        self._media = media
        self._access = access
        self._projection = projection
        self._on_commit = on_commit

    # -- changes -------------------------------------------------------------------

    async def _changed_txn(
        self, conn: asyncpg.Connection, owner: int, user: int, origin: Origin | None
    ) -> None:
        """The photo ``owner`` sees for ``user`` changed: told to the owner's devices."""
        await state_event(conn, owner, EventType.USER_PHOTO, int(time.time()), origin, peer=user)
        after_commit(self._on_commit)

    def _forget(self, user_id: int) -> None:
        self._projection.cache.changed([user_id])

    async def upload(
        self,
        user_id: int,
        file: UploadedFile,
        *,
        fallback: bool,
        now: int,
        origin: Origin | None,
    ) -> PhotoRow:
        """A new profile photo (or fallback photo) from an upload, shown at once."""
        photo = await self._media.photo_from_upload(user_id, file, now, profile=True)

        async def add(conn: asyncpg.Connection) -> None:
            await store.add_photo_txn(
                conn, user_id, photo.id, fallback=fallback, keep=MAX_PROFILE_PHOTOS
            )
            await self._changed_txn(conn, user_id, user_id, origin)

        await self._db.run_txn("add_profile_photo", add)
        self._forget(user_id)
        return photo

    async def set_current(
        self,
        user_id: int,
        photo: tuple[int, int] | None,
        *,
        fallback: bool,
        origin: Origin | None,
    ) -> PhotoRow | None:
        """Show one of the user's photos ((id, access hash)) as the profile photo again,
        or (None) none; with ``fallback``, only None: no fallback photo."""
        await self._media.check_media_rate(user_id)
        row = None
        if photo is not None:
            row = await self._media.photo(user_id, photo[0], photo[1], None)

        async def change(conn: asyncpg.Connection) -> bool:
            done = await store.set_current_txn(
                conn, user_id, None if row is None else row.id, fallback=fallback
            )
            if done:
                await self._changed_txn(conn, user_id, user_id, origin)
            return done

        if not await self._db.run_txn("set_profile_photo", change):
            raise PhotoIdInvalid()
        self._forget(user_id)
        return row

    async def delete(
        self, user_id: int, photos: list[tuple[int, int]], origin: Origin | None
    ) -> list[int]:
        """Remove these (id, access hash) of the user's profile photos; the ids removed
        (others are left out, as Telegram does)."""
        found = await store.photos_by_ids(self._db.pool, [p for p, _ in photos])
        ids = [p for p, h in photos if p in found and found[p].access_hash == h]
        if not ids:
            return []
        await self._media.check_media_rate(user_id)

        async def remove(conn: asyncpg.Connection) -> list[int]:
            gone = await store.delete_photos_txn(conn, user_id, ids)
            if gone:
                await self._changed_txn(conn, user_id, user_id, origin)
            return gone

        gone = await self._db.run_txn("delete_profile_photos", remove)
        if gone:
            self._forget(user_id)
        return gone

    async def set_personal(
        self,
        viewer_id: int,
        user_id: int,
        file: UploadedFile | None,
        *,
        now: int,
        origin: Origin | None,
    ) -> PhotoRow | None:
        """The photo the viewer sees for their contact from an upload, or (None) the
        contact's own again."""
        rows = await self._projection.rows_many({viewer_id: [user_id]})
        found = rows.get(viewer_id)
        if user_id == viewer_id or not found or not found[0].in_viewer_contacts:
            raise ContactIdInvalid()
        photo = None
        if file is not None:
            photo = await self._media.photo_from_upload(viewer_id, file, now, profile=True)
        else:
            await self._media.check_media_rate(viewer_id)

        async def change(conn: asyncpg.Connection) -> None:
            await store.set_personal_photo(
                conn, viewer_id, user_id, None if photo is None else photo.id
            )
            await self._changed_txn(conn, viewer_id, user_id, origin)

        await self._db.run_txn("set_personal_photo", change)
        # The pair (viewer, user) is forgotten with the viewer's pairs.
        self._forget(viewer_id)
        return photo

    # -- what a viewer sees --------------------------------------------------------

    async def photos(
        self, viewer_id: int, user_id: int, *, offset: int, max_id: int, limit: int
    ) -> tuple[int, list[PhotoRow]]:
        """photos.getUserPhotos: the total, and a page of the user's photos first to last
        (``max_id``: from the one after that photo). One who may not see them sees the
        fallback photo alone, if there is one."""
        if not await self._access.allowed(viewer_id, user_id):
            choice = await store.choice(self._db.pool, user_id)
            if choice is None or choice.fallback_photo_id is None:
                return 0, []
            row = (await store.photos_by_ids(self._db.pool, [choice.fallback_photo_id])).get(
                choice.fallback_photo_id
            )
            shown = [] if row is None or offset or max_id else [row]
            return 1, shown
        total = await store.count_photos(self._db.pool, user_id)
        page = await store.list_photos(
            self._db.pool, user_id, after_photo_id=max_id, offset=offset, limit=limit
        )
        return total, page

    async def full(self, viewer_id: int, user_id: int) -> FullPhotos:
        choice = await store.choice(self._db.pool, user_id)
        if choice is None:
            return FullPhotos(None, None, None)
        profile_id = choice.photo_id if await self._access.allowed(viewer_id, user_id) else None
        personal_id = None
        if viewer_id != user_id:
            rows = await self._projection.rows_many({viewer_id: [user_id]})
            found = rows.get(viewer_id)
            if found and found[0].in_viewer_contacts:
                personal_id = found[0].personal_photo_id
        ids = [i for i in (profile_id, personal_id, choice.fallback_photo_id) if i is not None]
        rows_by_id = await store.photos_by_ids(self._db.pool, ids) if ids else {}

        def of(photo_id: int | None) -> PhotoRow | None:
            return None if photo_id is None else rows_by_id.get(photo_id)

        return FullPhotos(of(profile_id), of(personal_id), of(choice.fallback_photo_id))

    async def peer_photo_location(
        self, viewer_id: int, user_id: int, photo_id: int, big: bool
    ) -> FileLocation:
        """upload.getFile's inputPeerPhotoFileLocation: a photo the viewer may see for
        the user (their profile or fallback photo, or the viewer's personal photo for
        them), the big (640 px) or small (160 px) size."""
        owner = await store.profile_photo_user(self._db.pool, photo_id)
        mine = await store.personal_photo_id(self._db.pool, viewer_id, user_id)
        if (owner is None or owner[0] != user_id) and mine != photo_id:
            raise LocationInvalid()
        row = (await store.photos_by_ids(self._db.pool, [photo_id])).get(photo_id)
        if row is None:
            raise LocationInvalid()
        sizes = row.size_rows()
        if not sizes:
            raise LocationInvalid()
        # A small image has only the small size: it serves as both.
        size = sizes[-1] if big else sizes[0]
        # The access check is MediaFiles' (as for a message's photo) when it is read.
        return FileLocation("photo", row.id, row.access_hash, row.file_reference, size.type)
