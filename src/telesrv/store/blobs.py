"""File contents, stored once by their SHA-256 and shared by every object that uses them.

``BlobStore`` is what the services need of a blob backend; ``LocalBlobStore`` keeps the
blobs under a directory of the local filesystem. A blob is written to a temporary file,
flushed to disk and renamed into place, so a reader never sees half a blob and a crash
leaves at most a stray temporary file. Every disk operation runs in a worker thread: the
event loop never waits for the disk.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# What one read of a source file or one write gets: large enough for throughput, small
# enough that a request holds little memory.
CHUNK = 256 * 1024

_KEY = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class StoredBlob:
    key: str  # hex SHA-256 of the content
    size: int
    md5: str  # hex MD5 of the content (uploads may name it to be checked)


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
        md5 = hashlib.md5(usedforsecurity=False)
        size = 0
        try:
            with tmp.open("wb") as f:
                for chunk in chunks:
                    sha.update(chunk)
                    md5.update(chunk)
                    size += len(chunk)
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            if expect_md5 is not None and md5.hexdigest() != expect_md5:
                raise ChecksumMismatch()
            key = sha.hexdigest()
            final = self.path_of(key)
            if final.exists():
                tmp.unlink()  # the same content is stored already: share it
            else:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, final)
                _fsync_dir(final.parent)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return StoredBlob(key=key, size=size, md5=md5.hexdigest())

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
