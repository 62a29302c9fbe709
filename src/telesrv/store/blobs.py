"""File contents, stored once by their SHA-256 and shared by every object that uses them.

``BlobStore`` is what the services need of a blob backend; ``LocalBlobStore`` keeps the
blobs under a directory of the local filesystem. A blob is written to a temporary file,
flushed to disk and renamed into place, so a reader never sees half a blob and a crash
leaves at most a stray temporary file. Every disk operation runs in a worker thread: the
event loop never waits for the disk.

Blobs no row refers to any more are found by listing the keys (a directory at a time)
and asking the database which of them are in use; a blob's mtime is its last write, and
the collector spares recent ones, whose rows may not be committed yet.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# What one read of a source file or one write gets: large enough for throughput, small
# enough that a request holds little memory.
CHUNK = 256 * 1024

_KEY = re.compile(r"^[0-9a-f]{64}$")
_PREFIX = re.compile(r"^[0-9a-f]{2}$")
# Temporary names of blobs the collector is removing (see remove_unless_newer).
_GC_PREFIX = "gc-"


@dataclass(frozen=True)
class StoredBlob:
    key: str  # hex SHA-256 of the content
    size: int
    md5: str  # hex MD5 of the content when one was expected (checked), else ""


class BlobNotFound(LookupError):
    """No blob has this key."""


class ChecksumMismatch(ValueError):
    """The content's MD5 is not the expected one; nothing was stored."""


