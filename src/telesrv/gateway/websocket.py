"""MTProto over WebSocket: what browsers use (Telegram's web apps, mtcute, GramJS).

A browser opens ``ws://HOST:PORT/apiws`` (or ``/apiws_test``, or any path) with the
subprotocol ``binary``. Its binary messages carry the same byte stream a TCP client
sends: the obfuscated2 header, then abridged, intermediate or padded-intermediate
packets. So a :class:`WebSocketConnection` is a :class:`ClientConnection` whose bytes
first pass through ``wsproto`` (sans-io, like the rest of the protocol code): the
payload of binary messages goes into the same transport codec, key exchange and
sessions as TCP's, in order, wherever the messages happen to cut the packets.

Going out, each transport packet is a message of its own: Telegram Web K reads one
packet per message, and a packet cut across two messages (or two in one) looked to
it like a corrupt answer ("msgKey mismatch").

Bounds, before the upgrade: the header block's size and line count and the time to
finish it; after: a message's size and its number of fragments. Text frames, unknown
opcodes and other protocol errors close the connection. Pings are answered, pongs
ignored; neither keeps a connection from its idle deadline, and together with empty
messages they share a budget per connection (they cost the event loop and never
reach the inbox, whose fullness pauses reading). The per-address
connection count is the TCP listener's (one budget for both).

Behind a reverse proxy the listener is told which proxies to trust
(``ws_trusted_proxies``): an upgrade from one of them names its client in
X-Forwarded-For, and from then on the connection counts, is budgeted and is logged as
that address (the nearest one in the header that is no trusted proxy). Before the
upgrade it counts as the proxy's; anyone else's header is ignored, since a client may
write any address into it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import ssl
from collections.abc import Sequence

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    Pong,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from telesrv.gateway.budgets import TokenBucket
from telesrv.gateway.connection import ClientConnection, ConnectionHost

log = logging.getLogger(__name__)

SUBPROTOCOL = "binary"

# The end of an HTTP header block; h11 (wsproto's parser) also takes bare newlines.
_HEAD_END = re.compile(rb"\n\r?\n")
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"Content-Length: 0\r\nConnection: close\r\n\r\n"
)
_BAD_FORWARDING = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_TOO_MANY = b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
# Addresses of an X-Forwarded-For read from its right end (the hop nearest to us), at
# most: each proxy of ours adds one, and a chain of them longer than this is none of
# our deployments.
MAX_FORWARDED_HOPS = 16
_NOT_WEBSOCKET = b"telesrv: MTProto over WebSocket (subprotocol binary) is served here.\n"


def tls_context(cert_path: str, key_path: str) -> ssl.SSLContext:
    """The server side of wss:// from a PEM certificate chain and its private key;
    raises OSError or ssl.SSLError when they cannot be read or do not match."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)
    return context


