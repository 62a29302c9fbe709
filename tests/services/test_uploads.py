"""Upload rules on real directories: part sizes and counts at and past each limit, out of
order and parallel parts, truncated uploads, MD5, per-user bounds and expiry; the blob
store's content addressing and ranged reads; download range rules."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from telesrv.services.errors import (
    UNAVAILABLE_ERRORS,
    FilePartEmpty,
    FilePartInvalid,
    FilePartMissing,
    FilePartsInvalid,
    FilePartSizeChanged,
    FilePartSizeInvalid,
    FilePartTooBig,
    FloodWait,
    LimitInvalid,
    Md5ChecksumInvalid,
    OffsetInvalid,
)
from telesrv.services.files import check_download_range
from telesrv.services.uploads import (
    MAX_PART_SIZE,
    MAX_PARTS,
    MAX_SMALL_FILE,
    UploadedFile,
    UploadLimits,
    Uploads,
)
from telesrv.store.blobs import BlobNotFound, LocalBlobStore
from telesrv.store.uploads import PartsTooBig, UploadArea, UploadQuota, quota_key

KIB = 1024
MIB = 1024 * KIB
USER = 7


def make_uploads(root: Path, **limits: float) -> tuple[Uploads, LocalBlobStore]:
    blobs = LocalBlobStore(root / "files")
    uploads = Uploads(UploadArea(root / "uploads"), blobs, UploadLimits(**limits))  # type: ignore[arg-type]
    return uploads, blobs


def shared_uploads(
    tmp_path: Path,
    redis: aioredis.Redis,
    files: int,
    *,
    area: UploadArea | None = None,
) -> Uploads:
    """One process's uploads on ``tmp_path``, counted in ``redis`` with every other made
    here: at most ``files`` uploads and 4 KiB of parts per user, idle after 60 s."""
    limits = UploadLimits(max_uploads_per_user=files, max_bytes_per_user=4 * KIB, idle_ttl=60.0)
    quota = UploadQuota(redis, max_files=files, max_bytes=4 * KIB, ttl=120.0)
    return Uploads(
        area or UploadArea(tmp_path / "uploads"), LocalBlobStore(tmp_path / "files"), limits, quota
    )


def small(file_id: int, parts: int, md5: str = "") -> UploadedFile:
    return UploadedFile(file_id, parts, "f", big=False, md5=md5)


def big(file_id: int, parts: int) -> UploadedFile:
    return UploadedFile(file_id, parts, "f", big=True)


async def read_all(blobs: LocalBlobStore, key: str, size: int) -> bytes:
    return await blobs.read(key, 0, size + 1)


async def test_part_size_at_and_past_512_kib(tmp_path: Path) -> None:
    uploads, _ = make_uploads(tmp_path)
    await uploads.save_part(USER, 1, 0, b"x" * MAX_PART_SIZE)
    with pytest.raises(FilePartTooBig):
        await uploads.save_part(USER, 1, 1, b"x" * (MAX_PART_SIZE + 1))
    with pytest.raises(FilePartTooBig):
        await uploads.save_part(USER, 2, 0, b"x" * (MAX_PART_SIZE + 1), total_parts=1)
    with pytest.raises(FilePartEmpty):
        await uploads.save_part(USER, 1, 1, b"")


async def test_part_numbers_and_counts_at_and_past_4000(tmp_path: Path) -> None:
    uploads, _ = make_uploads(tmp_path)
    await uploads.save_part(USER, 1, MAX_PARTS - 1, b"x")
    for bad in (MAX_PARTS, -1):
        with pytest.raises(FilePartInvalid):
            await uploads.save_part(USER, 1, bad, b"x")
    await uploads.save_part(USER, 2, MAX_PARTS - 1, b"x", total_parts=MAX_PARTS)
    for total in (MAX_PARTS + 1, 0):
        with pytest.raises(FilePartsInvalid):
            await uploads.save_part(USER, 3, 0, b"x" * KIB, total_parts=total)
    with pytest.raises(FilePartInvalid):
        await uploads.save_part(USER, 4, 5, b"x" * KIB, total_parts=5)
    # The count a big upload names stays the same for all its parts.
    await uploads.save_part(USER, 5, 0, b"x" * KIB, total_parts=5)
    with pytest.raises(FilePartsInvalid):
        await uploads.save_part(USER, 5, 1, b"x" * KIB, total_parts=6)
    with pytest.raises(FilePartsInvalid):
        await uploads.save_part(USER, 5, 1, b"x" * KIB)  # nor may it become a small one
    with pytest.raises(FilePartsInvalid):
        await uploads.finish_to_blob(USER, small(1, MAX_PARTS + 1))
    with pytest.raises(FilePartsInvalid):
        await uploads.finish_to_blob(USER, small(1, 0))


async def test_part_sizes_must_be_kib_multiples_dividing_512_kib(tmp_path: Path) -> None:
    uploads, blobs = make_uploads(tmp_path)
    for size in (KIB, 2 * KIB, 128 * KIB, MAX_PART_SIZE):
        await uploads.save_part(USER, size, 0, b"x" * size, total_parts=2)
    for size in (KIB - 1, 3 * KIB, 100 * KIB):  # not a KiB multiple, or not dividing 512 KiB
        with pytest.raises(FilePartSizeInvalid):
            await uploads.save_part(USER, 9, 0, b"x" * size, total_parts=2)
    await uploads.save_part(USER, 9, 1, b"x" * 5, total_parts=2)  # the last: any size
    await uploads.save_part(USER, 9, 0, b"x" * KIB, total_parts=2)
    blob = await uploads.finish_to_blob(USER, big(9, 2))
    assert blob.size == KIB + 5

    # Small uploads do not say which part is last: the sizes are checked at the end.
    await uploads.save_part(USER, 20, 0, b"a" * 3 * KIB)
    await uploads.save_part(USER, 20, 1, b"b" * 10)
    with pytest.raises(FilePartSizeInvalid):
        await uploads.finish_to_blob(USER, small(20, 2))
    await uploads.save_part(USER, 21, 0, b"a" * KIB)
    await uploads.save_part(USER, 21, 1, b"b" * 2 * KIB)
    await uploads.save_part(USER, 21, 2, b"c")
    with pytest.raises(FilePartSizeChanged):
        await uploads.finish_to_blob(USER, small(21, 3))
    await uploads.save_part(USER, 22, 0, b"a" * KIB)
    await uploads.save_part(USER, 22, 1, b"b" * (KIB + 1))  # last part larger than the rest
    with pytest.raises(FilePartSizeChanged):
        await uploads.finish_to_blob(USER, small(22, 2))
    # A single part of any size up to the maximum is a whole file.
    await uploads.save_part(USER, 23, 0, b"z" * 777)
    assert (await uploads.finish_to_blob(USER, small(23, 1))).size == 777
    assert await blobs.exists(hashlib.sha256(b"z" * 777).hexdigest())


async def test_small_files_up_to_10_mib(tmp_path: Path) -> None:
    uploads, _ = make_uploads(tmp_path)
    parts = MAX_SMALL_FILE // MAX_PART_SIZE
    chunk = b"q" * MAX_PART_SIZE
    for part in range(parts):
        await uploads.save_part(USER, 1, part, chunk)
    assert (await uploads.finish_to_blob(USER, small(1, parts))).size == MAX_SMALL_FILE
    for part in range(parts):
        await uploads.save_part(USER, 2, part, chunk)
    with pytest.raises(FilePartsInvalid):  # one byte more needs saveBigFilePart
        await uploads.save_part(USER, 2, parts, b"q")


async def test_out_of_order_and_parallel_parts_make_the_file(tmp_path: Path) -> None:
    uploads, blobs = make_uploads(tmp_path)
    content = os.urandom(37 * 4 * KIB + 1000)
    size = 4 * KIB
    pieces = [content[i : i + size] for i in range(0, len(content), size)]
    order = list(range(len(pieces)))[::-1]
    await asyncio.gather(
        *(uploads.save_part(USER, 5, p, pieces[p], total_parts=len(pieces)) for p in order)
    )
    await uploads.save_part(USER, 5, 3, pieces[3], total_parts=len(pieces))  # a resent part
    blob = await uploads.finish_to_blob(USER, big(5, len(pieces)))
    assert blob.key == hashlib.sha256(content).hexdigest() and blob.size == len(content)
    assert await read_all(blobs, blob.key, blob.size) == content
    assert not (tmp_path / "uploads" / str(USER) / "5").exists()
    assert uploads.user_bytes(USER) == 0
    # Finished once: the upload is gone.
    with pytest.raises(FilePartMissing):
        await uploads.finish_to_blob(USER, big(5, len(pieces)))


async def test_a_truncated_upload_names_the_first_missing_part(tmp_path: Path) -> None:
    uploads, _ = make_uploads(tmp_path)
    for part in (0, 1, 3):
        await uploads.save_part(USER, 1, part, b"x" * KIB)
    with pytest.raises(FilePartMissing) as missing:
        await uploads.finish_to_blob(USER, small(1, 5))
    assert missing.value.part == 2
    with pytest.raises(FilePartsInvalid):  # fewer parts named than uploaded
        await uploads.finish_to_blob(USER, small(1, 2))
    with pytest.raises(FilePartMissing) as missing:
        await uploads.finish_to_blob(USER, small(99, 1))  # never uploaded
    assert missing.value.part == 0


async def test_an_upload_belongs_to_its_user(tmp_path: Path) -> None:
    uploads, _ = make_uploads(tmp_path)
    await uploads.save_part(USER, 1, 0, b"mine")
    with pytest.raises(FilePartMissing):  # the same file id is another user's own upload
        await uploads.finish_to_blob(USER + 1, small(1, 1))
    await uploads.save_part(USER + 1, 1, 0, b"theirs")
    assert (await uploads.finish_to_blob(USER, small(1, 1))).size == 4
    assert (await uploads.finish_to_blob(USER + 1, small(1, 1))).size == 6


async def test_md5_of_small_files_is_checked(tmp_path: Path) -> None:
    uploads, blobs = make_uploads(tmp_path)
    data = b"checked content"
    await uploads.save_part(USER, 1, 0, data)
    with pytest.raises(Md5ChecksumInvalid):
        await uploads.finish_to_blob(USER, small(1, 1, md5="0" * 32))
    assert not await blobs.exists(hashlib.sha256(data).hexdigest())  # nothing stored
    blob = await uploads.finish_to_blob(USER, small(1, 1, md5=hashlib.md5(data).hexdigest()))
    assert blob.md5 == hashlib.md5(data).hexdigest()
    await uploads.save_part(USER, 2, 0, data)
    with pytest.raises(Md5ChecksumInvalid):
        await uploads.finish_to_bytes(USER, small(2, 1, md5="1" * 32), 100, ValueError())


async def test_per_user_bounds_on_open_uploads_and_bytes(tmp_path: Path) -> None:
    uploads, _ = make_uploads(tmp_path, max_uploads_per_user=2, max_bytes_per_user=4 * KIB)
    await uploads.save_part(USER, 1, 0, b"x" * KIB)
    await uploads.save_part(USER, 2, 0, b"x" * KIB)
    with pytest.raises(FloodWait):
        await uploads.save_part(USER, 3, 0, b"x" * KIB)
    await uploads.save_part(USER + 1, 3, 0, b"x" * KIB)  # another user has their own
    await uploads.save_part(USER, 1, 0, b"x" * KIB)  # a resent part is not counted twice
    await uploads.save_part(USER, 2, 1, b"x" * 2 * KIB)  # 4 KiB: at the bound
    with pytest.raises(FloodWait):
        await uploads.save_part(USER, 1, 1, b"x")
    await uploads.finish_to_blob(USER, small(1, 1))
    await uploads.save_part(USER, 3, 0, b"x" * KIB)  # a finished upload frees its place


async def test_per_user_bounds_hold_across_processes(tmp_path: Path, redis: aioredis.Redis) -> None:
    """Two processes' uploads on one data directory and one Redis: each counts only what
    it saw, the shared count holds the user's bounds whichever process a part reaches."""
    user = 7_000_001
    first, second = shared_uploads(tmp_path, redis, 2), shared_uploads(tmp_path, redis, 2)
    await first.save_part(user, 1, 0, b"x" * KIB)
    await second.save_part(user, 2, 0, b"x" * KIB)  # two uploads: at the bound
    for uploads in (first, second):
        with pytest.raises(FloodWait):
            await uploads.save_part(user, 3, 0, b"x" * KIB)
    assert first.user_bytes(user) == KIB  # the refused upload kept no place here
    await second.save_part(user + 1, 3, 0, b"x" * KIB)  # another user has their own
    await first.save_part(user, 1, 0, b"x" * KIB)  # a part resent where it went: no growth
    await second.save_part(user, 2, 1, b"x" * 2 * KIB)  # 4 KiB in all: at the bound
    with pytest.raises(FloodWait):
        await first.save_part(user, 1, 1, b"x")  # one byte past it
    assert first.user_bytes(user) == KIB
    # Finished through one process, the upload's place is free for the other.
    await first.finish_to_blob(user, small(1, 1))
    await second.save_part(user, 3, 0, b"x" * KIB)
    with pytest.raises(FloodWait):
        await first.save_part(user, 4, 0, b"x")
    # Removed as idle by a process that never saw them: their places are free too.
    assert await first.expire(time.time() + 61) == 3  # user's 2 and 3, the other's 3
    await first.save_part(user, 5, 0, b"x" * 2 * KIB)
    await first.save_part(user, 6, 0, b"x" * 2 * KIB)
    await first.finish_to_blob(user, small(5, 1))
    await first.finish_to_blob(user, small(6, 1))
    assert not await redis.exists(quota_key(user), quota_key(user + 1))