class BlobStore(Protocol):
    async def put_files(self, paths: Iterable[Path], expect_md5: str | None = None) -> StoredBlob:
        """Store the concatenation of the given files (read in chunks, in order);
        ChecksumMismatch, storing nothing, if its MD5 is not ``expect_md5``."""

    async def put_bytes(self, data: bytes) -> StoredBlob:
        """Store a small blob made in memory (a thumbnail)."""

    async def read(self, key: str, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes from ``offset`` (fewer at the end, none past it)."""

    async def size(self, key: str) -> int:
        """The blob's length; BlobNotFound if it does not exist."""

    async def exists(self, key: str) -> bool: ...

    async def delete(self, key: str) -> None:
        """Remove the blob (callers make sure nothing refers to it any more)."""

    def keys_older_than(self, cutoff: float, batch: int) -> AsyncIterator[list[str]]:
        """The keys of blobs last written before ``cutoff`` (epoch seconds), in lists of
        at most ``batch``, without holding the whole store's listing."""

    async def remove_unless_newer(self, key: str, cutoff: float) -> bool:
        """Remove the blob unless it was written at ``cutoff`` or later (a new row may
        be about to share it); True if removed."""

    async def remove_stale_temporaries(self, cutoff: float) -> int:
        """Remove temporary files (of writes a crash interrupted) older than ``cutoff``."""


def _chunks_of(paths: Iterable[Path]) -> Iterator[bytes]:
    for path in paths:
        with path.open("rb") as f:
            while chunk := f.read(CHUNK):
                yield chunk


class LocalBlobStore:
    """Blobs as files ``<root>/<ab>/<cd>/<sha256>``; temporary files in ``<root>/tmp``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_of(self, key: str) -> Path:
        if not _KEY.match(key):
            raise BlobNotFound(key)
        return self.root / key[:2] / key[2:4] / key

    async def put_files(self, paths: Iterable[Path], expect_md5: str | None = None) -> StoredBlob:
        listed = list(paths)
        return await asyncio.to_thread(self._put_chunks, _chunks_of(listed), expect_md5)

    async def put_bytes(self, data: bytes) -> StoredBlob:
        return await asyncio.to_thread(self._put_chunks, iter((data,)))

    def _put_chunks(self, chunks: Iterator[bytes], expect_md5: str | None = None) -> StoredBlob:
        tmp_dir = self.root / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        tmp = tmp_dir / secrets.token_hex(16)
        sha = hashlib.sha256()
        # MD5 costs more than twice SHA-256: computed only when there is one to check.
        md5 = hashlib.md5(usedforsecurity=False) if expect_md5 is not None else None
        size = 0
        try:
            with tmp.open("wb") as f:
                for chunk in chunks:
                    sha.update(chunk)
                    if md5 is not None:
                        md5.update(chunk)
                    size += len(chunk)
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            if md5 is not None and md5.hexdigest() != expect_md5:
                raise ChecksumMismatch()
            key = sha.hexdigest()
            final = self.path_of(key)
            if _touch(final):
                tmp.unlink()  # the same content is stored already: share it
            else:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, final)
                _fsync_dir(final.parent)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return StoredBlob(key=key, size=size, md5="" if md5 is None else md5.hexdigest())

    async def read(self, key: str, offset: int, limit: int) -> bytes:
        path = self.path_of(key)
        return await asyncio.to_thread(_pread, path, offset, limit)

    async def size(self, key: str) -> int:
        path = self.path_of(key)
        try:
            return (await asyncio.to_thread(path.stat)).st_size
        except FileNotFoundError:
            raise BlobNotFound(key) from None

    async def exists(self, key: str) -> bool:
        try:
            path = self.path_of(key)
        except BlobNotFound:
            return False
        return await asyncio.to_thread(path.exists)

    async def delete(self, key: str) -> None:
        path = self.path_of(key)
        await asyncio.to_thread(path.unlink, True)

    async def keys_older_than(self, cutoff: float, batch: int) -> AsyncIterator[list[str]]:
        # One leaf directory (1/65536 of the keys) is listed at a time.
        pending: list[str] = []
        for top in await asyncio.to_thread(_prefix_dirs, self.root):
            for leaf in await asyncio.to_thread(_prefix_dirs, top):
                pending += await asyncio.to_thread(_old_keys_in, leaf, cutoff)
                while len(pending) >= batch:
                    yield pending[:batch]
                    del pending[:batch]
        if pending:
            yield pending

    async def remove_unless_newer(self, key: str, cutoff: float) -> bool:
        return await asyncio.to_thread(self._remove_unless_newer, key, cutoff)

    def _remove_unless_newer(self, key: str, cutoff: float) -> bool:
        # The blob is first moved aside, then its mtime read: a writer that shares it
        # touches it in place (or, finding it gone, stores it anew), so a touch either
        # happened before the move and shows here, or fails and leaves the writer's
        # own copy in place. A blob found new is put back.
        final = self.path_of(key)
        tmp_dir = self.root / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        aside = tmp_dir / f"{_GC_PREFIX}{key}.{secrets.token_hex(8)}"
        try:
            os.rename(final, aside)
        except FileNotFoundError:
            return False
        try:
            if aside.stat().st_mtime >= cutoff:
                try:
                    os.link(aside, final)
                except FileExistsError:
                    pass  # stored anew meanwhile: the same content
                return False
        except FileNotFoundError:
            return False  # another process's collector took it as a stale temporary
        finally:
            aside.unlink(missing_ok=True)
        return True

    async def remove_stale_temporaries(self, cutoff: float) -> int:
        return await asyncio.to_thread(self._remove_stale_temporaries, cutoff)

    def _remove_stale_temporaries(self, cutoff: float) -> int:
        removed = 0
        try:
            entries = list(os.scandir(self.root / "tmp"))
        except FileNotFoundError:
            return 0
        for entry in entries:
            try:
                if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:
                continue  # finished or removed meanwhile
        return removed


def _prefix_dirs(path: Path) -> list[Path]:
    """The two-hex-digit subdirectories of ``path``, in order."""
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return []
    return sorted(
        Path(e.path) for e in entries if _PREFIX.match(e.name) and e.is_dir(follow_symlinks=False)
    )


def _old_keys_in(leaf: Path, cutoff: float) -> list[str]:
    keys: list[str] = []
    try:
        entries = list(os.scandir(leaf))
    except FileNotFoundError:
        return keys
    for entry in entries:
        if not _KEY.match(entry.name):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                keys.append(entry.name)
        except FileNotFoundError:
            continue
    keys.sort()
    return keys


def _touch(path: Path) -> bool:
    """Mark an existing blob as just written (False if there is none).

    The garbage collector spares blobs written within its grace period: a blob shared
    by a new row must look new even when its file is old, or the collector could
    remove it between this write and the row's commit."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    return True


def _pread(path: Path, offset: int, limit: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise BlobNotFound(path.name) from None
    try:
        return os.pread(fd, limit, offset)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """Make a rename durable: the directory entry is data too."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
