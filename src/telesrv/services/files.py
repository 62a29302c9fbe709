"""Uploads, photos and documents, and downloads of them.

An upload is a (user, file id) the client picks; its parts are saved as they arrive
(any order, in parallel) and the file is finished when a request names it
(inputFile/inputFileBig). Parts follow Telegram's rules: at most 512 KiB, every part
but the last the same size, a multiple of 1 KiB that divides 512 KiB; at most 4,000
parts; saveFilePart files up to 10 MiB, bigger ones through saveBigFilePart, which
names the part count with every part. Each user holds a bounded number of unfinished
uploads and bytes; an upload idle for ``idle_ttl`` seconds is removed.

A finished upload becomes a photo (JPEG renditions made from it; the original is not
kept) or a document (the file itself), stored in the blob store and described by a
database row. Downloads name the object by id, access hash and file reference; only
what the caller may see is served, in aligned chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from telesrv.services.errors import (
    ChatForwardsRestricted,
    FileIdInvalid,
    FilePartEmpty,
    FilePartInvalid,
    FilePartMissing,
    FilePartsInvalid,
    FilePartSizeChanged,
    FilePartSizeInvalid,
    FilePartTooBig,
    FileReferenceEmpty,
    FileReferenceExpired,
    FloodWait,
    ImageProcessFailed,
    LimitInvalid,
    LocationInvalid,
    Md5ChecksumInvalid,
    MediaInvalid,
    OffsetInvalid,
    PhotoInvalidDimensions,
)
from telesrv.services.images import PHOTO_BOXES, THUMB_BOXES, ProcessedImage, process_image
from telesrv.services.metrics import RATE_LIMITED
from telesrv.services.reaction_icons import Icon, ReactionIcons
from telesrv.store import files as file_store
from telesrv.store.blobs import BlobStore, ChecksumMismatch, StoredBlob
from telesrv.store.counters import Counters
from telesrv.store.db import Db
from telesrv.store.files import DocumentRow as DocumentRow
from telesrv.store.files import PhotoRow as PhotoRow
from telesrv.store.files import SizeRow as SizeRow
from telesrv.store.uploads import PartsTooBig, UploadArea, UploadQuota

log = logging.getLogger(__name__)

KIB = 1024
MIB = 1024 * KIB
MAX_PART_SIZE = 512 * KIB
MAX_PARTS = 4000  # 4,000 parts of 512 KiB: files up to 2,000 MiB
MAX_SMALL_FILE = 10 * MIB
MAX_PHOTO_FILE = 10 * MIB
MAX_THUMB_FILE = MIB
# Downloads: a chunk never crosses a 1 MiB boundary of the file.
DOWNLOAD_WINDOW = MIB
# upload.getFileHashes: the pieces hashed.
HASH_PIECE = 128 * KIB
DC_ID = 2
# How long a user over an upload bound is asked to wait (uploads finish or expire).
UPLOAD_FLOOD_SECONDS = 30


@dataclass(frozen=True)
class UploadLimits:
    max_uploads_per_user: int = 64
    max_bytes_per_user: int = 4 * 1024 * MIB
    idle_ttl: float = 3600.0
    cleanup_interval: float = 300.0


@dataclass(frozen=True)
class UploadedFile:
    """A finished upload as a request names it (inputFile / inputFileBig)."""

    id: int
    parts: int
    name: str
    big: bool
    md5: str = ""  # hex, small files only; empty: not checked


@dataclass
class _Upload:
    big: bool
    total_parts: int | None  # saveBigFilePart names it; saveFilePart does not
    parts: dict[int, int] = field(default_factory=dict)  # part -> bytes
    size: int = 0  # the sum of parts, kept as they change
    writes: int = 0  # parts begun, so that a look at the disk can tell it is stale


def _aligned_part_size(size: int) -> bool:
    return size % KIB == 0 and MAX_PART_SIZE % size == 0


class Uploads:
    """Unfinished uploads: their parts, checked and counted as they arrive, and the
    per-user bounds. This process counts the uploads it saw parts of (which bounds its
    memory); ``quota``, when given, counts every process's, so that the bounds hold for
    a user whose parts arrive at several."""

    def __init__(
        self,
        area: UploadArea,
        blobs: BlobStore,
        limits: UploadLimits,
        quota: UploadQuota | None = None,
    ) -> None:
        self._area = area
        self._blobs = blobs
        self.limits = limits
        self._quota = quota
        self._open: dict[tuple[int, int], _Upload] = {}
        # user -> the file ids of their unfinished uploads, and those uploads' bytes
        self._per_user: dict[int, set[int]] = {}
        self._user_bytes: dict[int, int] = {}
        self._removing: set[asyncio.Future[None]] = set()  # finished uploads going away
        # Uploads with a part between its count and its write: the cleanup leaves them
        # be, as their directory may not be there yet.
        self._writing: dict[tuple[int, int], int] = {}

    def user_bytes(self, user_id: int) -> int:
        return self._user_bytes.get(user_id, 0)

    def _set_part(self, user_id: int, upload: _Upload, part: int, size: int | None) -> None:
        """Record part ``part`` as ``size`` bytes (None: absent), keeping the sums."""
        change = (size or 0) - upload.parts.get(part, 0)
        if size is None:
            upload.parts.pop(part, None)
        else:
            upload.parts[part] = size
        upload.size += change
        self._user_bytes[user_id] = self._user_bytes.get(user_id, 0) + change

    async def save_part(
        self, user_id: int, file_id: int, part: int, data: bytes, total_parts: int | None = None
    ) -> None:
        """One part of a saveFilePart (``total_parts`` None) or saveBigFilePart upload."""
        big = total_parts is not None
        if total_parts is not None and not 1 <= total_parts <= MAX_PARTS:
            raise FilePartsInvalid()
        if not 0 <= part < (total_parts if total_parts is not None else MAX_PARTS):
            raise FilePartInvalid()
        if not data:
            raise FilePartEmpty()
        if len(data) > MAX_PART_SIZE:
            raise FilePartTooBig()
        if (
            total_parts is not None
            and part != total_parts - 1
            and not _aligned_part_size(len(data))
        ):
            raise FilePartSizeInvalid()  # only the last part may be of any size
        key = (user_id, file_id)
        if self._at_bound(user_id, key, len(data)):
            await self._forget_gone(user_id)
        upload = self._open.get(key)
        new = upload is None
        if upload is None:
            if len(self._per_user.get(user_id, ())) >= self.limits.max_uploads_per_user:
                raise FloodWait(UPLOAD_FLOOD_SECONDS)
            upload = _Upload(big=big, total_parts=total_parts)
        elif upload.big != big or upload.total_parts != total_parts:
            raise FilePartsInvalid()
        previous = upload.parts.get(part)
        growth = len(data) - (previous or 0)
        if not big and upload.size + growth > MAX_SMALL_FILE:
            raise FilePartsInvalid()  # a file this large needs saveBigFilePart
        if self.user_bytes(user_id) + growth > self.limits.max_bytes_per_user:
            raise FloodWait(UPLOAD_FLOOD_SECONDS)
        # Counted before the write (and before the shared count is asked) so that
        # parallel parts cannot overrun the bounds.
        self._open[key] = upload
        self._per_user.setdefault(user_id, set()).add(file_id)
        self._set_part(user_id, upload, part, len(data))
        upload.writes += 1
        shared = False  # whether the shared count may hold this part
        self._writing[key] = self._writing.get(key, 0) + 1
        try:
            if self._quota is not None:
                shared = True  # also when the answer is lost (an error, a cancellation)
                if not await self._quota.reserve(user_id, file_id, growth):
                    shared = False
                    raise FloodWait(UPLOAD_FLOOD_SECONDS)
            # A part whose write fails stays charged to the shared count until its
            # upload is finished or removed: only ever stricter.
            await self._area.write_part(user_id, file_id, part, data)
        except BaseException:
            if self._open.get(key) is upload:
                self._set_part(user_id, upload, part, previous)
                # A new upload the shared count may hold stays known here, empty, so
                # that ``expire`` frees its place (it finds no directory, or an idle
                # one); forgotten now, its place would stay taken while the user uploads.
                if new and not upload.parts and not shared:
                    self._drop(user_id, file_id)  # never taken: no place kept for it
            raise
        finally:
            left = self._writing[key] - 1
            if left:
                self._writing[key] = left
            else:
                del self._writing[key]

    def _at_bound(self, user_id: int, key: tuple[int, int], size: int) -> bool:
        """Whether a part of ``size`` bytes may be past a bound here (a cheap check)."""
        if key not in self._open and (
            len(self._per_user.get(user_id, ())) >= self.limits.max_uploads_per_user
        ):
            return True
        return self.user_bytes(user_id) + size > self.limits.max_bytes_per_user

    async def _forget_gone(self, user_id: int) -> None:
        """Forget the user's uploads whose directory is gone, and free their places: an
        upload finished through another process (which removed its parts) is still
        counted here until the cleanup; without this, a user whose parts and finishes
        reach different processes would be refused for what they already finished."""
        known = {
            file_id: (upload, upload.writes)
            for file_id in self._per_user.get(user_id, ())
            if (upload := self._open.get((user_id, file_id))) is not None
        }
        if not known:
            return
        on_disk = await self._area.uploads_of(user_id)
        gone: list[tuple[int, int]] = []
        for file_id, (upload, writes) in known.items():
            key = (user_id, file_id)
            if file_id in on_disk or self._open.get(key) is not upload:
                continue
            # A part on its way to disk, or one begun since the look, may have made
            # the directory after it.
            if key in self._writing or upload.writes != writes:
                continue
            self._drop(user_id, file_id)
            gone.append(key)
        await self._release(gone)

    async def _checked_parts(self, user_id: int, file: UploadedFile) -> int:
        """Check the finished upload against its parts on disk; its size in bytes."""
        if not 1 <= file.parts <= MAX_PARTS:
            raise FilePartsInvalid()
        upload = self._open.get((user_id, file.id))
        if upload is not None:
            if upload.big != file.big:
                raise FilePartsInvalid()  # saved as a small file, named as a big one or so
            if upload.total_parts is not None and upload.total_parts != file.parts:
                raise FilePartsInvalid()
        # The disk is the record of what arrived (also across a restart).
        sizes = await self._area.part_sizes(user_id, file.id)
        for part in range(file.parts):
            if part not in sizes:
                raise FilePartMissing(part)
        if any(part >= file.parts for part in sizes):
            raise FilePartsInvalid()
        part_size = sizes[0]
        if file.parts > 1:
            if not _aligned_part_size(part_size):
                raise FilePartSizeInvalid()
            if any(sizes[p] != part_size for p in range(file.parts - 1)):
                raise FilePartSizeChanged()
            if sizes[file.parts - 1] > part_size:
                raise FilePartSizeChanged()
        total = sum(sizes.values())
        if not file.big and total > MAX_SMALL_FILE:
            raise FilePartsInvalid()
        return total

    async def finish_to_blob(self, user_id: int, file: UploadedFile) -> StoredBlob:
        """Store the finished upload as a blob (MD5 checked if named) and forget it."""
        await self._checked_parts(user_id, file)
        paths = [self._area.part_path(user_id, file.id, p) for p in range(file.parts)]
        md5 = file.md5.lower() if not file.big and file.md5 else None
        try:
            blob = await self._blobs.put_files(paths, expect_md5=md5)
        except ChecksumMismatch:
            raise Md5ChecksumInvalid() from None
        except FileNotFoundError:
            raise FilePartMissing(0) from None  # removed meanwhile (expired, finished twice)
        await self._forget(user_id, file.id)
        return blob

    async def finish_to_bytes(
        self, user_id: int, file: UploadedFile, max_bytes: int, too_big: Exception
    ) -> bytes:
        """The finished upload's bytes (``too_big`` raised beyond ``max_bytes``)."""
        total = await self._checked_parts(user_id, file)
        if total > max_bytes:
            raise too_big
        try:
            data = await self._area.read_parts(user_id, file.id, file.parts, max_bytes)
        except FileNotFoundError:
            raise FilePartMissing(0) from None
        except PartsTooBig:
            raise too_big from None  # parts rewritten larger since they were checked
        if not file.big and file.md5:
            if hashlib.md5(data, usedforsecurity=False).hexdigest() != file.md5.lower():
                raise Md5ChecksumInvalid()
        await self._forget(user_id, file.id)
        return data

    def _drop(self, user_id: int, file_id: int) -> None:
        upload = self._open.pop((user_id, file_id), None)
        if upload is not None:
            left = self._user_bytes.get(user_id, 0) - upload.size
            if left:
                self._user_bytes[user_id] = left
            else:
                self._user_bytes.pop(user_id, None)
        files = self._per_user.get(user_id)
        if files is not None:
            files.discard(file_id)
            if not files:
                del self._per_user[user_id]

    async def _forget(self, user_id: int, file_id: int) -> None:
        self._drop(user_id, file_id)
        # Shielded: a cancelled request (its answer dropped) still removes the parts,
        # since the thread removing them goes on anyway, and must then free the place;
        # nothing else would, the upload being gone from here and from disk.
        task = asyncio.ensure_future(self._remove(user_id, file_id))
        self._removing.add(task)
        task.add_done_callback(self._removing.discard)
        await asyncio.shield(task)

    async def wait_removals(self, timeout: float | None = None) -> None:
        """Let the removals of finished uploads end (they outlive a cancelled request):
        at shutdown, so that their places are freed before Redis is closed."""
        if self._removing:
            await asyncio.wait(list(self._removing), timeout=timeout)

    async def _remove(self, user_id: int, file_id: int) -> None:
        await self._area.remove(user_id, file_id)
        await self._release([(user_id, file_id)])

    async def _release(self, uploads: list[tuple[int, int]]) -> None:
        """Free the shared count's places of these uploads. A failure is only logged:
        the upload is gone either way, and its place comes free once it has been idle
        for as long as the count keeps an upload with no new part."""
        if self._quota is None or not uploads:
            return
        by_user: dict[int, list[int]] = {}
        for user_id, file_id in uploads:
            by_user.setdefault(user_id, []).append(file_id)
        for user_id, file_ids in by_user.items():
            try:
                await self._quota.release(user_id, file_ids)
            except Exception:
                log.warning("could not free the upload places of user %d", user_id, exc_info=True)

    async def expire(self, now: float) -> int:
        """Remove uploads idle for ``idle_ttl`` seconds (also those on disk from before,
        or of another process); returns how many were on disk."""
        removed = await self._area.remove_idle(now - self.limits.idle_ttl)
        await self._release(removed)
        # Also uploads whose every write failed (they never got a directory), or that
        # another process finished.
        for user_id in list(self._per_user):
            await self._forget_gone(user_id)
        return len(removed)

    async def run_cleanup(self, clock: Callable[[], float] = time.time) -> None:
        """The periodic task: expire idle uploads at start (a previous process may have
        left some on disk) and then every ``cleanup_interval`` seconds."""
        while True:
            try:
                removed = await self.expire(clock())
                if removed:
                    log.info("removed %d idle uploads", removed)
            except Exception:
                log.warning("upload cleanup failed; trying again later", exc_info=True)
            await asyncio.sleep(self.limits.cleanup_interval)


