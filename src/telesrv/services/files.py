"""Photos and documents: made from finished uploads, stored, checked and downloaded.

A finished upload (services.uploads) becomes a photo (JPEG renditions made from it; the
original is not kept) or a document (the file itself), stored in the blob store and
described by a database row. Downloads name the object by id, access hash and file
reference; only what the caller may see is served, in aligned chunks. The server's
reaction-icon documents are read here too, by anyone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from telesrv.services.errors import (
    ChatForwardsRestricted,
    FileIdInvalid,
    FileReferenceEmpty,
    FileReferenceExpired,
    FloodWait,
    ImageProcessFailed,
    LimitInvalid,
    LocationInvalid,
    MediaInvalid,
    OffsetInvalid,
    PhotoInvalidDimensions,
)
from telesrv.services.images import (
    PHOTO_BOXES,
    PROFILE_BOXES,
    THUMB_BOXES,
    ProcessedImage,
    process_image,
)
from telesrv.services.metrics import RATE_LIMITED
from telesrv.services.reaction_icons import Icon, ReactionIcons
from telesrv.services.uploads import KIB, MIB, UploadedFile, Uploads
from telesrv.store import files as file_store
from telesrv.store.blobs import BlobStore
from telesrv.store.db import Db
from telesrv.store.files import DC_ID
from telesrv.store.files import DocumentRow as DocumentRow
from telesrv.store.files import PhotoRow as PhotoRow
from telesrv.store.files import SizeRow as SizeRow
from telesrv.store.rate_limits import RateLimits

MAX_PHOTO_FILE = 10 * MIB
MAX_THUMB_FILE = MIB
# Downloads: a chunk never crosses a 1 MiB boundary of the file.
DOWNLOAD_WINDOW = MIB
# upload.getFileHashes: the pieces hashed.
HASH_PIECE = 128 * KIB


@dataclass(frozen=True)
class FileLocation:
    """What a download names: a photo's or a document's rendition."""

    kind: str  # "photo" | "document"
    id: int
    access_hash: int
    file_reference: bytes
    thumb_size: str  # photos: the size type; documents: "" for the file, else a thumb


@dataclass(frozen=True)
class FileChunk:
    data: bytes
    jpeg: bool  # a photo rendition or thumbnail (JPEG); else the document's bytes
    mtime: int


def check_download_range(offset: int, limit: int, precise: bool) -> None:
    """Telegram's rules for upload.getFile: aligned offset and limit, at most 1 MiB, and
    no chunk across a 1 MiB boundary. ``precise`` relaxes the alignment to 1 KiB."""
    if offset < 0:
        raise OffsetInvalid()
    if limit <= 0 or limit > DOWNLOAD_WINDOW:
        raise LimitInvalid()
    if precise:
        if offset % KIB:
            raise OffsetInvalid()
        if limit % KIB:
            raise LimitInvalid()
    else:
        if offset % (4 * KIB):
            raise OffsetInvalid()
        if limit % (4 * KIB) or DOWNLOAD_WINDOW % limit:
            raise LimitInvalid()
    if offset // DOWNLOAD_WINDOW != (offset + limit - 1) // DOWNLOAD_WINDOW:
        raise LimitInvalid()


def _new_id() -> int:
    return secrets.randbits(63) or 1


def _new_access_hash() -> int:
    return secrets.randbits(64) - (1 << 63)


def _new_file_reference() -> bytes:
    return secrets.token_bytes(16)


# Images decoded at once: each may take some 100 MB and a core for a moment. One user
# decodes one image at a time, so that a user sending many photos at once waits for
# its own and leaves the other workers to everyone else.
IMAGE_WORKERS = 2


class _UserSlots:
    """A lock per user, kept only while someone holds or awaits it."""

    def __init__(self) -> None:
        self._locks: dict[int, tuple[asyncio.Lock, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, user_id: int) -> AsyncIterator[None]:
        lock, users = self._locks.setdefault(user_id, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._locks[user_id]


# (user id, photo id) -> whether the user may see the photo outside any message
PhotoAccess = Callable[[int, int], Awaitable[bool]]


class MediaFiles:
    def __init__(
        self,
        db: Db,
        uploads: Uploads,
        blobs: BlobStore,
        rate_limits: RateLimits | None = None,
        *,
        media_rate_limit: int = 0,
        icons: ReactionIcons | None = None,
        photo_access: PhotoAccess | None = None,
    ) -> None:
        """``media_rate_limit``: uploads one user may make into photos or documents per
        minute (0, or no ``rate_limits``: no limit); ``icons``: the server's own documents,
        readable by anyone; ``photo_access``: whether a user may see a photo held in no
        message of theirs (a profile photo, services/profile_photos.py)."""
        self._db = db
        self._icons = icons
        self._uploads = uploads
        self._blobs = blobs
        self._image_slots = asyncio.Semaphore(IMAGE_WORKERS)
        self._user_image_slots = _UserSlots()
        self._rate_limits = rate_limits
        self._media_rate_limit = media_rate_limit
        self.photo_access = photo_access

    async def _check_media_rate(self, user_id: int) -> None:
        # Before anything is read or decoded: the workers are shared, and a user past
        # the rate would otherwise keep one busy however long they like.
        if self._rate_limits is None:
            return
        wait = await self._rate_limits.media_rate_wait(user_id, self._media_rate_limit)
        if wait:
            RATE_LIMITED.inc()
            raise FloodWait(wait)

    async def check_media_rate(self, user_id: int) -> None:
        """Count one change against the user's media rate (FLOOD_WAIT_X past it): for
        changes made without an upload that are as costly to tell others of (a profile
        photo chosen or deleted)."""
        await self._check_media_rate(user_id)

    async def _image_from_upload(
        self,
        user_id: int,
        file: UploadedFile,
        max_bytes: int,
        boxes: tuple[tuple[str, int], ...],
        square: bool = False,
    ) -> ProcessedImage:
        """Decode a finished upload into renditions. The slots are taken before the
        file is read into memory: requests waiting for one hold no file, so memory stays
        at IMAGE_WORKERS files however many photos are sent at once."""
        async with self._user_image_slots.hold(user_id), self._image_slots:
            data = await self._uploads.finish_to_bytes(
                user_id, file, max_bytes, ImageProcessFailed()
            )
            if square:
                return await asyncio.to_thread(process_image, data, boxes, square=True)
            return await asyncio.to_thread(process_image, data, boxes)

    async def _store_renditions(self, image: ProcessedImage) -> list[SizeRow]:
        rows = []
        for rendition in image.sizes:
            blob = await self._blobs.put_bytes(rendition.jpeg)
            rows.append(SizeRow(rendition.type, rendition.w, rendition.h, blob.size, blob.key))
        return rows

    async def photo_from_upload(
        self,
        user_id: int,
        file: UploadedFile,
        date: int,
        has_stickers: bool = False,
        *,
        profile: bool = False,
    ) -> PhotoRow:
        """``profile``: a profile photo, square in the sizes lists and profiles show."""
        await self._check_media_rate(user_id)
        if profile:
            image = await self._image_from_upload(
                user_id, file, MAX_PHOTO_FILE, PROFILE_BOXES, square=True
            )
        else:
            image = await self._image_from_upload(user_id, file, MAX_PHOTO_FILE, PHOTO_BOXES)
        sizes = await self._store_renditions(image)
        row = PhotoRow(
            id=_new_id(),
            access_hash=_new_access_hash(),
            file_reference=_new_file_reference(),
            owner_user_id=user_id,
            date=date,
            dc_id=DC_ID,
            has_stickers=has_stickers,
            stripped=image.stripped,
            sizes=[s.to_json() for s in sizes],
        )
        await self._db.run_txn("insert_photo", file_store.insert_photo, row)
        return row

    async def document_from_upload(
        self,
        user_id: int,
        file: UploadedFile,
        *,
        mime_type: str,
        attributes: list[bytes],
        thumb: UploadedFile | None,
        date: int,
        force_file: bool = False,
        nosound: bool = False,
    ) -> DocumentRow:
        await self._check_media_rate(user_id)
        thumbs: list[SizeRow] = []
        stripped = None
        if thumb is not None:
            # A thumbnail that is no image is dropped: the document itself is still good.
            try:
                image = await self._image_from_upload(user_id, thumb, MAX_THUMB_FILE, THUMB_BOXES)
            except (ImageProcessFailed, PhotoInvalidDimensions):
                pass
            else:
                thumbs = await self._store_renditions(image)
                stripped = image.stripped
        blob = await self._uploads.finish_to_blob(user_id, file)
        row = DocumentRow(
            id=_new_id(),
            access_hash=_new_access_hash(),
            file_reference=_new_file_reference(),
            owner_user_id=user_id,
            date=date,
            dc_id=DC_ID,
            mime_type=mime_type or "application/octet-stream",
            size=blob.size,
            blob=blob.key,
            attributes=attributes,
            thumbs=[t.to_json() for t in thumbs],
            stripped=stripped,
            force_file=force_file,
            nosound=nosound,
        )
        await self._db.run_txn("insert_document", file_store.insert_document, row)
        return row

    async def _check_access(
        self, user_id: int, kind: str, object_id: int, owner_user_id: int, resend: bool
    ) -> None:
        # The uploader may use its objects as it likes; anyone else those that a message
        # they hold (sent or received, not deleted) carries, and sends one again only if
        # such a message is not protected: that would forward it by other means.
        if owner_user_id == user_id:
            return
        holding = await file_store.media_holding(
            self._db.pool, user_id, kind, object_id, distributed=self._db.distributed
        )
        if holding is None and kind == "photo" and self.photo_access is not None:
            # A profile photo the user may see: downloaded and shown, as a message's.
            if await self.photo_access(user_id, object_id):
                holding = True
        if holding is None:
            raise FileIdInvalid()
        if resend and not holding:
            raise ChatForwardsRestricted()

    async def photo(
        self,
        user_id: int,
        photo_id: int,
        access_hash: int,
        file_reference: bytes | None,
        *,
        resend: bool = False,
    ) -> PhotoRow:
        """The photo the caller names, if it may use it (``file_reference`` None: not
        checked, for references by id and access hash alone; ``resend``: to put it in
        a message, which a protected message does not allow)."""
        if file_reference == b"":
            raise FileReferenceEmpty()
        row = await file_store.get_photo(self._db.pool, photo_id)
        if row is None or row.access_hash != access_hash:
            raise FileIdInvalid()
        await self._check_access(user_id, "photo", row.id, row.owner_user_id, resend)
        if file_reference is not None and file_reference != row.file_reference:
            raise FileReferenceExpired()
        return row

    async def document(
        self,
        user_id: int,
        document_id: int,
        access_hash: int,
        file_reference: bytes | None,
        *,
        resend: bool = False,
    ) -> DocumentRow:
        if file_reference == b"":
            raise FileReferenceEmpty()
        icon = await self._icons.find(document_id, access_hash) if self._icons else None
        if icon is not None:
            if resend:
                raise MediaInvalid()  # shown by apps, never sent in a message
            if file_reference is not None and file_reference != icon.row.file_reference:
                raise FileReferenceExpired()
            return icon.row
        row = await file_store.get_document(self._db.pool, document_id)
        if row is None or row.access_hash != access_hash:
            raise FileIdInvalid()
        await self._check_access(user_id, "document", row.id, row.owner_user_id, resend)
        if file_reference is not None and file_reference != row.file_reference:
            raise FileReferenceExpired()
        return row

    async def read(
        self, user_id: int, location: FileLocation, offset: int, limit: int, precise: bool
    ) -> FileChunk:
        check_download_range(offset, limit, precise)
        icon = await self._icon_at(location)
        if icon is not None:
            await self.document(user_id, location.id, location.access_hash, location.file_reference)
            return FileChunk(icon.data[offset : offset + limit], False, icon.row.date)
        key, size, mtime = await self._blob_of(user_id, location)
        # Photo sizes and thumbnails are JPEGs made here; a document is what was uploaded.
        jpeg = location.kind == "photo" or bool(location.thumb_size)
        if offset >= size:
            return FileChunk(b"", jpeg, mtime)
        data = await self._blobs.read(key, offset, min(limit, size - offset))
        return FileChunk(data, jpeg, mtime)

    async def hashes(
        self, user_id: int, location: FileLocation, offset: int
    ) -> list[tuple[int, int, bytes]]:
        """(offset, length, SHA-256) of the file's 128 KiB pieces in the 1 MiB window
        holding ``offset``, from the piece holding it: what a client checks downloaded
        chunks against."""
        if offset < 0:
            raise OffsetInvalid()
        icon = await self._icon_at(location)
        if icon is not None:
            await self.document(user_id, location.id, location.access_hash, location.file_reference)
            if offset >= len(icon.data):
                return []
            return [(0, len(icon.data), hashlib.sha256(icon.data).digest())]
        key, size, _ = await self._blob_of(user_id, location)
        start = offset - offset % HASH_PIECE
        end = min(size, start - start % DOWNLOAD_WINDOW + DOWNLOAD_WINDOW)
        out = []
        for piece in range(start, end, HASH_PIECE):
            data = await self._blobs.read(key, piece, min(HASH_PIECE, size - piece))
            out.append((piece, len(data), hashlib.sha256(data).digest()))
        return out

    async def _icon_at(self, location: FileLocation) -> Icon | None:
        if self._icons is None or location.kind != "document":
            return None
        icon = await self._icons.find(location.id, location.access_hash)
        if icon is not None and location.thumb_size:
            raise LocationInvalid()  # an icon has no thumbnails
        return icon

    async def _blob_of(self, user_id: int, location: FileLocation) -> tuple[str, int, int]:
        """The blob a location names, its size and the object's date."""
        if location.kind == "photo":
            photo = await self.photo(
                user_id, location.id, location.access_hash, location.file_reference
            )
            size = _size_named(photo.size_rows(), location.thumb_size)
            return size.blob, size.size, photo.date
        document = await self.document(
            user_id, location.id, location.access_hash, location.file_reference
        )
        if not location.thumb_size:
            return document.blob, document.size, document.date
        thumb = _size_named(document.thumb_rows(), location.thumb_size)
        return thumb.blob, thumb.size, document.date


def _size_named(sizes: list[SizeRow], thumb_size: str) -> SizeRow:
    for size in sizes:
        if size.type == thumb_size:
            return size
    raise LocationInvalid()