async def test_idle_uploads_expire(tmp_path: Path) -> None:
    uploads, _ = make_uploads(tmp_path, idle_ttl=60.0)
    await uploads.save_part(USER, 1, 0, b"x" * KIB)
    leftover = tmp_path / "uploads" / "123" / "456"  # from a previous process
    leftover.mkdir(parents=True)
    (leftover / "0").write_bytes(b"old")
    assert await uploads.expire(time.time()) == 0  # nothing idle yet
    assert await uploads.expire(time.time() + 61) == 2
    assert not leftover.exists() and not (tmp_path / "uploads" / "123").exists()
    assert uploads.user_bytes(USER) == 0
    with pytest.raises(FilePartMissing):
        await uploads.finish_to_blob(USER, small(1, 1))


async def test_blobs_are_content_addressed_and_read_in_ranges(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "files")
    first = await blobs.put_bytes(b"0123456789")
    again = await blobs.put_bytes(b"0123456789")
    assert first == again and first.key == hashlib.sha256(b"0123456789").hexdigest()
    stored = [p for p in (tmp_path / "files").rglob("*") if p.is_file()]
    assert stored == [blobs.path_of(first.key)]  # one copy, no temporary file left
    assert await blobs.read(first.key, 3, 4) == b"3456"
    assert await blobs.read(first.key, 8, 100) == b"89"
    assert await blobs.read(first.key, 10, 100) == b""
    assert await blobs.size(first.key) == 10
    await blobs.delete(first.key)
    assert not await blobs.exists(first.key)
    with pytest.raises(BlobNotFound):
        await blobs.read(first.key, 0, 1)
    with pytest.raises(BlobNotFound):
        blobs.path_of("../../etc/passwd")


