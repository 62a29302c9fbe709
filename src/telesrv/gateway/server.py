"""The listening gateway: accepts connections, owns live sessions, pushes updates."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import resource
import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from telesrv.gateway.auth_keys import AuthKeys
from telesrv.gateway.budgets import TokenBucket
from telesrv.gateway.connection import ClientConnection
from telesrv.gateway.limits import GatewayLimits as GatewayLimits  # for Gateway(limits=...)
from telesrv.gateway.sessions import SessionEntry, SessionManager
from telesrv.gateway.websocket import WebSocketConnection
from telesrv.mtproto.handshake import AuthKeyExchange
from telesrv.mtproto.session import ServerSession
from telesrv.rpc.dispatcher import Dispatcher
from telesrv.rpc.help import ServerAddress
from telesrv.tl.layers import LAYER, downgrade_bytes, served_layer

log = logging.getLogger(__name__)
T = TypeVar("T")


UserResolver = Callable[[int], Awaitable[int | None]]

# Descriptors a process needs besides its client connections: listeners, database
# and Redis pools, files being served.
FD_MARGIN = 1024
# At most this long a stopping server answers the requests it read before the stop.
DRAIN_TIMEOUT = 10.0


def raise_open_files_limit(wanted: int) -> int:
    """Raise the soft limit on open descriptors to ``wanted``, within the hard limit
    (many systems start processes at 1024, far below the connections a gateway
    allows); returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted or (hard != resource.RLIM_INFINITY and soft >= hard):
        return soft
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target


async def _no_user(perm_auth_key_id: int) -> int | None:
    return None


