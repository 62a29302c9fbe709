"""Photo processing holds bounded memory: a send waiting for an image worker has not
read its file yet, however many photos are sent at once."""

from __future__ import annotations

import asyncio
import io
import threading
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from telesrv.services import files as files_mod
from telesrv.services.files import IMAGE_WORKERS, MediaFiles, UploadedFile, UploadLimits, Uploads
from telesrv.services.images import process_image
from telesrv.store.blobs import LocalBlobStore
from telesrv.store.db import Db
from telesrv.store.uploads import UploadArea

USER = 9


def _jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 20, 30)).save(out, "JPEG")
    return out.getvalue()


async def test_photos_waiting_for_a_worker_have_not_read_their_file(
    db: Db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = LocalBlobStore(tmp_path / "files")
    uploads = Uploads(UploadArea(tmp_path / "uploads"), blobs, UploadLimits())
    media = MediaFiles(db, uploads, blobs)
    data = _jpeg()
    sends = IMAGE_WORKERS + 3
    for file_id in range(sends):
        await uploads.save_part(USER, file_id, 0, data)
    assert uploads.user_bytes(USER) == sends * len(data)

    release = threading.Event()
    started = threading.Semaphore(0)

    def blocked(image: bytes, boxes: Any) -> Any:
        started.release()
        release.wait(30)
        return process_image(image, boxes)

    monkeypatch.setattr(files_mod, "process_image", blocked)
    tasks = [
        asyncio.create_task(
            media.photo_from_upload(USER, UploadedFile(i, 1, "p.jpg", big=False), 1)
        )
        for i in range(sends)
    ]
    try:
        for _ in range(IMAGE_WORKERS):
            assert await asyncio.to_thread(started.acquire, True, 30)
        await asyncio.sleep(0.05)  # the others reach the slot and wait there
        # Only the files being decoded were read (and left the upload area).
        assert uploads.user_bytes(USER) == (sends - IMAGE_WORKERS) * len(data)
    finally:
        release.set()
        rows = await asyncio.gather(*tasks)
    assert len({r.id for r in rows}) == sends and uploads.user_bytes(USER) == 0
