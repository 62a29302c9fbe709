"""Unfinished uploads: their parts on disk, and what each user holds, in Redis.

On disk, one directory per (user, file id), one file per part. Each part goes to its
own file as it arrives, so parts may come in any order and in parallel, and no upload
is ever held in memory. A part is written to a temporary name and renamed, so a
repeated part replaces the old one whole. The directory's mtime is the upload's last
activity (a rename touches it): idle uploads are found by it, also those a previous
process left behind.

In Redis, per user, the bytes of each unfinished upload (``UploadQuota``): the bounds
on a user's uploads hold across every server process, whichever of them the parts
arrive at.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path

from redis.commands.core import AsyncScript

from telesrv.store.redis_client import RedisClient


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

    async def uploads_of(self, user_id: int) -> set[int]:
        """The file ids of the user's uploads on disk."""
        return await asyncio.to_thread(self._uploads_of, user_id)

    def _uploads_of(self, user_id: int) -> set[int]:
        try:
            entries = list(os.scandir(self.root / str(user_id)))
        except (FileNotFoundError, NotADirectoryError):
            return set()
        return {int(e.name) for e in entries if e.name.lstrip("-").isdigit()}

    async def remove(self, user_id: int, file_id: int) -> None:
        await asyncio.to_thread(shutil.rmtree, self._dir(user_id, file_id), True)

    async def remove_idle(self, idle_since: float) -> list[tuple[int, int]]:
        """Remove uploads with no activity since ``idle_since`` (epoch seconds); returns
        their (user id, file id)."""
        return await asyncio.to_thread(self._remove_idle, idle_since)

    def _remove_idle(self, idle_since: float) -> list[tuple[int, int]]:
        removed: list[tuple[int, int]] = []
        try:
            users = list(os.scandir(self.root))
        except FileNotFoundError:
            return removed
        for user in users:
            if not user.is_dir():
                continue
            for upload in list(os.scandir(user.path)):
                try:
                    if upload.stat().st_mtime < idle_since:
                        shutil.rmtree(upload.path, ignore_errors=True)
                        if user.name.lstrip("-").isdigit() and upload.name.lstrip("-").isdigit():
                            removed.append((int(user.name), int(upload.name)))
                except FileNotFoundError:
                    continue
            try:
                os.rmdir(user.path)  # only succeeds once the user has no upload left
            except OSError:
                pass
        return removed


def quota_key(user_id: int) -> str:
    return f"uploads:{{{user_id}}}"


# KEYS: the user's hash: file id -> bytes, "t:" file id -> when a part last came (ms,
# Redis's clock), and "total". ARGV: file id, growth (may be negative), most files,
# most bytes, idle ms. Uploads with no part for longer than idle ms are taken out
# first: the cleanup has removed them from disk by then, and a place a process never
# gave back (it died between charging a part and writing it) comes free that way even
# while the user keeps uploading. A file not in the hash is a new upload, refused when
# the user already has the most; growth is refused past the most bytes. A shrink takes
# back at most what the file holds here: the process may remember bytes the hash no
# longer has (freed by another process, expired), and the other uploads' room must not
# grow by them. Returns 1 when taken, 0 when refused.
_RESERVE_LUA = """
local key, file, growth = KEYS[1], ARGV[1], tonumber(ARGV[2])
local idle = tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fields = redis.call('HGETALL', key)
local files = 0
for i = 1, #fields, 2 do
  local name = fields[i]
  if string.sub(name, 1, 2) == 't:' then
    if now - tonumber(fields[i + 1]) > idle then
      local id = string.sub(name, 3)
      local bytes = tonumber(redis.call('HGET', key, id) or '0')
      redis.call('HDEL', key, id, name)
      redis.call('HINCRBY', key, 'total', 0 - bytes)  -- never -0: Redis takes no "-0"
    else
      files = files + 1
    end
  end
end
local held = redis.call('HGET', key, file)
if not held and files >= tonumber(ARGV[3]) then
  return 0
end
local held_bytes = tonumber(held or '0')
if growth + held_bytes < 0 then
  growth = 0 - held_bytes
end
local total = tonumber(redis.call('HGET', key, 'total') or '0')
if growth > 0 and total + growth > tonumber(ARGV[4]) then
  return 0
end
redis.call('HINCRBY', key, file, growth)
redis.call('HSET', key, 't:' .. file, now)
redis.call('HINCRBY', key, 'total', growth)
redis.call('PEXPIRE', key, idle)
return 1
"""

# KEYS: the user's hash. ARGV: file ids. Takes the files and their bytes out; the key
# goes with the last file.
_RELEASE_LUA = """
local key = KEYS[1]
for i = 1, #ARGV do
  local bytes = redis.call('HGET', key, ARGV[i])
  if bytes then
    redis.call('HINCRBY', key, 'total', 0 - tonumber(bytes))  -- not -0: no integer
  end
  redis.call('HDEL', key, ARGV[i], 't:' .. ARGV[i])
end
if redis.call('HLEN', key) <= 1 then
  redis.call('DEL', key)
end
return 0
"""


class UploadQuota:
    """What each user's unfinished uploads hold, shared by every server process: how
    many uploads and how many bytes of parts, each bounded.

    A process charges the growth of each part it writes (its size less that of the part
    it replaces, when this process wrote that one). A part written again through another
    process is charged again, whole, until its upload is finished or removed: the
    bounds can only come out stricter. An upload with no part for ``ttl`` seconds
    leaves the count (the cleanup has removed it from disk by then), and with the
    last of them the user's hash: what a process that died never gave back comes free
    that way."""

    def __init__(self, redis: RedisClient, *, max_files: int, max_bytes: int, ttl: float) -> None:
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.ttl_ms = max(1, int(ttl * 1000))
        self._reserve: AsyncScript = redis.register_script(_RESERVE_LUA)
        self._release: AsyncScript = redis.register_script(_RELEASE_LUA)

    async def reserve(self, user_id: int, file_id: int, growth: int) -> bool:
        """Charge ``growth`` bytes to the user's upload ``file_id`` (a new upload when it
        holds none yet); False, nothing charged, past either bound."""
        taken = await self._reserve(
            keys=[quota_key(user_id)],
            args=[file_id, growth, self.max_files, self.max_bytes, self.ttl_ms],
        )
        return bool(int(taken))

    async def release(self, user_id: int, file_ids: Sequence[int]) -> None:
        """The uploads are finished or removed: their place and bytes are free."""
        if file_ids:
            await self._release(keys=[quota_key(user_id)], args=list(file_ids))
