"""The WebSocket listener behind a reverse proxy: an upgrade from a trusted proxy names
its client in X-Forwarded-For, and the connection counts against that address (the
per-address limit, the key-exchange budget, the audit log); anyone else's header is
ignored."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from e2e.conftest import RunningServer

from gateway.test_websocket import (
    req_pq_round_trip,
    send_raw,
    server,
    server_side,
    until,
    ws_open,
)
from gateway.ws_client import (
    ObfuscatedIntermediate,
    WsClient,
    read_http_response,
    req_pq_packet,
    upgrade_request,
)
from telesrv.config import Settings, parse_networks
from telesrv.gateway.limits import GatewayLimits
from telesrv.gateway.websocket import MAX_FORWARDED_HOPS

__all__ = ["server"]

XFF = b"X-Forwarded-For"
CLIENT = "203.0.113.7"


async def forwarded(server: RunningServer, *values: bytes) -> tuple[WsClient, str | None]:
    """A connection whose upgrade carries these X-Forwarded-For headers, and the address
    the gateway counts it as."""
    client = await ws_open(server, extra=[(XFF, v) for v in values])
    side = await server_side(server, client.writer)
    await req_pq_round_trip(client)
    return client, side.ip


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ((CLIENT.encode(),), CLIENT),
        ((b"2001:db8::1",), "2001:db8::1"),
        ((b"::ffff:198.51.100.9",), "198.51.100.9"),  # IPv4 written as IPv6 is IPv4
        # Each proxy appends the address it heard from: the nearest untrusted one wins,
        # and what the client wrote left of it is not read.
        ((b"198.51.100.1, 10.0.0.2",), "198.51.100.1"),
        ((b"198.51.100.1, 192.0.2.9, 10.0.0.2",), "192.0.2.9"),
        ((b"192.0.2.1, 198.51.100.9",), "198.51.100.9"),
        ((b"junk, ,10.0.0.0:1, 198.51.100.9",), "198.51.100.9"),
        ((b"," * 40 + b"198.51.100.9",), "198.51.100.9"),
        ((b"198.51.100.1", b"10.0.0.2"), "198.51.100.1"),  # two header lines, in order
        ((b"10.0.0.3, 10.0.0.2",), "10.0.0.3"),  # only proxies: the farthest
        ((), "127.0.0.1"),  # no header: a connection from the proxy's own host
    ],
)
async def test_a_trusted_proxy_names_the_client(
    server: RunningServer, limits: Any, headers: tuple[bytes, ...], expected: str
) -> None:
    limits(ws_trusted_proxies=parse_networks("127.0.0.1, 10.0.0.0/8"))
    client, ip = await forwarded(server, *headers)
    assert ip == expected
    await client.close()


@pytest.mark.parametrize(
    "header",
    [
        b"not-an-address",
        b"198.51.100.1, 10.0.0.2:443",  # an address where a trusted proxy's should be
        b"198.51.100.1, , 10.0.0.2",
        b"",
    ],
)
async def test_an_unreadable_header_from_a_trusted_proxy_is_refused(
    server: RunningServer, limits: Any, header: bytes
) -> None:
    limits(ws_trusted_proxies=parse_networks("127.0.0.1, 10.0.0.0/8"))
    reader, writer = await send_raw(server, upgrade_request(extra=[(XFF, header)]))
    assert (await read_http_response(reader)).startswith(b"HTTP/1.1 400 ")
    writer.close()


async def test_hops_at_and_past_the_limit(server: RunningServer, limits: Any) -> None:
    limits(ws_trusted_proxies=parse_networks("127.0.0.1, 10.0.0.0/8"))
    proxies = [f"10.0.0.{i}".encode() for i in range(MAX_FORWARDED_HOPS - 1)]
    client, ip = await forwarded(server, b", ".join([CLIENT.encode(), *proxies]))
    assert ip == CLIENT  # at the limit: the client behind 15 proxies of ours
    await client.close()
    # Past it: 16 of our proxies and more is no deployment; refused.
    chain = b", ".join([CLIENT.encode(), *proxies, b"10.0.1.1"])
    reader, writer = await send_raw(server, upgrade_request(extra=[(XFF, chain)]))
    assert (await read_http_response(reader)).startswith(b"HTTP/1.1 400 ")
    writer.close()


async def test_an_untrusted_peers_header_is_ignored(server: RunningServer, limits: Any) -> None:
    limits(ws_trusted_proxies=())
    client, ip = await forwarded(server, CLIENT.encode())
    assert ip == "127.0.0.1"
    await client.close()
    limits(ws_trusted_proxies=parse_networks("10.0.0.0/8"))  # some proxy, not this peer
    client, ip = await forwarded(server, CLIENT.encode())
    assert ip == "127.0.0.1"
    await client.close()


async def test_connections_per_forwarded_address_at_and_past_the_limit(
    server: RunningServer, limits: Any
) -> None:
    gateway = server.gateway
    await until(lambda: not gateway.connections)  # those of earlier tests are gone
    cap = 2
    limits(ws_trusted_proxies=parse_networks("127.0.0.1"), max_connections_per_ip=cap)
    clients = []
    for _ in range(cap):  # at the limit, every one counted as the client's
        client, ip = await forwarded(server, CLIENT.encode())
        assert ip == CLIENT
        clients.append(client)
    assert gateway.connections_per_ip[CLIENT] == cap
    assert "127.0.0.1" not in gateway.connections_per_ip  # moved off the proxy
    # Past it: refused at the upgrade, and nothing is left counted for it.
    reader, writer = await send_raw(server, upgrade_request(extra=[(XFF, CLIENT.encode())]))
    assert (await read_http_response(reader)).startswith(b"HTTP/1.1 429 ")
    writer.close()
    other, ip = await forwarded(server, b"198.51.100.1")  # another client of the proxy
    assert ip == "198.51.100.1"
    for client in [*clients, other]:
        await client.close()
    await until(lambda: CLIENT not in gateway.connections_per_ip)
    await until(lambda: "198.51.100.1" not in gateway.connections_per_ip)
    await until(lambda: "127.0.0.1" not in gateway.connections_per_ip)


async def test_key_exchanges_are_budgeted_per_forwarded_address(
    server: RunningServer, limits: Any
) -> None:
    limits(
        ws_trusted_proxies=parse_networks("127.0.0.1"),
        handshake_burst_per_ip=1,
        handshakes_per_ip_per_second=1e-6,
    )
    server.gateway._ip_handshake_budgets.clear()
    first, _ = await forwarded(server, CLIENT.encode())  # at the limit: one exchange begun
    second = await ws_open(server, extra=[(XFF, CLIENT.encode())])
    transport = ObfuscatedIntermediate()
    second.send(transport.header + transport.encode(req_pq_packet(9)))  # past it
    assert transport.decode_one(await second.recv_message()) == struct.pack("<i", -429)
    other, _ = await forwarded(server, b"198.51.100.1")  # another client: its own budget
    for client in (first, second, other):
        await client.close()


def test_trusted_proxies_come_from_settings() -> None:
    limits = GatewayLimits.from_settings(Settings(ws_trusted_proxies="10.0.0.0/8, ::1"))
    assert [str(n) for n in limits.ws_trusted_proxies] == ["10.0.0.0/8", "::1/128"]
    assert GatewayLimits.from_settings(Settings()).ws_trusted_proxies == ()
    with pytest.raises(ValueError, match="not an address or network: '10.0.0.0/33'"):
        Settings(ws_trusted_proxies="10.0.0.0/33")
    for everyone in ("0.0.0.0/0", "::/0"):
        with pytest.raises(ValueError, match="is every address"):
            Settings(ws_trusted_proxies=f"10.0.0.1, {everyone}")
