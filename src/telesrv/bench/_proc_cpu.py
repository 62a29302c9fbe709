"""CPU time and syscall counts of process trees, read from /proc (Linux), for the
benchmarks' figures."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after its last ')'.
    return raw[raw.rindex(")") + 2 :].split()


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def process_trees(roots: Iterable[int]) -> set[int]:
    """``roots`` and all their descendants that are alive now."""
    children = _children_map()
    found: set[int] = set()
    todo = [pid for pid in roots if _stat_fields(pid) is not None]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system time of ``pids`` including their reaped children, in seconds.

    Counting reaped children keeps a difference of two readings right when a child
    exits in between: its time moves into its parent's."""
    ticks = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the name
            ticks += sum(int(v) for v in fields[11:15])
    return ticks / _CLK_TCK


def syscalls(pids: Iterable[int]) -> tuple[int, int]:
    """Read-type and write-type system calls ``pids`` made so far (``syscr`` and
    ``syscw`` of /proc/PID/io: read, recv..., and write, send...; every thread)."""
    reads = writes = 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/io").read_text().splitlines()
        except OSError:
            continue
        fields = dict(line.split(": ", 1) for line in lines if ": " in line)
        reads += int(fields.get("syscr", 0))
        writes += int(fields.get("syscw", 0))
    return reads, writes


def parent_pid(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields is not None else None


class ServerCpu:
    """CPU seconds of the server's processes over a phase, from /proc."""

    def __init__(self, roots: list[int]) -> None:
        self.roots = roots

    def reading(self) -> float:
        return cpu_seconds(process_trees(self.roots))

    def split(self) -> list[float]:
        """One reading per root's process tree (telesrv, PostgreSQL, Redis)."""
        return [cpu_seconds(process_trees([root])) for root in self.roots]
