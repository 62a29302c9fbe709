"""A Citus cluster on one machine for the tests: a coordinator and two workers.

Each node is a PostgreSQL 15 (Debian's, /usr/lib/postgresql/15/bin) with Citus
preloaded, initdb'd into a temporary directory of its own. The nodes listen on no TCP
port at all: each on a unix socket in its own directory. Citus takes a socket directory
as a node's name (libpq reads a host starting with "/" as one), and the coordinator and
the workers reach each other through those sockets, so two runs at once, or any other
server on the machine, can never take a node's address. Every node uses the same port
number; it only names the socket file.

``.ci/citus`` builds Citus and installs it into that PostgreSQL.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

PG_BIN = Path("/usr/lib/postgresql/15/bin")
# Only names the socket file (.s.PGSQL.<port>) in each node's own directory.
PORT = 5432
SUPERUSER = "postgres"
WORKERS = 2
READY_SECONDS = 60.0
STOP_SECONDS = 30.0
# Unix socket paths are limited to 108 bytes including the terminating NUL on Linux.
_MAX_SOCKET_PATH = 107
# As the embedded server: a UTF-8 locale makes pg_trgm see every script's letters.
_LOCALE = "C.UTF-8"
_DATABASE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class CitusClusterError(RuntimeError):
    pass


def citus_missing() -> str | None:
    """Why no Citus cluster can start here, or None when one can."""
    for program in ("initdb", "postgres", "psql", "pg_isready", "pg_config"):
        if not (PG_BIN / program).exists():
            return f"no PostgreSQL 15 at {PG_BIN} (no {program}; install it with .ci/citus)"
    found = subprocess.run(
        [str(PG_BIN / "pg_config"), "--pkglibdir", "--sharedir"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        return f"{PG_BIN / 'pg_config'} failed: {found.stderr.strip()}"
    pkglibdir, sharedir = found.stdout.split()
    if not (Path(pkglibdir) / "citus.so").exists():
        return (
            f"Citus is not installed into PostgreSQL 15 (no citus.so in {pkglibdir}; run .ci/citus)"
        )
    if not (Path(sharedir) / "extension" / "citus.control").exists():
        return "Citus is not installed into PostgreSQL 15 (no citus.control; run .ci/citus)"
    if not (Path(sharedir) / "extension" / "pg_trgm.control").exists():
        return "PostgreSQL 15 has no pg_trgm extension"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SUPERUSER)
        except KeyError:
            return f"running as root, and there is no {SUPERUSER!r} user to run PostgreSQL as"
    return None


def _server_user() -> str | None:
    # PostgreSQL refuses to run as root: then it runs as Debian's postgres user.
    return SUPERUSER if os.geteuid() == 0 else None


@dataclass
class CitusNode:
    name: str  # "coordinator", "worker1", ...
    directory: Path  # its data directory, which holds its socket too
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None  # the server's stderr

    @property
    def host(self) -> str:
        """The node's address as Citus and libpq take it: its socket directory."""
        return str(self.directory)

    def url(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@/{database}?host={self.directory}&port={PORT}"


@dataclass
class LocalCitusCluster:
    """Start with ``start()``, stop with ``stop()`` (which also removes the directory)."""

    directory: Path | None = None
    coordinator: CitusNode | None = None
    workers: list[CitusNode] = field(default_factory=list)

    @property
    def nodes(self) -> list[CitusNode]:
        return ([self.coordinator] if self.coordinator else []) + self.workers

    def url(self, database: str) -> str:
        """The URL of ``database`` on the coordinator, where clients connect."""
        if self.coordinator is None:
            raise CitusClusterError("the Citus cluster is not running")
        return self.coordinator.url(database)

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        # Not under pytest's temporary directories: those are private to the user running
        # the tests (PostgreSQL runs as another when that is root), and may be too deep
        # for a socket path.
        self.directory = Path(tempfile.mkdtemp(prefix="telesrv-citus-"))
        if len(str(self.directory / "coordinator" / f".s.PGSQL.{PORT}")) > _MAX_SOCKET_PATH:
            raise CitusClusterError(f"the temporary directory {self.directory} is too deep")
        self._give_to_server_user(self.directory)
        self.coordinator = CitusNode("coordinator", self.directory / "coordinator")
        self.workers = [
            CitusNode(f"worker{i}", self.directory / f"worker{i}") for i in range(1, WORKERS + 1)
        ]
        for node in self.nodes:
            self._initdb(node)
        for node in self.nodes:
            node.log = open(node.directory / "server.log", "wb")  # noqa: SIM115 - closed in stop()
            node.process = subprocess.Popen(
                [str(PG_BIN / "postgres"), "-D", str(node.directory)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=node.log,
                start_new_session=True,
                user=_server_user(),
            )
        deadline = time.monotonic() + READY_SECONDS
        for node in self.nodes:
            self._wait_ready(node, deadline)

    def create_database(self, name: str) -> str:
        """``name`` on every node (Citus 13 does not create databases on the workers), with
        the citus and pg_trgm extensions, the workers added to the coordinator's
        metadata (it is per database); returns its URL on the coordinator."""
        if not _DATABASE_NAME.match(name):
            raise ValueError(f"not a plain database name: {name!r}")
        if self.coordinator is None:
            raise CitusClusterError("the Citus cluster is not running")
        for node in self.nodes:
            self.psql(node, "postgres", f'CREATE DATABASE "{name}"')
            self.psql(node, name, "CREATE EXTENSION citus; CREATE EXTENSION pg_trgm;")
        statements = [f"SELECT citus_set_coordinator_host('{self.coordinator.host}', {PORT});"]
        statements += [f"SELECT citus_add_node('{w.host}', {PORT});" for w in self.workers]
        self.psql(self.coordinator, name, "\n".join(statements))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        if not _DATABASE_NAME.match(name):
            raise ValueError(f"not a plain database name: {name!r}")
        for node in self.nodes:
            self.psql(node, "postgres", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def psql(self, node: CitusNode, database: str, sql: str) -> str:
        """Runs ``sql`` on ``node`` (stops at the first error); returns its unaligned output."""
        done = subprocess.run(
            [
                str(PG_BIN / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                "-h", node.host, "-p", str(PORT), "-U", SUPERUSER, "-d", database,
            ],
            input=sql.encode(),
            capture_output=True,
            timeout=READY_SECONDS,
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise CitusClusterError(
                f"psql on {node.name}/{database} failed: {done.stderr.decode(errors='replace')}"
            )
        return done.stdout.decode()

    def stop(self) -> None:
        """Stops every node (fast shutdown, then a kill past a generous deadline) and
        removes the cluster's directory."""
        running = [node.process for node in self.nodes if node.process is not None]
        for process in running:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for process in running:
            try:
                process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for node in self.nodes:
            node.process = None
            if node.log is not None:
                node.log.close()
                node.log = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
        self.coordinator = None
        self.workers = []

    def _initdb(self, node: CitusNode) -> None:
        done = subprocess.run(
            [
                str(PG_BIN / "initdb"), "-D", str(node.directory), "-U", SUPERUSER,
                "-A", "trust", "-E", "UTF8", f"--locale={_LOCALE}", "--no-sync",
            ],
            capture_output=True,
            timeout=READY_SECONDS,
            check=False,
            user=_server_user(),
        )  # fmt: skip
        if done.returncode != 0:
            raise CitusClusterError(
                f"initdb for {node.name} failed: {done.stderr.decode(errors='replace')}"
            )
        with open(node.directory / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# telesrv's Citus test cluster\n"
                "shared_preload_libraries = 'citus'\n"
                # Citus commits a transaction that wrote on two workers in two phases.
                "max_prepared_transactions = 200\n"
                "listen_addresses = ''\n"
                f"unix_socket_directories = '{node.directory}'\n"
                f"port = {PORT}\n"
            )

    def _wait_ready(self, node: CitusNode, deadline: float) -> None:
        assert node.process is not None
        while True:
            if node.process.poll() is not None:
                log = (node.directory / "server.log").read_text(errors="replace")
                raise CitusClusterError(f"PostgreSQL of {node.name} exited:\n{log[-2000:]}")
            ready = subprocess.run(
                [
                    str(PG_BIN / "pg_isready"), "-q", "-h", node.host, "-p", str(PORT),
                    "-U", SUPERUSER, "-d", "postgres",
                ],
                check=False,
            )  # fmt: skip
            if ready.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise CitusClusterError(f"PostgreSQL of {node.name} is not ready")
            time.sleep(0.1)

    @staticmethod
    def _give_to_server_user(directory: Path) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SUPERUSER)
            os.chown(directory, entry.pw_uid, entry.pw_gid)