def test_download_ranges_at_and_past_each_rule() -> None:
    check_download_range(0, MIB, False)
    check_download_range(MIB - 4 * KIB, 4 * KIB, False)
    check_download_range(5 * MIB, 512 * KIB, False)
    for offset in (4 * KIB - 1, -4 * KIB, 2 * KIB):
        with pytest.raises(OffsetInvalid):
            check_download_range(offset, 4 * KIB, False)
    for limit in (0, -4 * KIB, MIB + 4 * KIB, 2 * MIB, 12 * KIB, 4 * KIB + 1, KIB):
        with pytest.raises(LimitInvalid):
            check_download_range(0, limit, False)
    with pytest.raises(LimitInvalid):  # across a 1 MiB boundary
        check_download_range(MIB - 4 * KIB, 8 * KIB, False)
    # Precise: 1 KiB alignment, any such limit up to 1 MiB, never across a 1 MiB boundary.
    check_download_range(KIB, 3 * KIB, True)
    check_download_range(MIB - KIB, KIB, True)
    with pytest.raises(OffsetInvalid):
        check_download_range(512, KIB, True)
    with pytest.raises(LimitInvalid):
        check_download_range(0, 1000, True)
    with pytest.raises(LimitInvalid):
        check_download_range(0, MIB + KIB, True)
    with pytest.raises(LimitInvalid):
        check_download_range(MIB - KIB, 2 * KIB, True)