class WebSocketConnection(ClientConnection):
    """One browser connection: an HTTP upgrade, then MTProto in binary messages."""

    def __init__(self, gateway: ConnectionHost, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(gateway)
        # wss://: TLS in memory (sans-io, like the WebSocket layer), so its handshake
        # is under the connection's limits and deadlines (see connection_made).
        self._tls_context = tls
        self._tls: ssl.SSLObject | None = None
        self._tls_in = ssl.MemoryBIO()
        self._tls_out = ssl.MemoryBIO()
        self._tls_ready = False
        self._ws = WSConnection(ConnectionType.SERVER)
        self.upgraded = False
        self._request = bytearray()  # the upgrade request, until its header block ends
        # The binary message being received: its frames and payload bytes so far, and
        # whether a frame of it is still partly to come.
        self._message_frames = 0
        self._message_bytes = 0
        self._in_frame = False
        self._control_budget = TokenBucket(
            self.limits.ws_control_frames_per_second, self.limits.ws_control_frame_burst
        )

    # -- TLS -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._tls_context is None or self._closed:
            return
        # TLS is done here, on the counted connection, rather than by the listener:
        # a listener doing it holds each handshake, and its buffers, before the
        # address's and the server's limits or any deadline of ours see it. So the
        # handshake is budgeted per address like a key exchange, and the upgrade's
        # deadline (check_health) covers it.
        if self.ip is None or not self.gateway.take_handshake(self.ip, self.gateway.clock()):
            log.info("closing %s: too many TLS handshakes from its address", self.peer)
            self.abort()
            return
        self._tls = self._tls_context.wrap_bio(self._tls_in, self._tls_out, server_side=True)

    def _tls_receive(self, data: bytes) -> bytes:
        """Decrypt what came; the plaintext (empty while the handshake runs or after
        refusing the connection)."""
        tls = self._tls
        assert tls is not None
        self._tls_in.write(data)
        plain = bytearray()
        try:
            if not self._tls_ready:
                try:
                    tls.do_handshake()
                except ssl.SSLWantReadError:
                    return b""
                self._tls_ready = True
            while chunk := tls.read(1 << 16):
                plain += chunk
            # An empty read (no SSLWantReadError) is the client's close_notify: ours
            # goes back (a client waits for it), and nothing more can be sent over
            # TLS, not even a WebSocket close frame.
            try:
                tls.unwrap()
            except ssl.SSLError:
                pass
            self._tls_flush()
            ClientConnection.close(self)
        except ssl.SSLWantReadError:
            pass  # the rest of a record is still to come
        except ssl.SSLError as e:
            log.debug("closing %s: TLS: %s", self.peer, e)
            self._tls_flush()  # the alert, if any
            self.abort()
            return b""
        finally:
            if not self._closed:
                self._tls_flush()
        return bytes(plain)

    def _tls_flush(self) -> None:
        pending = self._tls_out.read()
        if pending:
            ClientConnection.write(self, pending)

    # -- input -------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        if self._tls is not None:
            data = self._tls_receive(data)
            if not data or self._closed:
                return
        if not self.upgraded:
            rest = self._receive_upgrade(data)
            if not rest:
                return
            data = rest
        self._receive_frames(data)

    def _receive_upgrade(self, data: bytes) -> bytes | None:
        """Buffer the upgrade request and answer it once whole; returns what followed it
        (None while it is incomplete or after refusing it)."""
        request = self._request
        start = max(0, len(request) - 2)
        request += data
        limit = self.limits.ws_max_upgrade_bytes
        end = _HEAD_END.search(request, start)
        if end is None:
            if len(request) > limit:
                self._refuse(_TOO_LARGE, "upgrade request too large")
            return None
        if end.end() > limit:
            self._refuse(_TOO_LARGE, "upgrade request too large")
            return None
        head, rest = bytes(request[: end.end()]), bytes(request[end.end() :])
        self._request = bytearray()
        # Lines of the block less the request line and the blank line that ends it.
        if head.count(b"\n") - 2 > self.limits.ws_max_headers:
            self._refuse(_TOO_LARGE, "too many header lines")
            return None
        # Only the header block goes to wsproto: it would drop what follows (frames a
        # client sent without waiting for the answer), which the connection gets below.
        try:
            self._ws.receive_data(head)
            upgrade = next((e for e in self._ws.events() if isinstance(e, Request)), None)
        except RemoteProtocolError as e:
            self._reject(e.event_hint, str(e))
            return None
        if upgrade is None:
            self._reject(RejectConnection(), "not an upgrade request")
            return None
        try:
            forwarded = self._forwarded_client(upgrade.extra_headers)
        except ValueError as e:
            self._refuse(_BAD_FORWARDING, f"X-Forwarded-For from a trusted proxy: {e}")
            return None
        if forwarded is not None and forwarded != self.ip:
            if not self.gateway.add_connection(forwarded):
                self._refuse(_TOO_MANY, f"too many connections from {forwarded} (forwarded)")
                return None
            if self.ip is not None:
                self.gateway.remove_connection(self.ip)
            self.ip = forwarded
        subprotocol = SUBPROTOCOL if SUBPROTOCOL in upgrade.subprotocols else None
        # No extensions: permessage-deflate would let a small message inflate to any size.
        self._send_raw(self._ws.send(AcceptConnection(subprotocol=subprotocol)))
        self.upgraded = True
        return rest

    def _forwarded_client(self, headers: Sequence[tuple[bytes, bytes]]) -> str | None:
        """The client's address by X-Forwarded-For, when a trusted proxy sent the
        upgrade; None when the peer is no trusted proxy or sent no such header.

        Each proxy appends the address it heard from, so the header is read from its
        right end, and the first address that is no trusted proxy is the client: what
        lies left of it the client may have written itself. Raises ValueError, to
        refuse the upgrade, for an address that cannot be read there, and for a chain
        of trusted proxies longer than MAX_FORWARDED_HOPS.
        """
        trusted = self.limits.ws_trusted_proxies
        if not trusted or self.ip is None:
            return None
        try:
            peer = _plain(ipaddress.ip_address(self.ip))
        except ValueError:
            return None
        if not _within(peer, trusted):
            return None
        values = [value for name, value in headers if name.lower() == b"x-forwarded-for"]
        if not values:
            return None  # a direct connection from the proxy's host counts as itself
        # Only the hops read are split off: the rest may be as long as the header.
        hops = b",".join(values).rsplit(b",", MAX_FORWARDED_HOPS)
        read = hops[-MAX_FORWARDED_HOPS:]
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
        for hop in reversed(read):
            try:
                address = _plain(ipaddress.ip_address(hop.strip().decode("ascii")))
            except (UnicodeDecodeError, ValueError):
                raise ValueError(f"unreadable address {hop[:64]!r}") from None
            if not _within(address, trusted):
                return str(address)
        if len(hops) > MAX_FORWARDED_HOPS:
            raise ValueError(f"more than {MAX_FORWARDED_HOPS} trusted proxies")
        # Every hop is one of ours: the client is inside a trusted network itself.
        return str(address)

    def _refuse(self, response: bytes, reason: str) -> None:
        log.debug("closing %s: %s", self.peer, reason)
        self._request = bytearray()
        self._send_raw(response)
        self.close()

    def _reject(self, hint: Event | None, reason: str) -> None:
        """Answer a request that is no WebSocket upgrade with an HTTP error, and close."""
        log.debug("closing %s: %s", self.peer, reason)
        status = hint.status_code if isinstance(hint, RejectConnection) else 400
        extra = list(hint.headers) if isinstance(hint, RejectConnection) else []
        try:
            response = self._ws.send(
                RejectConnection(
                    status_code=status,
                    headers=[
                        *extra,
                        (b"content-length", str(len(_NOT_WEBSOCKET)).encode()),
                        (b"connection", b"close"),
                    ],
                    has_body=True,
                )
            )
            response += self._ws.send(RejectData(data=_NOT_WEBSOCKET))
        except LocalProtocolError:
            # h11 could not read the request well enough to answer it.
            self.abort()
            return
        self._send_raw(response)
        self.close()

    def _receive_frames(self, data: bytes) -> None:
        ws = self._ws
        ws.receive_data(data)
        # Pongs of one read go out in one write, not a system call each.
        pongs = bytearray()
        for event in ws.events():
            if isinstance(event, BytesMessage):
                if not event.data and not self._take_control_frame():
                    break
                self._receive_bytes(event)
            elif isinstance(event, Ping):
                # Answered, but it is no MTProto message: the idle deadline still runs.
                if not self._take_control_frame():
                    break
                pongs += ws.send(event.response())
            elif isinstance(event, Pong):
                # Unsolicited (this server sends no pings): nothing to do but count it.
                if not self._take_control_frame():
                    break
            elif isinstance(event, TextMessage):
                self._fail(CloseReason.UNSUPPORTED_DATA, "text message")
            elif isinstance(event, CloseConnection):
                if pongs:
                    self._send_raw(bytes(pongs))
                    pongs.clear()
                self._receive_close(event)
            if self._closed:
                return
        if pongs and not self._closed:
            self._send_raw(bytes(pongs))

    def _take_control_frame(self) -> bool:
        """Budget one frame that carries no MTProto bytes; past the budget, close."""
        if self._control_budget.take(self.gateway.clock()):
            return True
        self._fail(CloseReason.POLICY_VIOLATION, "too many pings, pongs or empty messages")
        return False

    def _receive_bytes(self, event: BytesMessage) -> None:
        limits = self.limits
        if not self._in_frame:  # a frame of this message begins
            self._message_frames += 1
            if self._message_frames > limits.ws_max_fragments:
                self._fail(CloseReason.POLICY_VIOLATION, "message in too many fragments")
                return
        self._in_frame = not event.frame_finished
        self._message_bytes += len(event.data)
        if self._message_bytes > limits.ws_max_message:
            self._fail(CloseReason.MESSAGE_TOO_BIG, "message too large")
            return
        if event.message_finished:
            self._message_frames = self._message_bytes = 0
        if event.data:
            # The same path as a TCP read: framing, flow control and every bound of
            # the byte stream apply unchanged.
            super().data_received(bytes(event.data))  # bytes already: no copy

    def _receive_close(self, event: CloseConnection) -> None:
        ws = self._ws
        if ws.state is ConnectionState.REMOTE_CLOSING:
            log.debug("%s closed the websocket (%d)", self.peer, event.code)
            self._send_raw(ws.send(event.response()))
            self.close()
        else:
            # wsproto reports a frame it cannot parse (unknown opcode, unmasked, bad
            # UTF-8, ...) as a close with the code to send.
            self._fail(event.code, event.reason or "protocol error")

    def _fail(self, code: int, reason: str) -> None:
        log.debug("closing %s: %s", self.peer, reason)
        self.close(code, reason)

    # -- output ------------------------------------------------------------------------

    def _send_raw(self, data: bytes) -> None:
        """Bytes as they are (HTTP, control frames), with the write-buffer bound;
        encrypted first on wss://."""
        tls = self._tls
        if tls is None:
            super().write(data)
            return
        try:
            tls.write(data)
        except ssl.SSLError as e:
            log.debug("closing %s: TLS: %s", self.peer, e)
            self.abort()
            return
        pending = self._tls_out.read()
        if pending:
            super().write(pending)

    def write(self, data: bytes) -> None:
        """One transport packet: one binary message."""
        if self._closed or self._ws.state is not ConnectionState.OPEN:
            return
        self._send_raw(self._ws.send(BytesMessage(data=data)))

    def write_packets(self, packets: list[bytes]) -> None:
        """A message per packet, all in one write to the socket."""
        if self._closed or self._ws.state is not ConnectionState.OPEN:
            return
        send = self._ws.send
        self._send_raw(b"".join([send(BytesMessage(data=packet)) for packet in packets]))

    def close(self, code: int = CloseReason.NORMAL_CLOSURE, reason: str | None = None) -> None:
        """Send a close frame (once upgraded), then close once the output is sent."""
        if not self._closed and self._ws.state is ConnectionState.OPEN:
            self._send_raw(self._ws.send(CloseConnection(code=code, reason=reason)))
        if not self._closed and self._tls is not None and self._tls_ready:
            # TLS's close_notify: without it a client waits for one before giving up.
            try:
                self._tls.unwrap()
            except ssl.SSLError:
                pass  # sent ours; the client's is not awaited
            self._tls_flush()
        super().close()

    # -- deadlines ---------------------------------------------------------------------

    def check_health(self, now: float) -> None:
        if (
            not self._closed
            and not self.upgraded
            and now - self.created_at > self.limits.ws_upgrade_timeout
        ):
            log.debug("closing %s: no websocket upgrade in time", self.peer)
            self.abort()
            return
        super().check_health(now)


def _plain(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An IPv4 address written as IPv6 (::ffff:a.b.c.d, from a dual-stack socket or a
    proxy) is the IPv4 address, so that it counts and matches as one."""
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address


def _within(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
    networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network],
) -> bool:
    return any(address in network for network in networks)
