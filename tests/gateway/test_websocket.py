"""MTProto over WebSocket against the real gateway (real PostgreSQL and Redis, real
sockets): the obfuscated2 stream inside binary messages, one outgoing packet per
message, and every bound of the listener at its limit and just past it.

Deadlines are checked by calling the server-side connection's ``check_health`` with
chosen times, as in test_limits, so no test waits for a timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import ssl
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from e2e.conftest import RunningServer, e2e_settings
from telethon.crypto import rsa as telethon_rsa
from wsproto import ConnectionType
from wsproto.connection import Connection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    TextMessage,
)
from wsproto.frame_protocol import CloseReason

from gateway.test_hostile_mtproto import GET_CONFIG
from gateway.test_limits import public_key
from gateway.ws_client import (
    WAIT,
    ObfuscatedIntermediate,
    WsClient,
    WsRawConnection,
    read_http_response,
    req_pq_packet,
    res_pq_of,
    upgrade_request,
)
from telesrv.app import open_resources
from telesrv.bench._client import (
    EncryptedClient,
    EncryptedSession,
    MsgIdClock,
    RawConnection,
    create_auth_key,
)
from telesrv.config import Settings
from telesrv.gateway.server import GatewayLimits
from telesrv.gateway.websocket import WebSocketConnection, tls_context
from telesrv.tl import decode
from telesrv.tl import types as tl_types
from telesrv.wiring import build_server


@pytest.fixture(scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, redis: Any
) -> AsyncIterator[RunningServer]:
    settings = e2e_settings(
        tmp_path_factory.mktemp("telesrv-data"),
        database_url,
        redis_url,
        housekeeping_interval=0.05,
    )
    async with open_resources(settings) as resources:
        built = build_server(settings, resources)
        host, port = await built.start(settings.listen_host, settings.listen_port)
        _, ws_port = await built.gateway.start_websocket("127.0.0.1", 0)
        running = RunningServer(settings, resources, built, host, port, ws_port)
        telethon_rsa.add_key(resources.server_key.public_pem, old=False)
        try:
            yield running
        finally:
            await running.server.stop()


def ws_port_of(server: RunningServer) -> int:
    assert server.ws_port is not None
    return server.ws_port


async def ws_open(server: RunningServer, path: str = "/apiws", **kwargs: Any) -> WsClient:
    return await WsClient.open("127.0.0.1", ws_port_of(server), path, **kwargs)


async def server_side(server: RunningServer, writer: asyncio.StreamWriter) -> WebSocketConnection:
    peer = f"127.0.0.1:{writer.get_extra_info('sockname')[1]}"
    async with asyncio.timeout(WAIT):
        while True:
            for conn in server.gateway.connections:
                if conn.peer == peer:
                    assert isinstance(conn, WebSocketConnection)
                    return conn
            await asyncio.sleep(0.01)


async def until(condition: Any) -> None:
    async with asyncio.timeout(WAIT):
        while not condition():
            await asyncio.sleep(0.01)


async def req_pq_round_trip(
    client: WsClient, nonce: int = 5, transport: ObfuscatedIntermediate | None = None
) -> ObfuscatedIntermediate:
    """req_pq_multi in one message, resPQ back in exactly one message. Without
    ``transport`` a stream starts (its header goes in the same message); with it, the
    stream goes on."""
    head = b""
    if transport is None:
        transport = ObfuscatedIntermediate()
        head = transport.header
    client.send(head + transport.encode(req_pq_packet(nonce)))
    assert res_pq_of(transport.decode_one(await client.recv_message())).nonce == nonce
    return transport


async def assert_serves(server: RunningServer) -> None:
    client = await ws_open(server)
    await req_pq_round_trip(client)
    await client.close()


# -- the round trip ----------------------------------------------------------------------


async def test_req_pq_over_websocket_answers_in_one_message(server: RunningServer) -> None:
    client = await ws_open(server)
    assert client.accepted.subprotocol == "binary"
    assert client.accepted.extensions == []
    await req_pq_round_trip(client, nonce=123)
    await client.close()


@pytest.mark.parametrize("path", ["/apiws", "/apiws_test", "/anything/else?x=1"])
async def test_every_path_is_served(server: RunningServer, path: str) -> None:
    client = await ws_open(server, path)
    await req_pq_round_trip(client)
    await client.close()


async def test_no_subprotocol_offered_none_answered(server: RunningServer) -> None:
    client = await ws_open(server, subprotocols=())
    assert client.accepted.subprotocol is None
    await req_pq_round_trip(client)
    client2 = await ws_open(server, subprotocols=("chat", "binary"))
    assert client2.accepted.subprotocol == "binary"
    await client.close()
    await client2.close()


async def test_packets_split_across_messages(server: RunningServer) -> None:
    client = await ws_open(server)
    transport = ObfuscatedIntermediate()
    stream = transport.header + transport.encode(req_pq_packet(9))
    for i in range(0, len(stream), 7):  # the header and the packet cut anywhere
        client.send(stream[i : i + 7])
    assert res_pq_of(transport.decode_one(await client.recv_message())).nonce == 9
    await client.close()


async def test_packets_merged_in_one_message_get_one_message_each(server: RunningServer) -> None:
    client = await ws_open(server)
    transport = ObfuscatedIntermediate()
    client.send(
        transport.header
        + transport.encode(req_pq_packet(1))
        + transport.encode(req_pq_packet(2))
        + transport.encode(req_pq_packet(3))
    )
    nonces = [res_pq_of(transport.decode_one(await client.recv_message())).nonce for _ in "123"]
    assert nonces == [1, 2, 3]
    await client.close()


async def test_key_exchange_and_encrypted_calls_over_websocket(server: RunningServer) -> None:
    conn = await WsRawConnection.open_ws("127.0.0.1", ws_port_of(server), "/apiws_test")
    key = await create_auth_key(conn, public_key(server))
    session = EncryptedSession(key.auth_key, key.salt, clock=MsgIdClock(key.time_offset))
    client = EncryptedClient(conn, session)
    # Every answer is checked to be one packet in one message (WsRawConnection.recv).
    config = decode(await client.call(GET_CONFIG))
    assert isinstance(config, tl_types.Config)
    await client.ping(42)
    side = await server_side(server, conn.writer)
    assert side.auth_key is not None and side.auth_key.auth_key_id == key.auth_key_id
    await conn.close()


async def test_packets_flushed_together_go_in_separate_messages(server: RunningServer) -> None:
    """What a flush gives a connection at once (answers of several sessions, acks,
    pushes) is one write on TCP; here each packet is a message of its own."""
    client = await ws_open(server)
    transport = ObfuscatedIntermediate()
    client.send(transport.header + transport.encode(req_pq_packet(1)))
    res_pq_of(transport.decode_one(await client.recv_message()))
    side = await server_side(server, client.writer)
    payloads = [struct.pack("<i", -(i + 1)) * (i + 1) for i in range(4)]
    side.write_packets([side.codec.encode(p) for p in payloads])
    received = [transport.decode_one(await client.recv_message()) for _ in payloads]
    assert received == payloads
    await client.close()


async def test_frames_sent_right_behind_the_upgrade_request_are_kept(
    server: RunningServer,
) -> None:
    """A client that does not wait for the 101 (or whose proxy joins the bytes): the
    frames in the same read as the request are MTProto like any other."""
    transport = ObfuscatedIntermediate()
    early = Connection(ConnectionType.CLIENT)  # frames without a handshake of its own
    frames = early.send(BytesMessage(data=transport.header + transport.encode(req_pq_packet(7))))
    reader, writer = await send_raw(server, upgrade_request() + frames)
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101 ")
    # What follows the 101 is read with the connection that made the early frames.
    client = WsClient(reader, writer, early, AcceptConnection())  # type: ignore[arg-type]
    assert res_pq_of(transport.decode_one(await client.recv_message())).nonce == 7
    await client.close()


# -- the upgrade -------------------------------------------------------------------------


def padded_request(size: int, headers: int = 0) -> bytes:
    """An upgrade request of exactly ``size`` bytes, with ``headers`` more header lines."""
    extra = [(f"x-h{i}".encode(), b"1") for i in range(headers)]
    base = upgrade_request(extra=extra)
    pad_line = len(b"x-pad: \r\n")
    assert size >= len(base) + pad_line
    return upgrade_request(extra=[*extra, (b"x-pad", b"p" * (size - len(base) - pad_line))])


def header_lines(request: bytes) -> int:
    return request.count(b"\r\n") - 2


async def send_raw(server: RunningServer, data: bytes) -> tuple[asyncio.StreamReader, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", ws_port_of(server))
    writer.write(data)
    return reader, writer


async def test_upgrade_request_size_at_and_past_the_limit(
    server: RunningServer, limits: Any
) -> None:
    limits(ws_max_upgrade_bytes=1024)
    at_limit = padded_request(1024)
    assert len(at_limit) == 1024
    reader, writer = await send_raw(server, at_limit)
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101 ")
    writer.close()
    past = padded_request(1025)
    reader, writer = await send_raw(server, past)
    assert (await read_http_response(reader)).startswith(b"HTTP/1.1 431 ")
    writer.close()
    # Without an end in sight: refused once more than the limit has come.
    reader, writer = await send_raw(server, past[:-4] + b"p" * 10)
    assert (await read_http_response(reader)).startswith(b"HTTP/1.1 431 ")
    writer.close()
    await assert_serves(server)


async def test_upgrade_header_count_at_and_past_the_limit(
    server: RunningServer, limits: Any
) -> None:
    base = header_lines(upgrade_request())
    limits(ws_max_headers=base + 10)
    at_limit = upgrade_request(extra=[(f"x-h{i}".encode(), b"1") for i in range(10)])
    assert header_lines(at_limit) == base + 10
    reader, writer = await send_raw(server, at_limit)
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101 ")
    writer.close()
    past = upgrade_request(extra=[(f"x-h{i}".encode(), b"1") for i in range(11)])
    reader, writer = await send_raw(server, past)
    assert (await read_http_response(reader)).startswith(b"HTTP/1.1 431 ")
    writer.close()


async def test_unfinished_upgrade_is_closed_at_its_deadline(server: RunningServer) -> None:
    """Slowloris: a request dribbled out and never finished."""
    request = upgrade_request()
    reader, writer = await send_raw(server, request[:20])
    conn = await server_side(server, writer)
    writer.write(request[20:40])  # more bytes do not move the deadline
    await until(lambda: len(conn._request) == 40)
    deadline = conn.created_at + conn.limits.ws_upgrade_timeout
    conn.check_health(deadline)  # at the limit: still waiting
    assert conn.transport is not None and not conn.transport.is_closing()
    conn.check_health(deadline + 0.001)
    assert await read_http_response(reader) == b""
    writer.close()


async def test_unfinished_upgrade_is_closed_through_housekeeping(
    server: RunningServer, limits: Any
) -> None:
    limits(ws_upgrade_timeout=0.05)
    reader, writer = await send_raw(server, upgrade_request()[:30])
    assert await read_http_response(reader) == b""
    writer.close()


async def test_upgraded_connection_has_no_upgrade_deadline(server: RunningServer) -> None:
    client = await ws_open(server)
    transport = await req_pq_round_trip(client)
    conn = await server_side(server, client.writer)
    conn.check_health(conn.created_at + conn.limits.ws_upgrade_timeout + 1)
    assert conn.transport is not None and not conn.transport.is_closing()
    await req_pq_round_trip(client, 6, transport)
    await client.close()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",  # a browser visiting the address
        b"POST /apiws HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        upgrade_request().replace(b"Sec-WebSocket-Version: 13", b"Sec-WebSocket-Version: 8"),
    ],
)
async def test_what_is_no_upgrade_gets_an_http_error(
    server: RunningServer, request_bytes: bytes
) -> None:
    reader, writer = await send_raw(server, request_bytes)
    answer = await read_http_response(reader)
    assert answer.startswith((b"HTTP/1.1 400 ", b"HTTP/1.1 426 ")), answer
    assert b"MTProto over WebSocket" in answer
    writer.close()


async def test_garbage_instead_of_http_gets_400(server: RunningServer) -> None:
    reader, writer = await send_raw(server, b"\x16\x03\x01 not http at all\r\n\r\n")
    assert (await read_http_response(reader)).startswith(b"HTTP/1.1 400 ")
    writer.close()


# -- messages ------------------------------------------------------------------------------


async def test_message_size_at_and_past_the_limit(server: RunningServer, limits: Any) -> None:
    transport = ObfuscatedIntermediate()
    message = transport.header + transport.encode(req_pq_packet(3))
    limits(ws_max_message=len(message))
    client = await ws_open(server)
    client.send(message)  # at the limit
    assert res_pq_of(transport.decode_one(await client.recv_message())).nonce == 3
    await client.close()
    limits(ws_max_message=len(message) - 1)
    client = await ws_open(server)
    client.send(message)  # one byte past it
    assert await client.closed() == CloseReason.MESSAGE_TOO_BIG
    await client.close()


async def test_fragments_per_message_at_and_past_the_limit(
    server: RunningServer, limits: Any
) -> None:
    limits(ws_max_fragments=4)
    client = await ws_open(server)
    transport = ObfuscatedIntermediate()
    client.send(transport.header + transport.encode(req_pq_packet(4)), fragments=4)
    assert res_pq_of(transport.decode_one(await client.recv_message())).nonce == 4
    # The count starts again with each message.
    client.send(transport.encode(req_pq_packet(5)), fragments=4)
    assert res_pq_of(transport.decode_one(await client.recv_message())).nonce == 5
    client.send(transport.encode(req_pq_packet(6)), fragments=5)
    assert await client.closed() == CloseReason.POLICY_VIOLATION
    await client.close()


async def test_empty_fragments_count_too(server: RunningServer, limits: Any) -> None:
    limits(ws_max_fragments=3)
    client = await ws_open(server)
    client.send(b"", fragments=3)  # at the limit: an empty message, nothing to do
    client.send(b"", fragments=4)
    assert await client.closed() == CloseReason.POLICY_VIOLATION
    await client.close()


async def test_text_message_closes(server: RunningServer) -> None:
    client = await ws_open(server)
    await req_pq_round_trip(client)
    client.send_event(TextMessage(data="hello"))
    assert await client.closed() == CloseReason.UNSUPPORTED_DATA
    await client.close()


@pytest.mark.parametrize("opcode", [0x3, 0x7, 0xB, 0xF])
async def test_unknown_opcode_closes(server: RunningServer, opcode: int) -> None:
    client = await ws_open(server)
    await req_pq_round_trip(client)
    # A masked, empty, final frame with a reserved opcode (no library sends one).
    client.writer.write(bytes([0x80 | opcode, 0x80]) + b"\x01\x02\x03\x04")
    assert await client.closed() == CloseReason.PROTOCOL_ERROR
    await client.close()


async def test_unmasked_frame_closes(server: RunningServer) -> None:
    client = await ws_open(server)
    client.writer.write(b"\x82\x01\x00")  # a client's frames must be masked
    assert await client.closed() == CloseReason.PROTOCOL_ERROR
    await client.close()


async def test_ping_is_answered_and_unsolicited_pong_ignored(server: RunningServer) -> None:
    client = await ws_open(server)
    client.send_event(Ping(payload=b"are you there"))
    pong = await client.recv_control()
    assert isinstance(pong, Pong) and pong.payload == b"are you there"
    client.send_event(Pong(payload=b"nobody asked"))
    await req_pq_round_trip(client)  # still open, and nothing else came first
    await client.close()


async def test_pings_at_and_past_their_budget(server: RunningServer, limits: Any) -> None:
    limits(ws_control_frame_burst=5, ws_control_frames_per_second=1e-9)
    client = await ws_open(server)
    for i in range(5):  # at the limit: each answered
        client.send_event(Ping(payload=bytes([i])))
    for i in range(5):
        pong = await client.recv_control()
        assert isinstance(pong, Pong) and pong.payload == bytes([i])
    await req_pq_round_trip(client)
    client.send_event(Ping(payload=b"one more"))  # past it: closed
    assert await client.closed() == CloseReason.POLICY_VIOLATION
    await client.close()


async def test_pongs_and_empty_messages_share_the_budget(
    server: RunningServer, limits: Any
) -> None:
    limits(ws_control_frame_burst=4, ws_control_frames_per_second=1e-9)
    client = await ws_open(server)
    for _ in range(2):
        client.send_event(Pong(payload=b"x"))
        client.send(b"")
    await req_pq_round_trip(client)  # at the limit: still served
    client.send(b"")  # past it
    assert await client.closed() == CloseReason.POLICY_VIOLATION
    await client.close()


async def test_pongs_of_one_read_go_out_in_one_write(server: RunningServer) -> None:
    client = await ws_open(server)
    conn = await server_side(server, client.writer)
    writes: list[bytes] = []
    original = conn._send_raw

    def counting(data: bytes) -> None:
        writes.append(data)
        original(data)

    conn._send_raw = counting  # type: ignore[method-assign]
    client.writer.write(b"".join(client.ws.send(Ping(payload=bytes([i]))) for i in range(3)))
    for _ in range(3):
        assert isinstance(await client.recv_control(), Pong)
    assert len(writes) == 1
    await client.close()


async def test_client_close_is_answered(server: RunningServer) -> None:
    client = await ws_open(server)
    await req_pq_round_trip(client)
    client.send_event(CloseConnection(code=CloseReason.NORMAL_CLOSURE))
    assert await client.closed() == CloseReason.NORMAL_CLOSURE
    await client.close()


async def test_pings_do_not_keep_an_idle_connection(server: RunningServer) -> None:
    client = await ws_open(server)
    await req_pq_round_trip(client)
    conn = await server_side(server, client.writer)
    # Only the idle deadline is under test, not the one for creating a key.
    conn.limits = dataclasses.replace(conn.limits, handshake_timeout=1e9)
    active = conn.last_activity
    for i in range(3):
        client.send_event(Ping(payload=bytes([i])))
        assert isinstance(await client.recv_control(), Pong)
    assert conn.last_activity == active
    conn.check_health(active + conn.limits.idle_timeout)  # at the limit
    assert conn.transport is not None and not conn.transport.is_closing()
    conn.check_health(active + conn.limits.idle_timeout + 0.001)
    assert await client.closed() is None  # dropped, as an idle TCP client is
    await client.close()


async def test_a_partial_message_is_streamed_into_the_frame_bounds(server: RunningServer) -> None:
    """A frame's payload reaches the transport as it arrives: a half-sent packet is an
    incomplete frame like on TCP (frame deadline, shared incomplete-frame budget), not
    a buffer of the WebSocket layer."""
    client = await ws_open(server)
    transport = ObfuscatedIntermediate()
    packet = transport.header + transport.encode(req_pq_packet(8) + bytes(4000))
    # The frame announces the whole packet; only its first part is sent.
    whole = client.ws.send(BytesMessage(data=packet))
    client.writer.write(whole[: len(whole) - 2000])
    conn = await server_side(server, client.writer)
    await until(lambda: conn._incomplete > 1000)
    assert conn.frame_started_at is not None
    conn.limits = dataclasses.replace(conn.limits, handshake_timeout=1e9)
    conn.check_health(conn.frame_started_at + conn.limits.frame_timeout + 0.001)
    assert await client.closed() is None
    await client.close()


# -- limits shared with TCP ----------------------------------------------------------------


async def test_connections_per_address_are_shared_with_tcp(
    server: RunningServer, limits: Any
) -> None:
    gateway = server.gateway
    already = gateway.connections_per_ip.get("127.0.0.1", 0)
    limits(max_connections_per_ip=already + 2)
    tcp = await RawConnection.open(server.host, server.port)
    ws = await ws_open(server)  # at the limit: one TCP and one WebSocket
    await req_pq_round_trip(ws)
    reader, writer = await send_raw(server, upgrade_request())  # past it: closed at once
    assert await read_http_response(reader) == b""
    writer.close()
    await tcp.close()
    await until(lambda: gateway.connections_per_ip.get("127.0.0.1", 0) == already + 1)
    again = await ws_open(server)  # the TCP connection's place is free again
    await req_pq_round_trip(again)
    for client in (ws, again):
        await client.close()
    await until(lambda: gateway.connections_per_ip.get("127.0.0.1", 0) == already)


async def test_connections_in_all_are_shared_with_tcp(server: RunningServer, limits: Any) -> None:
    gateway = server.gateway
    already = len(gateway.connections)
    limits(max_connections=already + 2)
    tcp = await RawConnection.open(server.host, server.port)
    ws = await ws_open(server)  # at the limit: one TCP and one WebSocket
    await req_pq_round_trip(ws)
    reader, writer = await send_raw(server, upgrade_request())  # past it: closed at once
    assert await read_http_response(reader) == b""
    writer.close()
    await tcp.close()
    await until(lambda: len(gateway.connections) == already + 1)
    again = await ws_open(server)  # the TCP connection's place is free again
    await req_pq_round_trip(again)
    for client in (ws, again):
        await client.close()
    await until(lambda: len(gateway.connections) == already)


def test_websocket_limits_come_from_settings() -> None:
    limits = GatewayLimits.from_settings(Settings(ws_upgrade_timeout=3.5))
    assert limits.ws_upgrade_timeout == 3.5
    with pytest.raises(ValueError):
        Settings(ws_upgrade_timeout=0)


# -- wss:// ----------------------------------------------------------------------------------


def make_certificate(directory: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def test_wss_round_trip(server: RunningServer, tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    _, port = await server.gateway.start_websocket(
        "127.0.0.1", 0, ssl_context=tls_context(str(cert), str(key))
    )
    client_tls = ssl.create_default_context(cafile=str(cert))
    client = await WsClient.open("127.0.0.1", port, "/apiws", tls=client_tls)
    await req_pq_round_trip(client)
    await client.close()


async def wss_listener(server: RunningServer, tmp_path: Path) -> tuple[int, ssl.SSLContext]:
    cert, key = make_certificate(tmp_path)
    _, port = await server.gateway.start_websocket(
        "127.0.0.1", 0, ssl_context=tls_context(str(cert), str(key))
    )
    return port, ssl.create_default_context(cafile=str(cert))


async def test_a_tls_handshake_counts_against_the_address(
    server: RunningServer, tmp_path: Path, limits: Any
) -> None:
    port, client_tls = await wss_listener(server, tmp_path)
    gateway = server.gateway
    already = gateway.connections_per_ip.get("127.0.0.1", 0)
    limits(max_connections_per_ip=already + 2)
    # Two clients stuck in their handshake (a partial ClientHello) hold the places.
    stuck = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
    for _, writer in stuck:
        writer.write(b"\x16\x03\x01")
    await until(lambda: gateway.connections_per_ip.get("127.0.0.1", 0) == already + 2)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)  # past it: closed
    assert await read_http_response(reader) == b""
    writer.close()
    stuck[0][1].close()
    await until(lambda: gateway.connections_per_ip.get("127.0.0.1", 0) == already + 1)
    client = await WsClient.open("127.0.0.1", port, "/apiws", tls=client_tls)  # at it
    await req_pq_round_trip(client)
    await client.close()
    stuck[1][1].close()
    await until(lambda: gateway.connections_per_ip.get("127.0.0.1", 0) == already)


async def test_a_stalled_tls_handshake_is_closed_at_the_upgrade_deadline(
    server: RunningServer, tmp_path: Path
) -> None:
    port, _ = await wss_listener(server, tmp_path)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"\x16\x03\x01")
    conn = await server_side(server, writer)
    conn.check_health(conn.created_at + conn.limits.ws_upgrade_timeout)  # at the deadline
    assert conn.transport is not None and not conn.transport.is_closing()
    conn.check_health(conn.created_at + conn.limits.ws_upgrade_timeout + 0.001)
    assert await read_http_response(reader) == b""
    writer.close()


async def test_tls_handshakes_are_budgeted_per_address(
    server: RunningServer, tmp_path: Path, limits: Any
) -> None:
    port, client_tls = await wss_listener(server, tmp_path)
    # One budget with key exchanges: each client below takes one for TLS and one for
    # the key exchange its req_pq starts.
    limits(handshake_burst_per_ip=4, handshakes_per_ip_per_second=1e-9)
    server.gateway._ip_handshake_budgets.clear()
    for _ in range(2):  # at the limit: served
        client = await WsClient.open("127.0.0.1", port, "/apiws", tls=client_tls)
        await req_pq_round_trip(client)
        await client.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)  # past it: closed
    writer.write(b"\x16\x03\x01")
    assert await read_http_response(reader) == b""
    writer.close()
    server.gateway._ip_handshake_budgets.clear()
