"""Photo processing holds bounded memory and is shared fairly: a send waiting for an
image worker has not read its file yet, and one user's many photos take one worker
at a time, leaving the others to everyone else; uploads made into media past a user's
rate are refused before their file is read."""

from __future__ import annotations

import asyncio
import io
import threading
from typing import Any

import pytest
from conftest import MakeParts
from PIL import Image

from telesrv.parts import Parts
from telesrv.services import files as files_mod
from telesrv.services.errors import FloodWait
from telesrv.services.files import IMAGE_WORKERS
from telesrv.services.images import process_image
from telesrv.services.uploads import UploadedFile

BUSY, OTHERS = 9, tuple(range(10, 10 + IMAGE_WORKERS))


def _jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 20, 30)).save(out, "JPEG")
    return out.getvalue()


async def test_photos_waiting_for_a_worker_have_not_read_their_file(
    parts: Parts, monkeypatch: pytest.MonkeyPatch
) -> None:
    uploads, media = parts.uploads, parts.media_files
    data = _jpeg()
    busy_sends = IMAGE_WORKERS + 3
    others = OTHERS[:IMAGE_WORKERS]  # one more than the workers left to them
    for file_id in range(busy_sends):
        await uploads.save_part(BUSY, file_id, 0, data)
    for user in others:
        await uploads.save_part(user, 0, 0, data)

    release = threading.Event()
    started = threading.Semaphore(0)

    def blocked(image: bytes, boxes: Any) -> Any:
        started.release()
        release.wait(30)
        return process_image(image, boxes)

    monkeypatch.setattr(files_mod, "process_image", blocked)

    def send(user: int, file_id: int) -> asyncio.Task[Any]:
        file = UploadedFile(file_id, 1, "p.jpg", big=False)
        return asyncio.create_task(media.photo_from_upload(user, file, 1))

    # The busy user first: it gets one worker, the others the rest.
    tasks = [send(BUSY, i) for i in range(busy_sends)] + [send(u, 0) for u in others]
    try:
        for _ in range(IMAGE_WORKERS):
            assert await asyncio.to_thread(started.acquire, True, 30)
        await asyncio.sleep(0.05)  # the rest reach their slot and wait there
        # Only the files being decoded were read (and left the upload area): one of
        # the busy user's, and those of the first users after it.
        assert uploads.user_bytes(BUSY) == (busy_sends - 1) * len(data)
        waiting = others[IMAGE_WORKERS - 1 :]
        assert [uploads.user_bytes(u) for u in others] == [
            len(data) if u in waiting else 0 for u in others
        ]
    finally:
        release.set()
        rows = await asyncio.gather(*tasks)
    assert len({r.id for r in rows}) == len(tasks)
    assert all(uploads.user_bytes(u) == 0 for u in (BUSY, *others))


async def test_uploads_past_the_media_rate_are_refused_before_they_are_read(
    make_parts: MakeParts, monkeypatch: pytest.MonkeyPatch
) -> None:
    rate = 2
    parts = make_parts(media_rate_limit=rate)
    uploads, media = parts.uploads, parts.media_files
    user = 7_700_001
    data = _jpeg()
    decoded: list[int] = []

    def counted(image: bytes, boxes: Any) -> Any:
        decoded.append(len(image))
        return process_image(image, boxes)

    monkeypatch.setattr(files_mod, "process_image", counted)
    for file_id in range(rate + 2):
        await uploads.save_part(user, file_id, 0, data)
    await media.photo_from_upload(user, UploadedFile(0, 1, "p.jpg", big=False), 1)
    await media.document_from_upload(  # a document counts as well
        user,
        UploadedFile(1, 1, "f.bin", big=False),
        mime_type="application/octet-stream",
        attributes=[],
        thumb=None,
        date=1,
    )
    assert len(decoded) == 1
    # One past the rate: refused before the file is read, decoded or used up.
    with pytest.raises(FloodWait) as info:
        await media.photo_from_upload(user, UploadedFile(2, 1, "p.jpg", big=False), 1)
    assert 1 <= info.value.seconds <= 60
    with pytest.raises(FloodWait):
        await media.document_from_upload(
            user,
            UploadedFile(3, 1, "f.bin", big=False),
            mime_type="image/jpeg",
            attributes=[],
            thumb=UploadedFile(2, 1, "t.jpg", big=False),
            date=1,
        )
    assert len(decoded) == 1
    assert uploads.user_bytes(user) == 2 * len(data)
    # Another user has a window of their own.
    await uploads.save_part(user + 1, 0, 0, data)
    await media.photo_from_upload(user + 1, UploadedFile(0, 1, "p.jpg", big=False), 1)
