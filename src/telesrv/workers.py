"""`telesrv serve --workers N`: N server processes on one port.

The first process starts the embedded PostgreSQL and Redis (when no URLs are given),
migrates, binds the port with SO_REUSEPORT and then starts N-1 more processes
(``telesrv worker``) on the same port, database, Redis and data directory; the kernel
spreads new connections among the listeners. Each worker is a fresh interpreter
(not a fork): the event loop, the pools and the key exchange thread are its own.
The workers find each other through Redis like processes on separate machines do.

The first process supervises the others: a worker that dies is started again after a
pause that doubles with each death in a row (a worker that served long enough starts
the count over); past MAX_QUICK_DEATHS in a row the whole server stops, as a worker
that keeps dying at once will not get better by itself. A worker ends itself when the
first process dies (SIGKILL included): the kernel sends it SIGTERM (PR_SET_PDEATHSIG)
and, in case that was missed, it polls whether its parent changed. Metrics: the
workers keep theirs in files (Prometheus multiprocess mode) that the first process
adds to its own when scraped.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import errno
import fcntl
import itertools
import json
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from telesrv import logs
from telesrv.config import Settings
from telesrv.startup import StartupError
from telesrv.store.embedded import pid_alive

log = logging.getLogger(__name__)

# The settings of a worker, as JSON, in its environment.
SETTINGS_ENV = "TELESRV_WORKER_SETTINGS"
READY = "telesrv listening on "
# The pid of the process that started a worker: it ends itself once that one is gone.
PARENT_ENV = "TELESRV_WORKER_PARENT"
# Where the workers keep their metrics (prometheus_client reads it at import).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
START_TIMEOUT = 120.0
# A stopping worker answers the requests it holds first (the gateway's drain), so the
# first process waits that long and a margin before it kills it.
STOP_TIMEOUT = 30.0
# The pause before a dead worker is started again: doubled with each death in a row,
# at most RESTART_MAX_DELAY. A worker that served RESTART_STABLE seconds starts the
# count over; one that died MAX_QUICK_DEATHS times in a row stops the server.
RESTART_FIRST_DELAY = 0.5
RESTART_MAX_DELAY = 30.0
RESTART_STABLE = 60.0
MAX_QUICK_DEATHS = 5
# How often a worker checks that its parent lives, and publishes its gauges.
PARENT_POLL_INTERVAL = 1.0
LOCK_FILE = "serve.lock"
# Held shared by every process that joined a server on the data directory (--join,
# and the workers): a new server must not start under them.
JOIN_LOCK_FILE = "join.lock"


def settings_to_json(settings: Settings) -> str:
    values: dict[str, Any] = {}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        values[field.name] = str(value) if isinstance(value, Path) else value
    return json.dumps(values)


def settings_from_json(text: str) -> Settings:
    values = json.loads(text)
    if not isinstance(values, dict):
        raise ValueError("worker settings must be a JSON object")
    known = {f.name for f in dataclasses.fields(Settings)}
    values = {k: v for k, v in values.items() if k in known}
    if "data_dir" in values:
        values["data_dir"] = Path(values["data_dir"])
    return Settings(**values)


def worker_settings(
    settings: Settings,
    host: str,
    port: int,
    database_url: str,
    redis_url: str,
    partition_count: int,
    *,
    ws: tuple[str, int] | None = None,
) -> Settings:
    """What each further worker runs with: the bound ports and the running databases.
    The first process alone serves the metrics endpoint (one port, one scrape target;
    its database-wide figures cover every worker). ``ws`` is the WebSocket address the
    first process bound (None: no WebSocket listener)."""
    return settings.replace(
        listen_host=host,
        listen_port=port,
        ws_listen_host=ws[0] if ws is not None else None,
        ws_listen_port=ws[1] if ws is not None else None,
        database_url=database_url,
        redis_url=redis_url,
        partition_count=partition_count,
        workers=1,
        reuse_port=True,
        join=True,
        metrics_host=None,
        metrics_port=None,
    )


class WorkersFailed(RuntimeError):
    """A worker kept dying right after it started; the server stops."""


def exit_status(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def restart_delay(deaths_in_a_row: int, first: float = RESTART_FIRST_DELAY) -> float:
    """The pause before the next start after ``deaths_in_a_row`` (>= 1) deaths."""
    doubled: float = first * 2.0 ** (deaths_in_a_row - 1)
    return min(doubled, RESTART_MAX_DELAY)


class _Slot:
    """One worker place: the process in it now, and how often it died in a row."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.process: asyncio.subprocess.Process | None = None
        self.deaths = 0


