"""photos.*: profile photos (upload, choose, delete, list) and personal photos for
contacts (TL <-> domain; the rules are in services.profile_photos)."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.media import photo_tl
from telesrv.rpc.peers import Peers
from telesrv.rpc.profile_pushes import ProfilePushes
from telesrv.rpc.registry import method
from telesrv.rpc.uploads import uploaded_file
from telesrv.rpc.users_tl import UsersTl
from telesrv.services.accounts import Origin
from telesrv.services.errors import UserIdInvalid
from telesrv.services.profile_photos import MAX_PAGE, ProfilePhotos
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import (
    LimitInvalid,
    PhotoFileMissing,
    PhotoSuggestUnsupported,
    VideoProfilePhotoUnsupported,
)

# photos.deletePhotos: at most this many ids a call (a whole list of profile photos).
MAX_DELETE = 100


def _refuse_video(
    req: functions.photos.UploadProfilePhoto | functions.photos.UploadContactProfilePhoto,
) -> None:
    # Video and animated-sticker avatars would need video sizes this server does not make.
    if req.video is not None or req.video_emoji_markup is not None:
        raise VideoProfilePhotoUnsupported()


class ProfilePhotoHandlers:
    def __init__(
        self,
        profile_photos: ProfilePhotos,
        peers: Peers,
        users_tl: UsersTl,
        profile_pushes: ProfilePushes | None = None,
    ) -> None:
        self._photos = profile_photos
        self._peers = peers
        self._users_tl = users_tl
        self._pushes = profile_pushes  # None: changes are stored, not pushed

    def _tell_watchers(self, user_id: int, now: float) -> None:
        """Those who have the user in their dialogs or contacts hear of the new photo
        if online (updateUser with the user as each sees them), in the background and
        paced as status and name changes are: not logged, as Telegram does; whoever
        misses it gets the photo with the next answer carrying the user (the dialog
        list an app loads when it starts, a history, a push)."""
        if self._pushes is not None:
            self._pushes.photo_changed(user_id, now)

    async def _answer(self, ctx: AuthedContext, photo: types.TypePhoto, user_id: int) -> TLObject:
        user = await self._users_tl.one(ctx.user_id, user_id, ctx.now)
        return types.photos.Photo(photo=photo, users=[user])

    @method(functions.photos.UploadProfilePhoto)
    async def upload_profile_photo(
        self, ctx: AuthedContext, req: functions.photos.UploadProfilePhoto
    ) -> TLObject:
        if req.bot is not None:
            raise UserIdInvalid()  # no bots here to set a photo for
        _refuse_video(req)
        if req.file is None:
            raise PhotoFileMissing()
        photo = await self._photos.upload(
            ctx.user_id,
            uploaded_file(req.file),
            fallback=bool(req.fallback),
            now=int(ctx.now),
            origin=Origin(ctx.auth_key_id, ctx.session_id),
        )
        self._tell_watchers(ctx.user_id, ctx.now)
        return await self._answer(ctx, photo_tl(photo), ctx.user_id)

    @method(functions.photos.UpdateProfilePhoto)
    async def update_profile_photo(
        self, ctx: AuthedContext, req: functions.photos.UpdateProfilePhoto
    ) -> TLObject:
        if req.bot is not None:
            raise UserIdInvalid()
        chosen = None
        if isinstance(req.id, types.InputPhoto):
            chosen = (req.id.id, req.id.access_hash)
        row = await self._photos.set_current(
            ctx.user_id,
            chosen,
            fallback=bool(req.fallback),
            origin=Origin(ctx.auth_key_id, ctx.session_id),
        )
        self._tell_watchers(ctx.user_id, ctx.now)
        photo: types.TypePhoto = types.PhotoEmpty(id=0) if row is None else photo_tl(row)
        return await self._answer(ctx, photo, ctx.user_id)

    @method(functions.photos.DeletePhotos)
    async def delete_photos(
        self, ctx: AuthedContext, req: functions.photos.DeletePhotos
    ) -> list[int]:
        if len(req.id) > MAX_DELETE:
            raise LimitInvalid()
        wanted = [(p.id, p.access_hash) for p in req.id if isinstance(p, types.InputPhoto)]
        gone = await self._photos.delete(
            ctx.user_id, wanted, Origin(ctx.auth_key_id, ctx.session_id)
        )
        if gone:
            self._tell_watchers(ctx.user_id, ctx.now)
        return gone

    @method(functions.photos.GetUserPhotos)
    async def get_user_photos(
        self, ctx: AuthedContext, req: functions.photos.GetUserPhotos
    ) -> TLObject:
        if not 0 <= req.limit <= MAX_PAGE or req.offset < 0:
            raise LimitInvalid()
        user_id = await self._peers.resolve_input_user(ctx, req.user_id)
        total, page = await self._photos.photos(
            ctx.user_id, user_id, offset=req.offset, max_id=req.max_id, limit=req.limit
        )
        photos: list[types.TypePhoto] = [photo_tl(p) for p in page]
        # A photo mentions no user: the list of users is empty, as Telegram's is.
        if req.offset == 0 and req.max_id == 0 and len(photos) == total:
            return types.photos.Photos(photos=photos, users=[])
        return types.photos.PhotosSlice(count=total, photos=photos, users=[])

    @method(functions.photos.UploadContactProfilePhoto)
    async def upload_contact_profile_photo(
        self, ctx: AuthedContext, req: functions.photos.UploadContactProfilePhoto
    ) -> TLObject:
        if req.suggest:
            raise PhotoSuggestUnsupported()
        _refuse_video(req)
        user_id = await self._peers.resolve_input_user(ctx, req.user_id)
        # Without a file, ``save`` takes the personal photo away; without either,
        # nothing was asked.
        if req.file is None and not req.save:
            raise PhotoFileMissing()
        row = await self._photos.set_personal(
            ctx.user_id,
            user_id,
            None if req.file is None else uploaded_file(req.file),
            now=int(ctx.now),
            origin=Origin(ctx.auth_key_id, ctx.session_id),
        )
        photo: types.TypePhoto = types.PhotoEmpty(id=0) if row is None else photo_tl(row)
        return await self._answer(ctx, photo, user_id)
