"""What one gateway process allows its clients: sizes, counts, rates and deadlines.

Its own module, below the connection code and the gateway alike: both read these
numbers, and the connection code must not import the gateway that creates it.
"""

from __future__ import annotations

from dataclasses import dataclass

from telesrv.config import Network, Settings, parse_networks

_DEFAULTS = Settings()


@dataclass(frozen=True)
class GatewayLimits:
    max_frame: int = 1024 * 1024 + 4096  # largest transport payload accepted
    # Connections the kernel completes before the loop accepts them (capped by
    # net.core.somaxconn). Python's default of 100 overflows when a thousand clients
    # connect at once (a reconnect storm): the kernel then drops or resets them.
    listen_backlog: int = 4096
    max_queued_frames: int = 64  # frames waiting per connection before reading pauses
    max_queued_bytes: int = 4 * 1024 * 1024  # their bytes, likewise
    max_inflight_rpcs: int = 32  # concurrent RPCs per connection
    write_buffer_high: int = 256 * 1024  # pause reading past this much unsent output
    max_write_buffer: int = 8 * 1024 * 1024  # disconnect past this much unsent output
    slow_reader_timeout: float = 30.0
    # How long the acks of a message that started requests wait for their answers, so
    # that an answer ready by then carries them in its own packet (one write, not two);
    # past it they go alone, as MTProto has a server do when an answer is slow to come.
    ack_hold: float = 0.2
    # WebSocket listener. The upgrade request's header block (request line and headers)
    # and its number of header lines; a browser sends well under a tenth of either.
    ws_max_upgrade_bytes: int = 16 * 1024
    ws_max_headers: int = 64
    # One binary message: a packet of max_frame with its transport header fits, with
    # room for a client that puts more than one packet in a message. The payload is
    # streamed into the transport as it arrives, so this is no buffer size.
    ws_max_message: int = 2 * 1024 * 1024
    # Frames one message may be split into: browsers send one, proxies a few; each
    # costs a header and an event, so many tiny fragments are work without progress.
    ws_max_fragments: int = 256
    # Frames that carry no MTProto bytes (pings, pongs, empty messages) cost the loop
    # as much as any and never reach the inbox's flow control: a budget per
    # connection, refilled at this rate, past which the connection is closed.
    ws_control_frame_burst: int = 64
    ws_control_frames_per_second: float = 4.0
    # How long a key exchange waits for its new key to be stored. A database that does
    # not answer (frozen, cut off) would otherwise hold the client for the statement
    # and acquire timeouts together, with no answer; past this the connection is
    # closed, and the client starts over on a new one.
    key_store_timeout: float = 5.0
    # The rest come from Settings (see there).
    frame_timeout: float = _DEFAULTS.frame_timeout
    idle_timeout: float = _DEFAULTS.idle_timeout
    handshake_timeout: float = _DEFAULTS.handshake_timeout
    ws_upgrade_timeout: float = _DEFAULTS.ws_upgrade_timeout
    ws_trusted_proxies: tuple[Network, ...] = ()
    incomplete_frames_budget: int = _DEFAULTS.incomplete_frames_budget
    max_connections: int = _DEFAULTS.max_connections
    max_connections_per_ip: int = _DEFAULTS.max_connections_per_ip
    handshakes_per_second: float = _DEFAULTS.handshakes_per_second
    handshake_burst: int = _DEFAULTS.handshake_burst
    handshakes_per_ip_per_second: float = _DEFAULTS.handshakes_per_ip_per_second
    handshake_burst_per_ip: int = _DEFAULTS.handshake_burst_per_ip
    housekeeping_interval: float = _DEFAULTS.housekeeping_interval
    unused_auth_key_ttl: float = _DEFAULTS.unused_auth_key_ttl
    auth_key_cleanup_interval: float = _DEFAULTS.auth_key_cleanup_interval

    @classmethod
    def from_settings(cls, settings: Settings) -> GatewayLimits:
        return cls(
            frame_timeout=settings.frame_timeout,
            idle_timeout=settings.idle_timeout,
            handshake_timeout=settings.handshake_timeout,
            ws_upgrade_timeout=settings.ws_upgrade_timeout,
            ws_trusted_proxies=parse_networks(settings.ws_trusted_proxies),
            incomplete_frames_budget=settings.incomplete_frames_budget,
            max_connections=settings.max_connections,
            max_connections_per_ip=settings.max_connections_per_ip,
            handshakes_per_second=settings.handshakes_per_second,
            handshake_burst=settings.handshake_burst,
            handshakes_per_ip_per_second=settings.handshakes_per_ip_per_second,
            handshake_burst_per_ip=settings.handshake_burst_per_ip,
            housekeeping_interval=settings.housekeeping_interval,
            unused_auth_key_ttl=settings.unused_auth_key_ttl,
            auth_key_cleanup_interval=settings.auth_key_cleanup_interval,
        )