class WorkerGroup:
    """The further worker processes of one `telesrv serve --workers N`, kept running."""

    def __init__(
        self,
        metrics_dir: Path | None = None,
        *,
        command: list[str] | None = None,
        first_delay: float = RESTART_FIRST_DELAY,
    ) -> None:
        self.metrics_dir = metrics_dir
        # What runs a worker (tests give another program that speaks the same lines).
        self.command = command or [sys.executable, "-m", "telesrv", "worker"]
        self.first_delay = first_delay
        self._slots: list[_Slot] = []
        self._env: dict[str, str] = {}
        self._watchers: list[asyncio.Task[None]] = []
        self._stopping = False
        self.failed: asyncio.Future[None] | None = None

    @property
    def processes(self) -> list[asyncio.subprocess.Process]:
        return [s.process for s in self._slots if s.process is not None]

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.returncode is None]

    async def start(self, settings: Settings, count: int) -> None:
        env = {k: v for k, v in os.environ.items() if k not in (SETTINGS_ENV, MULTIPROC_ENV)}
        env[SETTINGS_ENV] = settings_to_json(settings)
        env.update(logs.child_environment())
        env[PARENT_ENV] = str(os.getpid())
        if self.metrics_dir is not None:
            env[MULTIPROC_ENV] = str(self.metrics_dir)
        self._env = env
        self.failed = asyncio.get_running_loop().create_future()
        self._slots = [_Slot(i) for i in range(count)]
        try:
            async with asyncio.timeout(START_TIMEOUT):
                await asyncio.gather(*(self._spawn(slot) for slot in self._slots))
        except BaseException:
            await self.stop()
            raise
        self._watchers = [asyncio.create_task(self._watch(slot)) for slot in self._slots]

    async def _spawn(self, slot: _Slot) -> None:
        process = await asyncio.create_subprocess_exec(
            *self.command,
            stdout=asyncio.subprocess.PIPE,
            env=self._env,
        )
        slot.process = process
        await self._ready(process)
        log.info("worker %d started (pid %d)", slot.index + 1, process.pid)

    @staticmethod
    async def _ready(process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while True:
            line = await process.stdout.readline()
            if not line:
                raise RuntimeError(f"worker {process.pid} exited before it was ready")
            if line.decode(errors="replace").startswith(READY):
                return

    @staticmethod
    async def _drain_output(process: asyncio.subprocess.Process) -> None:
        """Read what the worker prints after its ready line, so it never blocks on a
        full pipe."""
        assert process.stdout is not None
        while await process.stdout.read(65536):
            pass

    async def _watch(self, slot: _Slot) -> None:
        """Wait for the slot's worker to die and start another, until stopped."""
        while not self._stopping:
            process = slot.process
            assert process is not None
            started = time.monotonic()  # it is serving from now on
            await asyncio.gather(self._drain_output(process), process.wait())
            if self._stopping:
                return
            assert process.returncode is not None
            self._forget(process.pid)
            if time.monotonic() - started >= RESTART_STABLE:
                slot.deaths = 0
            status = exit_status(process.returncode)
            if not await self._after_failure(
                slot,
                f"worker {slot.index + 1} (pid {process.pid}) died",
                f"with {status}; starting it again",
                f", last with {status}",
            ):
                return
            while not self._stopping:
                try:
                    async with asyncio.timeout(START_TIMEOUT):
                        await self._spawn(slot)
                    break
                except (RuntimeError, OSError, TimeoutError) as e:
                    await self._reap(slot)
                    if not await self._after_failure(
                        slot,
                        f"worker {slot.index + 1} did not start",
                        f"({e}); trying again",
                        f" ({e})",
                    ):
                        return

    async def _after_failure(self, slot: _Slot, what: str, now: str, last: str) -> bool:
        """One more failure of the slot's worker, a death or a start that did not get
        ready, counted alike: past MAX_QUICK_DEATHS in a row the group gives up (False);
        before that, a warning and a pause that grows with each failure (True).
        ``what`` names the worker and what happened, ``now`` ends the warning (and says
        what comes next), ``last`` ends the line that gives up."""
        slot.deaths += 1
        if slot.deaths > MAX_QUICK_DEATHS:
            self._fail(f"{what} {slot.deaths} times in a row{last}; stopping")
            return False
        delay = restart_delay(slot.deaths, self.first_delay)
        log.warning("%s %s in %.1f s", what, now, delay)
        await asyncio.sleep(delay)
        return True

    async def _reap(self, slot: _Slot) -> None:
        process = slot.process
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        await process.wait()
        self._forget(process.pid)

    def _forget(self, pid: int) -> None:
        """A dead worker's live gauges leave the sums (its counters stay counted)."""
        if self.metrics_dir is None:
            return
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, str(self.metrics_dir))  # type: ignore[no-untyped-call]

    def _fail(self, message: str) -> None:
        log.error("%s", message)
        if self.failed is not None and not self.failed.done():
            self.failed.set_exception(WorkersFailed(message))

    async def wait_failed(self) -> None:
        """Return never while the workers are fine; raise WorkersFailed if they are not."""
        if self.failed is None:
            await asyncio.Event().wait()
        else:
            await asyncio.shield(self.failed)

    async def stop(self) -> None:
        """SIGTERM to every worker (each answers what it holds, then exits), then wait."""
        self._stopping = True
        for watcher in self._watchers:
            watcher.cancel()
        for watcher in self._watchers:
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        self._watchers = []
        processes = [p for p in self.processes if p.returncode is None]
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                async with asyncio.timeout(STOP_TIMEOUT):
                    await process.wait()
            except TimeoutError:
                log.warning("worker %d did not stop; killing it", process.pid)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
            if process.returncode not in (0, None):
                log.warning("worker %d ended with %s", process.pid, exit_status(process.returncode))
        self._slots = []
        if self.failed is not None and not self.failed.done():
            self.failed.cancel()


