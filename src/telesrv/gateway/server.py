"""The listening gateway: accepts connections, owns live sessions, pushes updates."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from telesrv.gateway.auth_keys import AuthKeys
from telesrv.gateway.connection import ClientConnection
from telesrv.gateway.sessions import SessionEntry, SessionManager
from telesrv.mtproto.handshake import AuthKeyExchange
from telesrv.mtproto.session import ServerSession
from telesrv.rpc.dispatcher import Dispatcher
from telesrv.rpc.help import ServerAddress
from telesrv.tl.layers import LAYER, downgrade_bytes, served_layer

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class GatewayLimits:
    max_frame: int = 1024 * 1024 + 4096  # largest transport payload accepted
    max_queued_frames: int = 64  # frames waiting per connection before reading pauses
    max_inflight_rpcs: int = 32  # concurrent RPCs per connection
    write_buffer_high: int = 256 * 1024  # pause reading past this much unsent output
    max_write_buffer: int = 8 * 1024 * 1024  # disconnect past this much unsent output
    slow_reader_timeout: float = 30.0
    idle_timeout: float = 120.0
    handshake_timeout: float = 30.0
    max_connections: int = 10_000
    handshakes_per_second: float = 200.0  # new key exchanges, all connections together
    handshake_burst: int = 400


class TokenBucket:
    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.updated: float | None = None

    def take(self, now: float) -> bool:
        if self.updated is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


UserResolver = Callable[[int], Awaitable[int | None]]


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
        self.sessions = SessionManager(self._make_session)
        self.handshake_budget = TokenBucket(
            self.limits.handshakes_per_second, self.limits.handshake_burst
        )
        # Key-exchange arithmetic runs here; one thread keeps a handshake flood
        # from taking more than its share of the interpreter.
        self._cpu = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="telesrv-dh")
        self._flush_pending: set[SessionEntry] = set()
        self._server: asyncio.Server | None = None
        self.address: ServerAddress | None = None  # what help.getConfig advertises
        self._housekeeping: asyncio.Task[None] | None = None

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

    async def run_cpu(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._cpu, fn, *args)

    # -- output -----------------------------------------------------------------------

    def schedule_flush(self, entry: SessionEntry) -> None:
        """Coalesce answers: everything queued in this loop iteration goes out together."""
        if not self._flush_pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._flush_pending.add(entry)

    def _flush(self) -> None:
        pending, self._flush_pending = self._flush_pending, set()
        now = self.clock()
        for entry in pending:
            conn = entry.connection
            if conn is None:
                continue  # kept in the session until the client reconnects
            for packet in entry.session.flush(now):
                conn.write(conn.codec.encode(packet))

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
            if entry.layer < LAYER:
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

    # -- lifecycle --------------------------------------------------------------------

    def _accept(self) -> asyncio.Protocol:
        conn = ClientConnection(self)
        if len(self.connections) >= self.limits.max_connections:
            # Accepted only to be closed at once: the listener keeps serving others.
            asyncio.get_running_loop().call_soon(conn.abort)
        return conn

    async def start(self, host: str, port: int) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._accept, host, port, reuse_address=True)
        self._housekeeping = loop.create_task(self._housekeep())
        sock = self._server.sockets[0].getsockname()
        if self.address is not None and self.address.port == 0:
            self.address.port = sock[1]  # --listen with port 0 picks one at bind time
        return sock[0], sock[1]

    async def _housekeep(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = self.clock()
            for conn in list(self.connections):
                conn.check_health(now)
            self.sessions.expire(now)

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let running RPCs finish (up to ``grace`` s), close the rest."""
        if self._server is not None:
            self._server.close()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
        running = [
            t for conn in self.connections for e in conn.sessions for t in e.running.values()
        ]
        if running:
            await asyncio.wait(running, timeout=grace)
        self._flush()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
        self._cpu.shutdown(wait=False, cancel_futures=True)