# -- photos and documents ------------------------------------------------------------


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


class MediaFiles:
    def __init__(
        self,
        db: Db,
        uploads: Uploads,
        blobs: BlobStore,
        counters: Counters | None = None,
        *,
        media_rate_limit: int = 0,
        icons: ReactionIcons | None = None,
    ) -> None:
        """``media_rate_limit``: uploads one user may make into photos or documents per
        minute (0, or no ``counters``: no limit); ``icons``: the server's own documents,
        readable by anyone."""
        self._db = db
        self._icons = icons
        self._uploads = uploads
        self._blobs = blobs
        self._image_slots = asyncio.Semaphore(IMAGE_WORKERS)
        self._user_image_slots = _UserSlots()
        self._counters = counters
        self._media_rate_limit = media_rate_limit

    async def _check_media_rate(self, user_id: int) -> None:
        # Before anything is read or decoded: the workers are shared, and a user past
        # the rate would otherwise keep one busy however long they like.
        if self._counters is None:
            return
        wait = await self._counters.media_rate_wait(user_id, self._media_rate_limit)
        if wait:
            RATE_LIMITED.inc()
            raise FloodWait(wait)

    async def _image_from_upload(
        self, user_id: int, file: UploadedFile, max_bytes: int, boxes: tuple[tuple[str, int], ...]
    ) -> ProcessedImage:
        """Decode a finished upload into renditions. The slots are taken before the
        file is read into memory: requests waiting for one hold no file, so memory stays
        at IMAGE_WORKERS files however many photos are sent at once."""
        async with self._user_image_slots.hold(user_id), self._image_slots:
            data = await self._uploads.finish_to_bytes(
                user_id, file, max_bytes, ImageProcessFailed()
            )
            return await asyncio.to_thread(process_image, data, boxes)

    async def _store_renditions(self, image: ProcessedImage) -> list[SizeRow]:
        rows = []
        for rendition in image.sizes:
            blob = await self._blobs.put_bytes(rendition.jpeg)
            rows.append(SizeRow(rendition.type, rendition.w, rendition.h, blob.size, blob.key))
        return rows

    async def photo_from_upload(
        self, user_id: int, file: UploadedFile, date: int, has_stickers: bool = False
    ) -> PhotoRow:
        await self._check_media_rate(user_id)
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
        holding = await file_store.media_holding(self._db.pool, user_id, kind, object_id)
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