async def test_parts_read_into_memory_stay_within_the_bound(tmp_path: Path) -> None:
    area = UploadArea(tmp_path / "uploads")
    for part in range(3):
        await area.write_part(USER, 1, part, b"x" * 100)
    assert await area.read_parts(USER, 1, 3, 300) == b"x" * 300  # at the bound
    with pytest.raises(PartsTooBig):  # one past it
        await area.read_parts(USER, 1, 3, 299)


async def test_parts_rewritten_larger_after_the_check_are_not_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client may rewrite parts of a photo's upload while the send finishes it: what
    is read into memory is bounded by the photo limit, not by the sizes checked."""
    uploads, _ = make_uploads(tmp_path)
    for part in range(3):
        await uploads.save_part(USER, 5, part, b"p" * KIB, total_parts=3)
    checked = await uploads._area.part_sizes(USER, 5)
    for part in range(3):  # rewritten between the check and the read
        await uploads._area.write_part(USER, 5, part, b"P" * MAX_PART_SIZE)

    async def stale(user_id: int, file_id: int) -> dict[int, int]:
        return checked

    monkeypatch.setattr(uploads._area, "part_sizes", stale)
    too_big = ValueError("too big")
    with pytest.raises(ValueError) as raised:
        await uploads.finish_to_bytes(USER, big(5, 3), 10 * KIB, too_big)
    assert raised.value is too_big


async def test_resending_a_part_smaller_never_takes_the_shared_count_below_zero(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    """A process may remember bytes of an upload that the shared count no longer holds
    (another process finished or removed it, the count expired or Redis lost it): a
    part it receives again, smaller, frees none of the other uploads' room."""
    user = 7_000_101
    first, second = shared_uploads(tmp_path, redis, 3), shared_uploads(tmp_path, redis, 3)
    await first.save_part(user, 1, 0, b"x" * 4 * KIB)
    await second.finish_to_blob(user, small(1, 1))  # the first still remembers its part
    await first.save_part(user, 1, 0, b"x")  # sent again, 4 KiB - 1 smaller
    assert int(await redis.hget(quota_key(user), "total") or 0) >= 0
    await first.save_part(user, 2, 0, b"x" * (4 * KIB - 1))  # 4 KiB on disk: at the bound
    with pytest.raises(FloodWait):
        await second.save_part(user, 3, 0, b"x" * 4 * KIB)  # 8 KiB would be on disk
    # Upload 1 holds no bytes in the shared count now; finished, it leaves it.
    await first.finish_to_blob(user, small(1, 1))
    assert not await redis.hexists(quota_key(user), "1")
    await first.finish_to_blob(user, small(2, 1))
    assert not await redis.exists(quota_key(user))


