"""Freezing a PostgreSQL server the tests run (SIGSTOP of its postmaster and every
backend, SIGCONT after), as a machine under a stalled disk or a paused VM shows it: a
connection is accepted by the kernel and nothing ever answers."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest


def _parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name (in parentheses) may hold spaces: the fields after it are fixed.
    return int(stat.rsplit(")", 1)[1].split()[1])


def _children_of(pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            children += [int(c) for c in (task / "children").read_text().split()]
    return children


async def postmaster_of(database_url: str) -> int:
    """The pid of the postmaster serving ``database_url``; the test is skipped when that
    server is not a process of this machine that we may signal (an external one)."""
    conn = await asyncpg.connect(database_url)
    try:
        backend = int(await conn.fetchval("SELECT pg_backend_pid()"))
        # Read while the backend lives (it ends with the connection).
        postmaster = _parent_of(backend)
        os.kill(postmaster, 0)
    except (OSError, ValueError, IndexError):
        pytest.skip("the test PostgreSQL is not a local process we may signal")
    finally:
        await conn.close()
    return postmaster


@contextlib.contextmanager
def frozen(postmaster: int) -> Iterator[None]:
    """The postmaster and all its processes stopped; all continued on exit, whatever
    happens inside."""
    stopped: list[int] = []
    try:
        for pid in [postmaster, *_children_of(postmaster)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
        # A backend forked between the listing and the postmaster's stop is stopped too.
        for pid in _children_of(postmaster):
            if pid not in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
        yield
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