class Gateway:
    def __init__(
        self,
        *,
        auth_keys: AuthKeys,
        dispatcher: Dispatcher,
        rsa_key: Any,
        fingerprint: int,
        salt_secret: bytes,
        resolve_user: UserResolver = _no_user,
        limits: GatewayLimits | None = None,
        clock: Callable[[], float] = time.time,
        random_bytes: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self.auth_keys = auth_keys
        self.dispatcher = dispatcher
        self.resolve_user = resolve_user
        self.limits = limits or GatewayLimits()
        self.clock = clock
        self.random_bytes = random_bytes
        self._rsa_numbers = rsa_key.private_numbers()
        self._fingerprint = fingerprint
        self._salt_secret = salt_secret
        self.connections: set[ClientConnection] = set()
        self.sessions: SessionManager[ClientConnection] = SessionManager(self._make_session)
        self.handshake_budget = TokenBucket(
            self.limits.handshakes_per_second, self.limits.handshake_burst
        )
        self._ip_handshake_budgets: dict[str, TokenBucket] = {}
        self.connections_per_ip: dict[str, int] = {}
        # Bytes of incomplete frames buffered by all connections together, and the
        # connections holding one, oldest frame first.
        self.incomplete_bytes = 0
        self.partial_frames: OrderedDict[ClientConnection, None] = OrderedDict()
        # Key-exchange arithmetic runs here; one thread keeps a handshake flood
        # from taking more than its share of the interpreter.
        self._cpu = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="telesrv-dh")
        self._flush_pending: set[SessionEntry[ClientConnection]] = set()
        self._server: asyncio.Server | None = None
        self._ws_servers: list[asyncio.Server] = []  # ws:// and wss:// may both listen
        self.address: ServerAddress | None = None  # what help.getConfig advertises
        self._housekeeping: asyncio.Task[None] | None = None
        self._key_cleanup: asyncio.Task[None] | None = None

    def _make_session(self, auth_key: bytes, auth_key_id: int, session_id: int) -> ServerSession:
        return ServerSession(
            auth_key=auth_key,
            auth_key_id=auth_key_id,
            session_id=session_id,
            salt_secret=self._salt_secret,
            random_bytes=self.random_bytes,
        )

    def new_handshake(self) -> AuthKeyExchange:
        return AuthKeyExchange(
            rsa_key=self._rsa_numbers,
            fingerprint=self._fingerprint,
            random_bytes=self.random_bytes,
        )

    def take_handshake(self, ip: str, now: float) -> bool:
        """Budget one new key exchange for a client at ``ip``: per address, then overall."""
        bucket = self._ip_handshake_budgets.get(ip)
        if bucket is None:
            bucket = TokenBucket(
                self.limits.handshakes_per_ip_per_second, self.limits.handshake_burst_per_ip
            )
            self._ip_handshake_budgets[ip] = bucket
        return bucket.take(now) and self.handshake_budget.take(now)

    def add_connection(self, ip: str) -> bool:
        """Count a new connection from ``ip``; False when one more is not allowed."""
        count = self.connections_per_ip.get(ip, 0)
        if count >= self.limits.max_connections_per_ip:
            return False
        self.connections_per_ip[ip] = count + 1
        return True

    def remove_connection(self, ip: str) -> None:
        count = self.connections_per_ip.get(ip, 0) - 1
        if count > 0:
            self.connections_per_ip[ip] = count
        else:
            self.connections_per_ip.pop(ip, None)

    async def run_cpu(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._cpu, fn, *args)

    # -- output -----------------------------------------------------------------------

    def schedule_flush(self, entry: SessionEntry[ClientConnection]) -> None:
        """Coalesce answers: everything queued in this loop iteration goes out together."""
        if not self._flush_pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._flush_pending.add(entry)

    def schedule_ack_flush(self, entry: SessionEntry[ClientConnection]) -> None:
        """Send the session's pending acks within ``ack_hold`` seconds: with the first
        answer flushed by then, or alone."""
        if entry.ack_timer is None:
            entry.ack_timer = asyncio.get_running_loop().call_later(
                self.limits.ack_hold, self._flush_held_acks, entry
            )

    def _flush_held_acks(self, entry: SessionEntry[ClientConnection]) -> None:
        entry.ack_timer = None
        if entry.session.acks_queued:  # else an answer took them already
            self.schedule_flush(entry)

    def _flush(self) -> None:
        pending, self._flush_pending = self._flush_pending, set()
        now = self.clock()
        # One write per connection per turn of the loop: every packet of each of its
        # sessions, in order (joined on TCP, each write is a system call; one message
        # per packet on WebSocket).
        out: dict[ClientConnection, list[bytes]] = {}
        for entry in pending:
            conn = entry.connection
            if conn is None:
                continue  # kept in the session until the client reconnects
            packets = entry.session.flush(now)
            if packets:
                encode = conn.codec.encode
                chunks = out.get(conn)
                if chunks is None:
                    out[conn] = chunks = []
                chunks.extend(encode(packet) for packet in packets)
        for conn, chunks in out.items():
            conn.write_packets(chunks)

    def would_push(self, user_id: int, exclude: tuple[int, int] | None = None) -> bool:
        """Whether ``push_to_user`` would reach any session (before rendering for it)."""
        return any(
            entry.connection is not None
            and entry.wants_updates
            and (exclude is None or (entry.auth_key_id, entry.session_id) != exclude)
            for entry in self.sessions.sessions_of_user(user_id)
        )

    def has_sessions(self, user_id: int) -> bool:
        """Whether the user has a session here (online or not): else the outbox need not
        render their updates."""
        return bool(self.sessions.sessions_of_user(user_id))

    def connection_count(self) -> int:
        return len(self.connections)

    def session_count(self) -> int:
        return len(self.sessions)

    def push_to_user(
        self, user_id: int, body: bytes, exclude: tuple[int, int] | None = None
    ) -> int:
        """Queue ``body`` (a serialized ``updates``) on every online session of the user,
        except the one identified by (auth_key_id, session_id); returns how many."""
        pushed = 0
        by_layer: dict[int, bytes | None] = {}  # older layers: converted once per push
        for entry in self.sessions.sessions_of_user(user_id):
            if entry.connection is None or not entry.wants_updates:
                continue  # offline devices catch up with updates.getDifference
            if exclude is not None and (entry.auth_key_id, entry.session_id) == exclude:
                continue
            data = body
            if entry.layer != LAYER:
                layer = served_layer(entry.layer)
                if layer not in by_layer:
                    by_layer[layer] = downgrade_bytes(body, layer)
                converted = by_layer[layer]
                if converted is None:
                    continue  # nothing in it that layer can parse
                data = converted
            entry.session.send_update(data)
            self.schedule_flush(entry)
            pushed += 1
        return pushed

    def push_to_key(self, perm_auth_key_id: int, body: bytes) -> int:
        """Queue ``body`` (a serialized ``updates``) on every online session of the key,
        signed in or not (a QR login's waiting device has no account yet)."""
        pushed = 0
        for entry in self.sessions.sessions_of_key(perm_auth_key_id):
            if entry.connection is None or not entry.wants_updates:
                continue
            data = body
            if entry.layer != LAYER:
                converted = downgrade_bytes(body, served_layer(entry.layer))
                if converted is None:
                    continue
                data = converted
            entry.session.send_update(data)
            self.schedule_flush(entry)
            pushed += 1
        return pushed

    # -- lifecycle --------------------------------------------------------------------

    # TCP and WebSocket connections count against the same limits, when made
    # (ClientConnection.connection_made): past them one is accepted only to be closed
    # at once, and the listener keeps serving others.

    def _accept(self) -> asyncio.Protocol:
        return ClientConnection(self)

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> tuple[str, int]:
        """Listen; with ``reuse_port``, other processes listen on the same port too and
        the kernel spreads new connections among them."""
        wanted = self.limits.max_connections + FD_MARGIN
        allowed = raise_open_files_limit(wanted)
        if allowed < wanted:
            log.warning(
                "the open-file limit (ulimit -n) is %d: fewer than the %d connections "
                "allowed (max_connections) will be accepted",
                allowed,
                self.limits.max_connections,
            )
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._accept,
            host,
            port,
            backlog=self.limits.listen_backlog,
            reuse_address=True,
            reuse_port=reuse_port or None,
        )
        self._housekeeping = loop.create_task(self._housekeep())
        self._key_cleanup = loop.create_task(self._clean_keys())
        sock = self._server.sockets[0].getsockname()
        if self.address is not None and self.address.port == 0:
            self.address.port = sock[1]  # --listen with port 0 picks one at bind time
        return sock[0], sock[1]

    async def start_websocket(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        reuse_port: bool = False,
    ) -> tuple[str, int]:
        """Listen for browsers (MTProto over WebSocket; wss:// with ``ssl_context``),
        alongside the TCP listener of :meth:`start`, whose deadlines cover it too."""
        loop = asyncio.get_running_loop()
        listener = await loop.create_server(
            lambda: WebSocketConnection(self, ssl_context),
            host,
            port,
            backlog=self.limits.listen_backlog,
            reuse_address=True,
            reuse_port=reuse_port or None,
        )
        self._ws_servers.append(listener)
        sock = listener.sockets[0].getsockname()
        return sock[0], sock[1]

    async def _housekeep(self) -> None:
        while True:
            await asyncio.sleep(self.limits.housekeeping_interval)
            now = self.clock()
            for conn in list(self.connections):
                conn.check_health(now)
            self.sessions.expire(now)
            budgets = self._ip_handshake_budgets
            for ip in [ip for ip, bucket in budgets.items() if bucket.full(now)]:
                del budgets[ip]

    async def _clean_keys(self) -> None:
        """Forget keys nobody can use any more (expired) or nobody logged in with."""
        while True:
            try:
                deleted = await self.auth_keys.delete_unused(
                    self.clock(), self.limits.unused_auth_key_ttl
                )
                if deleted:
                    log.info("deleted %d expired or unused auth keys", deleted)
            except Exception:
                log.warning("auth key cleanup failed; trying again later", exc_info=True)
            await asyncio.sleep(self.limits.auth_key_cleanup_interval)

    async def stop(self, grace: float = DRAIN_TIMEOUT) -> None:
        """Stop accepting and reading, answer the requests already read (up to
        ``grace`` s in all), then close the connections.

        A request read before the stop is answered, so a client never holds an answer
        the server lost; one the client sent later was never read, and it sends it
        again to the next server (same msg_id and random_id, so nothing doubles)."""
        listeners = [s for s in (self._server, *self._ws_servers) if s is not None]
        for listener in listeners:
            listener.close()
        for task in (self._housekeeping, self._key_cleanup):
            if task is not None:
                task.cancel()
        for conn in list(self.connections):
            conn.drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        # A queued frame may start a call once the one before it ends: ask again.
        while True:
            unfinished = [t for conn in list(self.connections) for t in conn.unfinished()]
            left = deadline - loop.time()
            if not unfinished or left <= 0:
                break
            await asyncio.wait(unfinished, timeout=left)
        if unfinished:
            log.warning("stopping with %d requests unanswered after %.0f s", len(unfinished), grace)
        for conn in self.connections:
            for entry in conn.sessions:
                if entry.ack_timer is not None:  # held acks go now, with what is left
                    entry.ack_timer.cancel()
                    entry.ack_timer = None
                    self._flush_pending.add(entry)
        self._flush()
        for conn in list(self.connections):
            conn.close()
        for listener in listeners:
            await listener.wait_closed()
        self._cpu.shutdown(wait=False, cancel_futures=True)
