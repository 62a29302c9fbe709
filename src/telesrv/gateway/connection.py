"""One client TCP connection: transport framing, key exchange, encrypted traffic.

Frames are processed in order by one task per connection, which exists while frames
are waiting (an idle connection holds none); RPCs run as separate
tasks (bounded per connection) so a slow call does not hold up pings or other
calls. Reading pauses while too much input is queued or the client is not
reading its answers; a client that stays behind is disconnected.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from telesrv.gateway.metrics import HANDSHAKES
from telesrv.mtproto import session_events
from telesrv.mtproto.crypto import CryptoError, decrypt_client_message_with_ack
from telesrv.mtproto.handshake import (
    AuthKeyExchange,
    HandshakeError,
    NewAuthKey,
    encode_plain,
    parse_plain,
)
from telesrv.mtproto.msgid import ServerMsgIds
from telesrv.mtproto.transport import Frame, ServerTransport, TransportError
from telesrv.rpc.context import RequestContext
from telesrv.tl import DecodeError, decode, mt
from telesrv.tl.layers import served_layer

if TYPE_CHECKING:
    from telesrv.gateway.auth_keys import AuthKeyRecord, AuthKeys
    from telesrv.gateway.limits import GatewayLimits
    from telesrv.gateway.sessions import SessionEntry, SessionManager
    from telesrv.rpc.dispatcher import Dispatcher

log = logging.getLogger(__name__)

_SESSION_ID = struct.Struct("<q")
_KEY_ID = struct.Struct("<q")

TRANSPORT_ERROR_AUTH_KEY = -404
TRANSPORT_ERROR_FLOOD = -429

_EXCHANGE_STARTS = (mt.ReqPqMulti, mt.ReqPq)

T = TypeVar("T")


class ConnectionHost(Protocol):
    """What a connection uses of the gateway that accepted it: the limits and clock,
    what all connections share (their count, budgets, buffered partial frames, the
    session table, the key-exchange thread), and where requests and answers go.
    :class:`~telesrv.gateway.server.Gateway` is one. Described here rather than
    imported because the gateway imports this module to create its connections."""

    # Bytes of all connections' partial frames; each adds and removes its own share.
    incomplete_bytes: int

    @property
    def limits(self) -> GatewayLimits: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def random_bytes(self) -> Callable[[int], bytes]: ...

    @property
    def connections(self) -> set[ClientConnection]: ...

    @property
    def partial_frames(self) -> OrderedDict[ClientConnection, None]: ...

    @property
    def sessions(self) -> SessionManager[ClientConnection]: ...

    @property
    def auth_keys(self) -> AuthKeys: ...

    @property
    def dispatcher(self) -> Dispatcher: ...

    @property
    def resolve_user(self) -> Callable[[int], Awaitable[int | None]]: ...

    def add_connection(self, ip: str) -> bool: ...

    def remove_connection(self, ip: str) -> None: ...

    def take_handshake(self, ip: str, now: float) -> bool: ...

    def new_handshake(self) -> AuthKeyExchange: ...

    async def run_cpu(self, fn: Callable[..., T], *args: Any) -> T: ...

    def schedule_flush(self, entry: SessionEntry[ClientConnection]) -> None: ...

    def schedule_ack_flush(self, entry: SessionEntry[ClientConnection]) -> None: ...


class ClientConnection(asyncio.Protocol):
    def __init__(self, gateway: ConnectionHost) -> None:
        self.gateway = gateway
        self.limits = gateway.limits
        self.codec = ServerTransport(
            max_payload=self.limits.max_frame, random_bytes=gateway.random_bytes
        )
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.ip: str | None = None  # counted against the per-address limit while set
        self.sessions: set[SessionEntry[ClientConnection]] = set()
        self.auth_key: AuthKeyRecord | None = None
        self._handshake: AuthKeyExchange | None = None
        # What an idle connection holds is kept small (a process may hold tens of
        # thousands): the message ids of unencrypted answers and the task that
        # handles frames exist only while used, the frames waiting for it are a plain
        # list (at most max_queued_frames long) rather than a Queue, and the RPC slots
        # a count (only the frame task waits for one, so one future at most).
        self._plain_ids: ServerMsgIds | None = None
        self._inbox: list[Frame] = []
        self._queued_bytes = 0  # payload bytes of the frames in _inbox
        self._worker: asyncio.Task[None] | None = None  # while frames are handled
        self._rpcs_running = 0
        self._rpc_slot_freed: asyncio.Future[None] | None = None  # while waiting for one
        self._reading_paused = False
        self._draining = False  # the server stops: nothing more is read
        self._writing_paused_at: float | None = None
        self._closed = False
        self.created_at = gateway.clock()
        # Time of the last complete, valid message: bytes alone do not keep a connection.
        self.last_activity = self.created_at
        # When the first byte of the frame still incomplete arrived (None: no partial frame).
        self.frame_started_at: float | None = None
        self._incomplete = 0  # this connection's share of gateway.incomplete_bytes
        self._key_check: asyncio.Task[None] | None = None
        self.disconnect_at: float | None = None  # set by ping_delay_disconnect

    # -- asyncio.Protocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transport has the Transport methods but does not subclass it.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.transport.set_write_buffer_limits(high=self.limits.write_buffer_high)
        if len(self.gateway.connections) >= self.limits.max_connections:
            # Counted here, where the transport exists: an abort scheduled from the
            # listener's factory ran before it and closed nothing.
            log.info("closing %s: %d connections already", self.peer, self.limits.max_connections)
            self.abort()
            return
        self.gateway.connections.add(self)
        ip = peer[0] if isinstance(peer, tuple) else str(peer)
        if not self.gateway.add_connection(ip):
            log.info("closing %s: too many connections from %s", self.peer, ip)
            self.abort()
            return
        self.ip = ip

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        try:
            frames = self.codec.feed(data)
        except TransportError as e:
            log.debug("closing %s: %s", self.peer, e.reason)
            self.abort()
            return
        if self._track_incomplete(frames):
            return
        if not frames:
            return
        for frame in frames:
            self._inbox.append(frame)
            self._queued_bytes += len(frame.payload)
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._process_frames())
        if self._inbox_full() and not self._reading_paused:
            self._pause_reading()

    def _track_incomplete(self, frames: list[Frame]) -> bool:
        """Account for a partial frame after new input; True when the connection closed."""
        gateway = self.gateway
        pending = self.codec.buffered
        gateway.incomplete_bytes += pending - self._incomplete
        self._incomplete = pending
        partial = gateway.partial_frames
        if not pending:
            self.frame_started_at = None
            partial.pop(self, None)
        elif frames or self.frame_started_at is None:
            self.frame_started_at = gateway.clock()  # a new frame began
            partial.pop(self, None)
            partial[self] = None  # the newest partial frame goes last
        # Over the budget, the oldest incomplete frames go first: a client sending at a
        # normal pace completes its frames at once, one holding them open loses them.
        while gateway.incomplete_bytes > self.limits.incomplete_frames_budget and partial:
            oldest = next(iter(partial))
            oldest.drop_incomplete()
        return self._closed

    def drop_incomplete(self) -> None:
        """Close this connection for the incomplete-frame budget; its bytes count no more."""
        log.info("closing %s: incomplete frames over budget", self.peer)
        self._forget_incomplete()
        self.abort()

    def _forget_incomplete(self) -> None:
        self.gateway.incomplete_bytes -= self._incomplete
        self._incomplete = 0
        self.gateway.partial_frames.pop(self, None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._forget_incomplete()
        if self.ip is not None:
            self.gateway.remove_connection(self.ip)
            self.ip = None
        self.gateway.connections.discard(self)
        self.gateway.sessions.detach(self, self.gateway.clock())
        if self._worker is not None:
            self._worker.cancel()

    def pause_writing(self) -> None:
        self._writing_paused_at = self.gateway.clock()
        self._pause_reading()

    def resume_writing(self) -> None:
        self._writing_paused_at = None
        if not self._inbox_full():
            self._resume_reading()

    # -- flow control ------------------------------------------------------------------

    def _inbox_full(self) -> bool:
        limits = self.limits
        return (
            len(self._inbox) >= limits.max_queued_frames
            or self._queued_bytes >= limits.max_queued_bytes
        )

    def _inbox_below_half(self) -> bool:
        limits = self.limits
        return (
            len(self._inbox) < limits.max_queued_frames // 2
            and self._queued_bytes < limits.max_queued_bytes // 2
        )

    def _pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None and not self._closed:
            self._reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._draining:
            return
        if self._reading_paused and self.transport is not None and not self._closed:
            self._reading_paused = False
            self.transport.resume_reading()

    def drain(self) -> None:
        """The server stops: read no more requests. What was read before is still
        handled and answered (see :meth:`unfinished`)."""
        self._pause_reading()
        self._draining = True

    def unfinished(self) -> list[asyncio.Task[None]]:
        """The work already taken in: the queued frames' task and the running calls."""
        tasks = [t for entry in self.sessions for t in entry.running.values()]
        if self._worker is not None:
            tasks.append(self._worker)
        return tasks

    def check_health(self, now: float) -> None:
        """Called periodically by the gateway: idle, slow-reader and handshake deadlines."""
        limits = self.limits
        if self._closed:
            return
        if self.auth_key is None and now - self.created_at > limits.handshake_timeout:
            log.debug("closing %s: no key after %.0fs", self.peer, limits.handshake_timeout)
            self.abort()
        elif (
            self.frame_started_at is not None and now - self.frame_started_at > limits.frame_timeout
        ):
            log.debug("closing %s: frame incomplete after %.0fs", self.peer, limits.frame_timeout)
            self.abort()
        elif self._key_expired(now) and self._key_check is None:
            self._key_check = asyncio.get_running_loop().create_task(self._recheck_key(now))
        elif now - self.last_activity > limits.idle_timeout:
            log.debug("closing %s: idle", self.peer)
            self.abort()
        elif self.disconnect_at is not None and now >= self.disconnect_at:
            log.debug("closing %s: ping_delay_disconnect expired", self.peer)
            self.close()
        elif (
            self._writing_paused_at is not None
            and now - self._writing_paused_at > limits.slow_reader_timeout
        ):
            log.info("closing %s: not reading its answers", self.peer)
            self.abort()

    async def _recheck_key(self, now: float) -> None:
        """The temporary key's expiry passed: close with -404 unless a binding renewed it."""
        assert self.auth_key is not None
        try:
            key = await self.gateway.auth_keys.get(self.auth_key.auth_key_id, now)
        except Exception:
            log.warning("closing %s: cannot check its key", self.peer, exc_info=True)
            key = None
        if key is None:
            log.debug("closing %s: its temporary key expired", self.peer)
            self.send_transport_error(TRANSPORT_ERROR_AUTH_KEY)
        else:
            self.auth_key = key
        self._key_check = None

    def _key_expired(self, now: float) -> bool:
        key = self.auth_key
        return key is not None and key.expires_at is not None and key.expires_at <= now

    def close(self) -> None:
        if not self._closed and self.transport is not None:
            self._closed = True
            self.transport.close()

    def abort(self) -> None:
        if not self._closed and self.transport is not None:
            self._closed = True
            self.transport.abort()

    def write(self, data: bytes) -> None:
        if self._closed or self.transport is None:
            return
        self.transport.write(data)
        if self.transport.get_write_buffer_size() > self.limits.max_write_buffer:
            unread = self.limits.max_write_buffer
            log.info("closing %s: %d bytes of answers unread", self.peer, unread)
            self.abort()

    def write_packets(self, packets: list[bytes]) -> None:
        """Encoded transport packets, in order. On a byte stream they go in one write
        (each write is a system call); a message-based transport keeps them apart."""
        self.write(packets[0] if len(packets) == 1 else b"".join(packets))

    def send_transport_error(self, code: int) -> None:
        if self.codec.kind is not None:
            self.write(self.codec.encode_error(code))
        self.close()

    # -- frame processing ---------------------------------------------------------------

    async def _process_frames(self) -> None:
        """Handle the queued frames in order, then end: the next frame to arrive
        starts a new task (data_received), so an idle connection holds none."""
        inbox = self._inbox
        try:
            while inbox and not self._closed:
                frame = inbox.pop(0)  # a short list: at most max_queued_frames
                self._queued_bytes -= len(frame.payload)
                await self._handle_frame(frame)
                if self._reading_paused and self._writing_paused_at is None:
                    if self._inbox_below_half():
                        self._resume_reading()
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection %s failed", self.peer)
            self.abort()
        finally:
            self._worker = None

    async def _handle_frame(self, frame: Frame) -> None:
        payload = frame.payload
        if len(payload) < 8:
            # A 4-byte payload from a client is not a valid message.
            self.abort()
            return
        (key_id,) = _KEY_ID.unpack_from(payload, 0)
        if key_id == 0:
            await self._handle_plain(payload)
        else:
            await self._handle_encrypted(key_id, frame)

    async def _handle_plain(self, payload: bytes) -> None:
        gateway = self.gateway
        try:
            message = parse_plain(payload)
            request = decode(message.body, exact=False)
        except (HandshakeError, DecodeError) as e:
            log.debug("closing %s: bad unencrypted message: %s", self.peer, e)
            self.abort()
            return
        self.last_activity = gateway.clock()
        # Every exchange is budgeted where it starts, also a new one on the same connection.
        if isinstance(request, _EXCHANGE_STARTS):
            if not gateway.take_handshake(self.ip or self.peer, gateway.clock()):
                self.send_transport_error(TRANSPORT_ERROR_FLOOD)
                return
        if self._handshake is None:
            self._handshake = gateway.new_handshake()
        try:
            # The DH and RSA arithmetic takes milliseconds of CPU: run it off the
            # event loop so other connections keep being served meanwhile.
            answer, new_key = await gateway.run_cpu(
                self._handshake.handle, request, int(gateway.clock())
            )
            if new_key is not None:
                created = await self._store_key(new_key)
                if created is None:
                    return
                if not created:
                    answer = self._handshake.retry(new_key)
                else:
                    HANDSHAKES.labels("created").inc()
                    if new_key.auth_key[0] == 0:
                        # About one key in 256. Several client libraries drop the
                        # zero when they turn the shared number into bytes, fail
                        # their check of dh_gen_ok and run the exchange again; this
                        # line explains the reconnect an operator will see.
                        log.info(
                            "new auth key %016x for %s begins with a zero byte",
                            new_key.auth_key_id & 0xFFFFFFFFFFFFFFFF,
                            self.peer,
                        )
        except HandshakeError as e:
            HANDSHAKES.labels("failed").inc()
            log.debug("closing %s: handshake failed: %s", self.peer, e)
            self.abort()
            return
        if self._plain_ids is None:
            self._plain_ids = ServerMsgIds()
        msg_id = self._plain_ids.next(gateway.clock(), response=True)
        self.write(self.codec.encode(encode_plain(msg_id, answer.to_bytes())))

    async def _store_key(self, new_key: NewAuthKey) -> bool | None:
        """Store the key an exchange made: whether its id was free, or None when the
        key could not be stored in time (the connection is closed then)."""
        limits = self.limits
        try:
            async with asyncio.timeout(limits.key_store_timeout):
                return await self.gateway.auth_keys.create(
                    new_key.auth_key_id,
                    new_key.auth_key,
                    is_temp=new_key.is_temp,
                    expires_at=new_key.expires_at,
                )
        except (TimeoutError, OSError) as e:  # the database does not answer, or is gone
            HANDSHAKES.labels("failed").inc()
            log.info(
                "closing %s: its new key was not stored within %.0fs (%r)",
                self.peer,
                limits.key_store_timeout,
                e,
            )
            self.abort()
            return None

    async def _handle_encrypted(self, key_id: int, frame: Frame) -> None:
        gateway = self.gateway
        now = gateway.clock()
        key = self.auth_key
        if key is None or key.auth_key_id != key_id or self._key_expired(now):
            # An expired temporary key is looked up again: a new binding may renew it.
            key = await gateway.auth_keys.get(key_id, now)
            if key is None:
                self.send_transport_error(TRANSPORT_ERROR_AUTH_KEY)
                return
            self.auth_key = key
        try:
            plaintext, ack_token = decrypt_client_message_with_ack(
                key.auth_key, frame.payload[8:], allow_trailing=frame.padded
            )
        except CryptoError:
            log.debug("closing %s: message does not decrypt", self.peer)
            self.send_transport_error(TRANSPORT_ERROR_AUTH_KEY)
            return
        self.last_activity = now
        if frame.quick_ack:
            self.write(self.codec.encode_quick_ack(ack_token))
        (session_id,) = _SESSION_ID.unpack_from(plaintext, 8)
        entry = gateway.sessions.attach(
            key.auth_key,
            key.auth_key_id,
            key.perm_auth_key_id or key.auth_key_id,
            session_id,
            self,
            now,
        )
        if not entry.layer_known:
            await self._restore_layer(entry)
        events = entry.session.receive(plaintext, now)
        requests = False
        for event in events:
            await self._handle_event(entry, event)
            requests = requests or isinstance(event, session_events.RpcRequest)
        if requests and entry.session.only_acks_queued:
            # Nothing to send yet but acks: they wait a moment for the answers, most
            # of which are ready by then, to leave in the same packet.
            gateway.schedule_ack_flush(entry)
        else:
            gateway.schedule_flush(entry)

    async def _restore_layer(self, entry: SessionEntry[ClientConnection]) -> None:
        entry.layer_known = True
        try:
            declared = await self.gateway.auth_keys.client_layer(entry.perm_auth_key_id)
        except Exception:
            # Served the current layer until the client declares its own, as before.
            log.exception(
                "looking up the layer of auth key %016x",
                entry.perm_auth_key_id & 0xFFFFFFFFFFFFFFFF,
            )
            return
        if declared is not None and not entry.layer_declared:  # not declared meanwhile
            entry.layer = entry.session.layer = served_layer(declared)

    async def _handle_event(self, entry: SessionEntry[ClientConnection], event: object) -> None:
        if isinstance(event, session_events.RpcRequest):
            # Waiting for a slot here stops frame processing, which in turn pauses
            # reading: a client cannot queue unbounded work.
            while self._rpcs_running >= self.limits.max_inflight_rpcs:
                freed = asyncio.get_running_loop().create_future()
                self._rpc_slot_freed = freed
                await freed
            self._rpcs_running += 1
            task = asyncio.get_running_loop().create_task(self._run_rpc(entry, event))
            entry.running[event.msg_id] = task
        elif isinstance(event, session_events.DisconnectDelay):
            self.disconnect_at = self.gateway.clock() + event.seconds
        elif isinstance(event, session_events.CancelRpc):
            running = entry.running.get(event.req_msg_id)
            if running is not None:
                running.cancel()
        elif isinstance(event, session_events.DestroySession):
            other = self.gateway.sessions.get(entry.auth_key_id, event.session_id)
            existed = other is not None and other is not entry
            if other is not None and other is not entry:
                self.gateway.sessions.remove(other)
            entry.session.answer_destroy_session(event.session_id, existed)

    async def _run_rpc(
        self, entry: SessionEntry[ClientConnection], event: session_events.RpcRequest
    ) -> None:
        gateway = self.gateway
        try:
            if not entry.user_known:
                try:
                    user_id = await gateway.resolve_user(entry.perm_auth_key_id)
                except Exception:
                    # The database is unreachable: answer now rather than never.
                    log.warning("%s: cannot look up the key's user", self.peer, exc_info=True)
                    entry.session.send_rpc_error(event.msg_id, 500, "TIMEOUT")
                    gateway.schedule_flush(entry)
                    return
                gateway.sessions.set_user(entry, user_id)
            ctx = RequestContext(
                auth_key_id=entry.auth_key_id,
                perm_auth_key_id=entry.perm_auth_key_id,
                session_id=entry.session_id,
                msg_id=event.msg_id,
                now=gateway.clock(),
                user_id=entry.user_id,
                layer=entry.layer,
                wait_for_msgs=entry.wait_for_msgs,
                sessions=gateway.sessions,
                client_ip=self.ip,
            )
            outcome = await gateway.dispatcher.call(ctx, event.request)
            entry.layer = entry.session.layer = ctx.layer
            if ctx.layer_declared:
                entry.layer_declared = True
            if not ctx.without_updates:
                entry.wants_updates = True
            if outcome.error is not None:
                entry.session.send_rpc_error(
                    event.msg_id, outcome.error.code, outcome.error.message
                )
            else:
                assert outcome.result is not None
                entry.session.send_rpc_result(event.msg_id, outcome.result)
            gateway.schedule_flush(entry)
        except asyncio.CancelledError:
            pass
        finally:
            entry.running.pop(event.msg_id, None)
            self._rpcs_running -= 1
            freed = self._rpc_slot_freed
            if freed is not None:
                self._rpc_slot_freed = None
                if not freed.done():
                    freed.set_result(None)