async def test_uploads_holding_no_bytes_are_freed_with_the_others(redis: aioredis.Redis) -> None:
    user = 7_000_401
    quota = UploadQuota(redis, max_files=3, max_bytes=4 * KIB, ttl=120.0)
    assert await quota.reserve(user, 1, KIB)
    await quota.release(user, [1])  # freed elsewhere while this process kept its part
    assert await quota.reserve(user, 1, -KIB + 1)  # the part sent again, smaller: 0 bytes
    assert await quota.reserve(user, 2, KIB)
    assert await quota.reserve(user, 3, KIB)
    await quota.release(user, [1, 2, 3])  # removed by the cleanup all at once
    assert not await redis.exists(quota_key(user))


async def test_a_place_never_given_back_comes_free_once_its_upload_is_idle(
    redis: aioredis.Redis,
) -> None:
    """A process that died between charging a part and writing it never frees that
    upload's place; the user keeps uploading, so their count never expires whole. The
    upload's own last part, older than the idle time, frees it."""
    user = 7_000_501
    ttl = 120.0
    quota = UploadQuota(redis, max_files=2, max_bytes=4 * KIB, ttl=ttl)
    assert await quota.reserve(user, 1, 3 * KIB)  # the dead process's
    assert await quota.reserve(user, 2, KIB)  # two uploads, 4 KiB: at both bounds
    assert not await quota.reserve(user, 3, 1)
    assert not await quota.reserve(user, 2, 1)
    # Upload 1's last part came just past the idle time ago (by Redis's clock).
    seconds, micros = await redis.time()
    now_ms = seconds * 1000 + micros // 1000
    await redis.hset(quota_key(user), "t:1", now_ms - int(ttl * 1000) - 1000)
    assert await quota.reserve(user, 2, 1)  # its bytes are free
    assert await quota.reserve(user, 3, KIB)  # and its place
    assert not await redis.hexists(quota_key(user), "1")
    assert int(await redis.hget(quota_key(user), "total") or 0) == 2 * KIB + 1
    # One just inside the idle time stays.
    await redis.hset(quota_key(user), "t:2", now_ms - int(ttl * 1000) + 10_000)
    assert not await quota.reserve(user, 4, KIB)
    await quota.release(user, [2, 3])
    assert not await redis.exists(quota_key(user))


