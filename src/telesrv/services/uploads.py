"""Uploads: the parts of a file a client sends, and the file they make when finished.

An upload is a (user, file id) the client picks; its parts are saved as they arrive
(any order, in parallel) and the file is finished when a request names it
(inputFile/inputFileBig). Parts follow Telegram's rules: at most 512 KiB, every part
but the last the same size, a multiple of 1 KiB that divides 512 KiB; at most 4,000
parts; saveFilePart files up to 10 MiB, bigger ones through saveBigFilePart, which
names the part count with every part. Each user holds a bounded number of unfinished
uploads and bytes; an upload idle for ``idle_ttl`` seconds is removed.

A finished upload is handed over as a blob or as bytes, and forgotten; what it becomes
(a photo, a document) is services.files.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from telesrv.services.errors import (
    FilePartEmpty,
    FilePartInvalid,
    FilePartMissing,
    FilePartsInvalid,
    FilePartSizeChanged,
    FilePartSizeInvalid,
    FilePartTooBig,
    FloodWait,
    Md5ChecksumInvalid,
)
from telesrv.store.blobs import BlobStore, ChecksumMismatch, StoredBlob
from telesrv.store.uploads import PartsTooBig, UploadArea, UploadQuota

log = logging.getLogger(__name__)

KIB = 1024
MIB = 1024 * KIB
MAX_PART_SIZE = 512 * KIB
MAX_PARTS = 4000  # 4,000 parts of 512 KiB: files up to 2,000 MiB
MAX_SMALL_FILE = 10 * MIB
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
