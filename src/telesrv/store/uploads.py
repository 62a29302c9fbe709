"""Unfinished uploads on disk: one directory per (user, file id), one file per part.

Each part goes to its own file as it arrives, so parts may come in any order and in
parallel, and no upload is ever held in memory. A part is written to a temporary name
and renamed, so a repeated part replaces the old one whole. The directory's mtime is
the upload's last activity (a rename touches it): idle uploads are found by it, also
those a previous process left behind.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
from pathlib import Path


class PartsTooBig(Exception):
    """The parts hold more bytes than the reader takes."""


def _read_bounded(paths: list[Path], max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    left = max_bytes
    for path in paths:
        with path.open("rb") as f:
            chunk = f.read(left + 1)
        left -= len(chunk)
        if left < 0:
            raise PartsTooBig()
        chunks.append(chunk)
    return b"".join(chunks)


class UploadArea:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _dir(self, user_id: int, file_id: int) -> Path:
        return self.root / str(user_id) / str(file_id)

    def part_path(self, user_id: int, file_id: int, part: int) -> Path:
        return self._dir(user_id, file_id) / str(part)

    async def write_part(self, user_id: int, file_id: int, part: int, data: bytes) -> None:
        await asyncio.to_thread(self._write_part, user_id, file_id, part, data)

    def _write_part(self, user_id: int, file_id: int, part: int, data: bytes) -> None:
        directory = self._dir(user_id, file_id)
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{part}.{secrets.token_hex(8)}"
        tmp.write_bytes(data)
        os.replace(tmp, directory / str(part))

    async def part_sizes(self, user_id: int, file_id: int) -> dict[int, int]:
        """part number -> bytes, for the parts on disk (none for an unknown upload)."""
        return await asyncio.to_thread(self._part_sizes, user_id, file_id)

    def _part_sizes(self, user_id: int, file_id: int) -> dict[int, int]:
        sizes: dict[int, int] = {}
        try:
            entries = list(os.scandir(self._dir(user_id, file_id)))
        except FileNotFoundError:
            return sizes
        for entry in entries:
            if entry.name.isdigit():
                sizes[int(entry.name)] = entry.stat().st_size
        return sizes

    async def read_parts(self, user_id: int, file_id: int, parts: int, max_bytes: int) -> bytes:
        """Parts 0 .. parts-1 joined (for files small enough to hold: photos, thumbs);
        PartsTooBig, having read at most ``max_bytes`` + 1, if they are longer. The bound
        holds while parts are being rewritten: sizes checked before are no promise."""
        paths = [self.part_path(user_id, file_id, p) for p in range(parts)]
        return await asyncio.to_thread(_read_bounded, paths, max_bytes)

    async def exists(self, user_id: int, file_id: int) -> bool:
        return await asyncio.to_thread(self._dir(user_id, file_id).exists)

    async def remove(self, user_id: int, file_id: int) -> None:
        await asyncio.to_thread(shutil.rmtree, self._dir(user_id, file_id), True)

    async def remove_idle(self, idle_since: float) -> int:
        """Remove uploads with no activity since ``idle_since`` (epoch seconds)."""
        return await asyncio.to_thread(self._remove_idle, idle_since)

    def _remove_idle(self, idle_since: float) -> int:
        removed = 0
        try:
            users = list(os.scandir(self.root))
        except FileNotFoundError:
            return 0
        for user in users:
            if not user.is_dir():
                continue
            for upload in list(os.scandir(user.path)):
                try:
                    if upload.stat().st_mtime < idle_since:
                        shutil.rmtree(upload.path, ignore_errors=True)
                        removed += 1
                except FileNotFoundError:
                    continue
            try:
                os.rmdir(user.path)  # only succeeds once the user has no upload left
            except OSError:
                pass
        return removed