async def test_a_new_upload_whose_first_write_fails_gives_its_shared_place_back(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    user = 7_000_201
    uploads = shared_uploads(tmp_path, redis, 2)
    (tmp_path / "uploads").mkdir()
    (tmp_path / "uploads" / str(user)).write_bytes(b"")  # not a directory: writes fail
    with pytest.raises(OSError):
        await uploads.save_part(user, 1, 0, b"x" * KIB)
    (tmp_path / "uploads" / str(user)).unlink()
    # The cleanup runs; the user keeps uploading (which keeps their count alive).
    await uploads.expire(time.time())
    await uploads.save_part(user, 2, 0, b"x" * KIB)
    await uploads.save_part(user, 3, 0, b"x" * KIB)  # two uploads: at the bound
    with pytest.raises(FloodWait):
        await uploads.save_part(user, 4, 0, b"x" * KIB)


async def test_a_finish_cancelled_while_removing_its_parts_still_frees_its_place(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    """The client may drop the answer of a request that finishes an upload while its
    parts are being removed (``rpc_drop_answer``), which goes on in its thread: the
    upload is gone, so is its place in the shared count."""
    user = 7_000_301
    removing = asyncio.Event()

    class Area(UploadArea):
        async def remove(self, user_id: int, file_id: int) -> None:
            removing.set()
            await super().remove(user_id, file_id)

    uploads = shared_uploads(tmp_path, redis, 1, area=Area(tmp_path / "uploads"))
    await uploads.save_part(user, 1, 0, b"x" * KIB)
    finish = asyncio.ensure_future(uploads.finish_to_blob(user, small(1, 1)))
    await removing.wait()
    finish.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await finish
    await uploads.wait_removals()  # the freeing goes on after the cancellation
    assert not await redis.exists(quota_key(user))
    await uploads.save_part(user, 2, 0, b"x" * KIB)  # the finished upload's place is free


async def test_uploads_finished_through_another_process_leave_this_ones_bounds(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    """A client may send an upload's parts on one connection (a media session) and
    finish it on another, each reaching its own process: the process that saved the
    parts must not go on counting what the other finished."""
    user = 7_000_801
    parts, finishes = shared_uploads(tmp_path, redis, 2), shared_uploads(tmp_path, redis, 2)
    await parts.save_part(user, 1, 0, b"a" * KIB)
    await parts.save_part(user, 2, 0, b"b" * 2 * KIB)
    await finishes.finish_to_blob(user, small(1, 1))
    await finishes.finish_to_blob(user, small(2, 1))
    await parts.save_part(user, 3, 0, b"c" * 2 * KIB)  # both places free, and 3 KiB
    await parts.save_part(user, 4, 0, b"d" * 2 * KIB)
    assert parts.user_bytes(user) == 4 * KIB
    assert int(await redis.hget(quota_key(user), "total") or 0) == 4 * KIB
    with pytest.raises(FloodWait):  # the bounds still hold
        await parts.save_part(user, 5, 0, b"e")
    with pytest.raises(FloodWait):
        await parts.save_part(user, 4, 1, b"e")


async def test_the_cleanup_leaves_an_upload_whose_first_part_is_being_written(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    """The cleanup frees the place of an upload with no directory (every write failed);
    one whose first part is charged but still on its way to disk has none yet either."""
    user = 7_000_601
    writing = asyncio.Event()
    go_on = asyncio.Event()

    class Area(UploadArea):
        async def write_part(self, user_id: int, file_id: int, part: int, data: bytes) -> None:
            writing.set()
            await go_on.wait()
            await super().write_part(user_id, file_id, part, data)

    uploads = shared_uploads(tmp_path, redis, 1, area=Area(tmp_path / "uploads"))
    save = asyncio.ensure_future(uploads.save_part(user, 1, 0, b"x" * KIB))
    await writing.wait()
    await uploads.expire(time.time())
    go_on.set()
    await save
    assert uploads.user_bytes(user) == KIB
    assert int(await redis.hget(quota_key(user), "1") or 0) == KIB
    with pytest.raises(FloodWait):  # the one upload holds the only place, here and shared
        await uploads.save_part(user, 2, 0, b"x" * KIB)
    await uploads.finish_to_blob(user, small(1, 1))
    assert not await redis.exists(quota_key(user))


async def test_stopping_waits_for_removals_a_cancelled_finish_left(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    user = 7_000_701
    go_on = asyncio.Event()
    removing = asyncio.Event()

    class Area(UploadArea):
        async def remove(self, user_id: int, file_id: int) -> None:
            removing.set()
            await go_on.wait()
            await super().remove(user_id, file_id)

    uploads = shared_uploads(tmp_path, redis, 1, area=Area(tmp_path / "uploads"))
    await uploads.save_part(user, 1, 0, b"x" * KIB)
    finish = asyncio.ensure_future(uploads.finish_to_blob(user, small(1, 1)))
    await removing.wait()
    finish.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await finish
    await uploads.wait_removals(timeout=0)  # bounded: returns with the removal held up
    assert await redis.exists(quota_key(user))
    go_on.set()
    await uploads.wait_removals()
    assert not await redis.exists(quota_key(user))


async def test_with_redis_down_parts_are_refused_as_unavailable_and_finishing_works(
    tmp_path: Path,
) -> None:
    # No retries: redis-py takes retry=None for that but annotates the parameter Retry.
    dead = aioredis.Redis(
        unix_socket_path=str(tmp_path / "nobody-listens"),
        retry=None,  # type: ignore[arg-type]
    )
    try:
        uploads = shared_uploads(tmp_path, dead, 2)
        with pytest.raises(UNAVAILABLE_ERRORS):  # answered as a timeout, no traceback
            await uploads.save_part(USER, 1, 0, b"x" * KIB)
        await uploads._area.write_part(USER, 2, 0, b"y" * KIB)  # a part from before
        blob = await uploads.finish_to_blob(USER, small(2, 1))  # the place is freed later
        assert blob.size == KIB
    finally:
        await dead.aclose()