async def publish_gauges() -> None:
    """In a worker: copy its gauges into its value file from time to time, for the first
    process's /metrics (nobody scrapes the worker itself)."""
    from telesrv.store.metrics import publish_sampled

    while True:
        publish_sampled()
        await asyncio.sleep(PARENT_POLL_INTERVAL)


# -- the worker's side: end with the parent -----------------------------------------------

PR_SET_PDEATHSIG = 1


def follow_parent() -> None:
    """In a worker: end (SIGTERM, the orderly way) when the process that started it dies.

    The kernel's parent-death signal covers a parent killed any way; a thread that polls
    the parent pid covers a parent that died before the signal was asked for, and
    systems without it."""
    parent = os.environ.get(PARENT_ENV)
    if not parent:
        return
    expected = int(parent)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    def poll() -> None:
        while os.getppid() == expected:
            time.sleep(PARENT_POLL_INTERVAL)
        log.warning("the serve process (pid %d) is gone; stopping", expected)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=poll, name="parent-watch", daemon=True).start()


# -- the data directory's owner -----------------------------------------------------------


class DataDirInUse(StartupError):
    """Said as any start-up refusal is: one line, exit status 1."""


class DataDirLock:
    """The data directory's owner: an exclusive lock on ``<data dir>/serve.lock``, held
    while `serve` runs; and its guests: a shared lock on ``join.lock``, held by every
    process that joined (``--join``, and the workers). A new owner is refused while
    either is held: a guest uses the embedded databases, which a new owner would
    restart under it. The kernel drops the locks when a process ends however it ends,
    so a killed server leaves nothing stale behind. Not inherited by child processes."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self.join_path = data_dir / JOIN_LOCK_FILE
        self._file: IO[str] | None = None
        self._joined: IO[str] | None = None

    def acquire(self) -> None:
        """Become the owner, or raise DataDirInUse."""
        file = self._locked(self.path, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if file is None:
            with open(self.path) as held:
                holder = held.read().strip()
            who = f"pid {holder}" if holder.isdigit() else "another process"
            raise DataDirInUse(
                f"data directory {self.path.parent} is in use by another telesrv serve "
                f"({who}); pass --join to add this process to that server"
            )
        guests = self._locked(self.join_path, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if guests is None:
            file.close()
            raise DataDirInUse(
                f"data directory {self.path.parent} is in use by processes that joined an "
                "earlier telesrv serve (--join); stop them, or pass --join"
            )
        guests.close()  # only looked at: a guest may join from now on
        file.seek(0)
        file.truncate()
        file.write(f"{os.getpid()}\n")
        file.flush()
        self._file = file

    def join(self) -> None:
        """Be a guest of the server on the data directory (waits out an owner's brief
        look at the guests)."""
        joined = self._locked(self.join_path, fcntl.LOCK_SH)
        assert joined is not None  # a blocking lock either succeeds or raises
        self._joined = joined

    def _locked(self, path: Path, operation: int) -> IO[str] | None:
        path.parent.mkdir(parents=True, exist_ok=True)
        file = open(path, "a+")  # noqa: SIM115 (held for the process's life)
        try:
            fcntl.flock(file.fileno(), operation)
        except OSError as e:
            file.close()
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            return None
        os.set_inheritable(file.fileno(), False)
        return file

    def release(self) -> None:
        for file in (self._file, self._joined):
            if file is not None:
                file.close()
        self._file = self._joined = None


# -- metrics of every worker ----------------------------------------------------------------


def prepare_metrics_dir(data_dir: Path) -> Path:
    """A fresh directory for the value files of this server's workers:
    ``<data dir>/metrics/<pid of serve>``. Those left by servers no longer running
    (killed ones included) are removed here."""
    root = data_dir / "metrics"
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():
        if old.name.isdigit() and not pid_alive(int(old.name)):
            shutil.rmtree(old, ignore_errors=True)
    mine = root / str(os.getpid())
    shutil.rmtree(mine, ignore_errors=True)
    mine.mkdir()
    return mine


class WorkersCollector:
    """What /metrics shows with workers: this process's own metrics plus the workers'
    value files, samples of the same name and labels added up (the gauges are
    declared 'livesum', so adding is right for every kind)."""

    def __init__(self, own: CollectorRegistry, directory: Path) -> None:
        self._own = own
        self._directory = directory

    def collect(self) -> Iterable[Metric]:
        from prometheus_client.multiprocess import MultiProcessCollector

        families: dict[str, Metric] = {}
        samples: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], Sample]] = {}
        reader = MultiProcessCollector(None, path=str(self._directory))  # type: ignore[no-untyped-call]
        workers: Iterable[Metric] = reader.collect()  # type: ignore[no-untyped-call]
        for family in itertools.chain(self._own.collect(), workers):
            known = families.get(family.name)
            if known is None:
                known = Metric(family.name, family.documentation, family.type, family.unit)
                families[family.name] = known
                samples[family.name] = {}
            elif known.type != family.type:
                continue
            found = samples[family.name]
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                before = found.get(key)
                found[key] = (
                    sample if before is None else sample._replace(value=before.value + sample.value)
                )
        for name, family in families.items():
            family.samples = list(samples[name].values())
            yield family
