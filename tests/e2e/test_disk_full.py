"""/readyz on a full disk: the data directory on a small tmpfs of the test's own (the
test is skipped where mounting is not allowed). Ready while there is room; 503 naming
the disk once the free bytes fall below ``min_free_disk_bytes`` or a write fails;
ready again once room is made."""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from telesrv.app import open_resources
from telesrv.serving import disk_problem
from telesrv.wiring import build_server

from .conftest import e2e_settings
from .test_metrics import http_get

DISK_BYTES = 16 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot mount a tmpfs here: {e}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False, capture_output=True)


def free_bytes(path: Path) -> int:
    room = os.statvfs(path)
    return room.f_bavail * room.f_frsize


def fill(path: Path) -> Path:
    """A file taking every free block of the file system of ``path``."""
    filler = path / f"filler-{uuid.uuid4().hex}"
    with open(filler, "wb", buffering=0) as f:
        for size in (64 * 1024, 512):  # big chunks, then the last blocks
            with contextlib.suppress(OSError):
                while f.write(b"\0" * size):
                    pass
    return filler


def test_free_bytes_at_the_limit_and_one_past_it(small_disk: Path) -> None:
    free = free_bytes(small_disk)
    assert disk_problem([small_disk], free) is None
    problem = disk_problem([small_disk], free + 1)
    assert problem is not None and "bytes free" in problem
    assert not (small_disk / ".write-probe").exists()


def test_a_failing_write_probe_is_a_problem_without_a_threshold(small_disk: Path) -> None:
    filler = fill(small_disk)
    problem = disk_problem([small_disk], 0)
    assert problem is not None and problem.startswith(f"cannot write in {small_disk}")
    filler.unlink()
    assert disk_problem([small_disk], 0) is None


async def test_readyz_follows_a_full_disk(
    small_disk: Path, database_url: str, redis_url: str
) -> None:
    settings = e2e_settings(
        small_disk / "data", database_url, redis_url, min_free_disk_bytes=1024 * 1024
    )
    async with open_resources(settings) as resources:
        server = build_server(settings, resources)
        host, port = await server.start_metrics("127.0.0.1", 0)
        try:
            assert await http_get(host, port, "/readyz") == (200, "ready\n")
            filler = fill(small_disk)
            status, body = await http_get(host, port, "/readyz")
            assert status == 503
            assert body.startswith("disk: ") and str(small_disk / "data") in body
            filler.unlink()
            assert await http_get(host, port, "/readyz") == (200, "ready\n")
        finally:
            await server.stop()
