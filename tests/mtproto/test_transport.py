import asyncio
import hashlib
import os
import struct
import zlib
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st
from telethon.network.connection.connection import PacketCodec
from telethon.network.connection.tcpabridged import AbridgedPacketCodec
from telethon.network.connection.tcpfull import FullPacketCodec
from telethon.network.connection.tcpintermediate import (
    IntermediatePacketCodec,
    RandomizedIntermediatePacketCodec,
)
from telethon.network.connection.tcpobfuscated import ObfuscatedIO

from telesrv.mtproto.transport import (
    DEFAULT_MAX_PAYLOAD,
    Frame,
    ServerTransport,
    TransportError,
    TransportKind,
)

# An unencrypted req_pq_multi: auth_key_id 0, msg_id, length 20, constructor, nonce.
PAYLOAD = bytes.fromhex(
    "0000000000000000 00000000a1b2c363 14000000 f18e7ebe 000102030405060708090a0b0c0d0e0f"
)
P = PAYLOAD.hex()

# 64 random bytes with tag 0xefefefef (abridged) and dc id 2 at 56..62, encrypted.
OBFUSCATED_HEADER = bytes.fromhex(
    "32a6650b64965ae68a61b01f43d652f8349d6609b7cc09ace23147b8beea2e3a"
    "df0e45a76cbbc3184f9b2b212414d2b51f21e4823778eaffeedd81f6f3d9edb1"
)
OBFUSCATED_CLIENT_PACKET = bytes.fromhex(
    "b6e24df31cf85a8cb88ef770067733e4cbe0f965cbbe3039745e66529f04073df05a3f50824290e0b9"
)
OBFUSCATED_SERVER_PACKET = bytes.fromhex(
    "ae7ffe4830938c566f69cc1fa29e5226ff8e6ae6c4e69285b64035cbc58a8588b507496ac45bc19b34"
)


def no_random(n: int) -> bytes:
    raise AssertionError("randomness not expected here")


def feed_all(transport: ServerTransport, data: bytes, chunk: int | None = None) -> list[Frame]:
    if chunk is None:
        return transport.feed(data)
    frames: list[Frame] = []
    for i in range(0, len(data), chunk):
        frames.extend(transport.feed(data[i : i + chunk]))
    return frames


# -- exact vectors -------------------------------------------------------------


@pytest.mark.parametrize(
    ("client_hex", "kind"),
    [
        ("ef 0a" + P, TransportKind.ABRIDGED),
        ("eeeeeeee 28000000" + P, TransportKind.INTERMEDIATE),
        ("dddddddd 2b000000" + P + "aabbcc", TransportKind.PADDED_INTERMEDIATE),
        ("34000000 00000000" + P + "b191944d", TransportKind.FULL),
    ],
)
@pytest.mark.parametrize("chunk", [None, 1, 3, 7])
def test_decode_vectors(client_hex: str, kind: TransportKind, chunk: int | None) -> None:
    transport = ServerTransport()
    frames = feed_all(transport, bytes.fromhex(client_hex), chunk)
    assert transport.kind is kind
    assert not transport.obfuscated
    assert [f.payload for f in frames] == [PAYLOAD]
    assert frames[0].quick_ack is False
    assert frames[0].padded is (kind is TransportKind.PADDED_INTERMEDIATE)


@pytest.mark.parametrize(
    ("prefix", "server_hex"),
    [
        ("ef", "0a" + P),
        ("eeeeeeee", "28000000" + P),
        ("dddddddd", "2a000000" + P + "0102"),
    ],
)
def test_encode_vectors(prefix: str, server_hex: str) -> None:
    transport = ServerTransport()
    transport.feed(bytes.fromhex(prefix))
    padding = b"\x01\x02" if transport.kind is TransportKind.PADDED_INTERMEDIATE else None
    assert transport.encode(PAYLOAD, padding=padding) == bytes.fromhex(server_hex)


def test_full_two_packets_and_server_seq() -> None:
    client = bytes.fromhex(
        "34000000 00000000" + P + "b191944d 14000000 01000000 0000000000000000 23750845"
    )
    transport = ServerTransport()
    frames = transport.feed(client)
    assert [f.payload for f in frames] == [PAYLOAD, bytes(8)]
    assert transport.kind is TransportKind.FULL
    # The server counts its own packets from 0, independently of the client.
    assert transport.encode(bytes(8)) == bytes.fromhex(
        "14000000 00000000 0000000000000000 4c39adde"
    )
    assert transport.encode(PAYLOAD[:8]).hex() == "1400000001000000000000000000000023750845"
    assert transport.encode_error(-404) == bytes.fromhex("10000000 02000000 6cfeffff 70286445")


def test_abridged_long_length() -> None:
    payload = bytes(range(256)) * 2  # 128 words: needs the 4-byte header
    transport = ServerTransport()
    frames = transport.feed(b"\xef" + bytes.fromhex("7f800000") + payload)
    assert frames == [Frame(payload)]
    assert transport.encode(payload)[:4].hex() == "7f800000"
    assert transport.encode(payload[:504])[:1].hex() == "7e"


def test_obfuscated_vector() -> None:
    transport = ServerTransport(random_bytes=no_random)
    assert transport.feed(OBFUSCATED_HEADER[:40]) == []
    assert transport.feed(OBFUSCATED_HEADER[40:] + OBFUSCATED_CLIENT_PACKET[:5]) == []
    frames = transport.feed(OBFUSCATED_CLIENT_PACKET[5:])
    assert frames == [Frame(PAYLOAD)]
    assert transport.obfuscated
    assert transport.kind is TransportKind.ABRIDGED
    assert transport.dc_id == 2
    assert transport.encode(PAYLOAD) == OBFUSCATED_SERVER_PACKET
    # The server stream continues after the first packet.
    assert transport.encode_quick_ack(0x12345678).hex() == "be03ca4b"


@pytest.mark.parametrize(
    ("prefix", "error_hex"),
    [
        ("ef", "01 6cfeffff"),
        ("eeeeeeee", "04000000 6cfeffff"),
        ("dddddddd", "04000000 6cfeffff"),
    ],
)
def test_encode_error_vectors(prefix: str, error_hex: str) -> None:
    transport = ServerTransport(random_bytes=lambda n: bytes(n))
    transport.feed(bytes.fromhex(prefix))
    assert transport.encode_error(-404) == bytes.fromhex(error_hex)


def test_encode_error_too_many_connections() -> None:
    transport = ServerTransport()
    transport.feed(b"\xee\xee\xee\xee")
    assert transport.encode_error(-429) == bytes.fromhex("04000000 53feffff")


# -- quick ack -----------------------------------------------------------------


def test_quick_ack_abridged() -> None:
    transport = ServerTransport()
    frames = transport.feed(bytes.fromhex("ef 8a") + PAYLOAD)
    assert frames == [Frame(PAYLOAD, quick_ack=True)]
    long_payload = bytes(512)
    frames = transport.feed(bytes.fromhex("ff800000") + long_payload)
    assert frames == [Frame(long_payload, quick_ack=True)]
    # Big-endian, so the top bit is in the first byte the client reads.
    assert transport.encode_quick_ack(0x12345678).hex() == "92345678"
    assert transport.encode_quick_ack(0x92345678).hex() == "92345678"


@pytest.mark.parametrize("prefix", ["eeeeeeee", "dddddddd"])
def test_quick_ack_intermediate(prefix: str) -> None:
    transport = ServerTransport()
    frames = transport.feed(bytes.fromhex(prefix + "28000080") + PAYLOAD)
    assert frames[0].payload == PAYLOAD
    assert frames[0].quick_ack is True
    assert transport.encode_quick_ack(0x12345678).hex() == "78563492"


def test_quick_ack_full_rejected() -> None:
    transport = ServerTransport()
    transport.feed(bytes.fromhex("34000000 00000000" + P + "b191944d"))
    with pytest.raises(ValueError):
        transport.encode_quick_ack(0x80000001)
    with pytest.raises(ValueError):
        ServerTransport().encode(PAYLOAD)  # nothing detected yet


# -- padded intermediate ----------------------------------------------------------


def test_padded_default_padding_uses_random_bytes() -> None:
    calls: list[int] = []

    def fake_random(n: int) -> bytes:
        calls.append(n)
        return bytes([0x07] * n)  # first byte 7 -> 7 % 4 == 3 padding bytes

    transport = ServerTransport(random_bytes=fake_random)
    transport.feed(b"\xdd\xdd\xdd\xdd")
    assert transport.encode(PAYLOAD).hex() == "2b000000" + P + "070707"
    assert calls == [1, 3]


def test_padded_without_random_source() -> None:
    transport = ServerTransport()
    transport.feed(b"\xdd\xdd\xdd\xdd")
    with pytest.raises(ValueError):
        transport.encode(PAYLOAD)
    with pytest.raises(ValueError):
        transport.encode(PAYLOAD, padding=bytes(16))


def test_padded_accepts_up_to_15_padding_bytes() -> None:
    transport = ServerTransport()
    data = b"\xdd\xdd\xdd\xdd" + struct.pack("<I", len(PAYLOAD) + 15) + PAYLOAD + bytes(15)
    frames = transport.feed(data)
    # Cut to a multiple of 4; the 12 remaining pad bytes are the MTProto layer's job.
    assert frames == [Frame(PAYLOAD + bytes(12), padded=True)]


# -- Telethon interop ---------------------------------------------------------------


def telethon_codec(codec_cls: type[PacketCodec]) -> PacketCodec:
    return codec_cls(None)


async def telethon_read(codec: PacketCodec, data: bytes) -> bytes:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    packet: bytes = await codec.read_packet(reader)
    return packet


def telethon_prefix(codec_cls: type[PacketCodec]) -> bytes:
    return bytes(codec_cls.tag or b"")


INTEROP_PAYLOADS = [PAYLOAD, bytes(range(256)) * 3, os.urandom(1 << 16)]


@pytest.mark.parametrize(
    ("codec_cls", "kind"),
    [
        (AbridgedPacketCodec, TransportKind.ABRIDGED),
        (IntermediatePacketCodec, TransportKind.INTERMEDIATE),
        (FullPacketCodec, TransportKind.FULL),
    ],
)
async def test_telethon_plain_codecs(codec_cls: type[PacketCodec], kind: TransportKind) -> None:
    client = telethon_codec(codec_cls)
    stream = telethon_prefix(codec_cls) + b"".join(
        client.encode_packet(p) for p in INTEROP_PAYLOADS
    )
    transport = ServerTransport()
    frames = feed_all(transport, stream, chunk=1000)
    assert transport.kind is kind
    assert [f.payload for f in frames] == INTEROP_PAYLOADS
    for payload in INTEROP_PAYLOADS:
        assert await telethon_read(client, transport.encode(payload)) == payload


@pytest.mark.parametrize(
    ("codec_cls", "kind"),
    [
        (AbridgedPacketCodec, TransportKind.ABRIDGED),
        (IntermediatePacketCodec, TransportKind.INTERMEDIATE),
        (RandomizedIntermediatePacketCodec, TransportKind.PADDED_INTERMEDIATE),
    ],
)
async def test_telethon_obfuscated(codec_cls: type[PacketCodec], kind: TransportKind) -> None:
    header, encryptor, decryptor = ObfuscatedIO.init_header(codec_cls)
    client = telethon_codec(codec_cls)
    stream = bytes(header) + b"".join(
        encryptor.encrypt(client.encode_packet(p)) for p in INTEROP_PAYLOADS
    )
    transport = ServerTransport(random_bytes=os.urandom)
    frames = feed_all(transport, stream, chunk=777)
    assert transport.obfuscated
    assert transport.kind is kind
    assert [f.payload for f in frames] == INTEROP_PAYLOADS
    for payload in INTEROP_PAYLOADS:
        wire = transport.encode(payload)
        assert await telethon_read(client, decryptor.encrypt(wire)) == payload


async def test_telethon_full_reads_transport_error() -> None:
    client = telethon_codec(FullPacketCodec)
    transport = ServerTransport()
    transport.feed(client.encode_packet(PAYLOAD))
    body = await telethon_read(client, transport.encode_error(-404))
    assert struct.unpack("<i", body) == (-404,)


# -- hostile input -------------------------------------------------------------------


def obfuscated_header(tag: bytes, dc_id: int = 2) -> bytes:
    plain = bytearray(hashlib.sha512(b"another header").digest())
    plain[56:60] = tag
    plain[60:62] = dc_id.to_bytes(2, "little", signed=True)
    cipher = Cipher(algorithms.AES(bytes(plain[8:40])), modes.CTR(bytes(plain[40:56])))
    encrypted = cipher.encryptor().update(bytes(plain))
    return bytes(plain[:56]) + encrypted[56:]


def test_obfuscated_unknown_tag_rejected() -> None:
    with pytest.raises(TransportError) as info:
        ServerTransport().feed(obfuscated_header(b"\x01\x02\x03\x04"))
    assert "tag" in info.value.reason


@pytest.mark.parametrize("tag", [b"\xef\xef\xef\xef", b"\xee\xee\xee\xee", b"\xdd\xdd\xdd\xdd"])
def test_obfuscated_negative_dc(tag: bytes) -> None:
    transport = ServerTransport()
    assert transport.feed(obfuscated_header(tag, dc_id=-4)) == []
    assert transport.dc_id == -4
    assert transport.obfuscated


@pytest.mark.parametrize(
    "data_hex",
    [
        "ef 00",  # zero length
        "ef 7f000000",  # zero length, long form
        "ef 7fffffff",  # far above the limit
        "eeeeeeee 00000000",
        "eeeeeeee 29000000",  # not a multiple of 4
        "eeeeeeee ffffff7f",
        "dddddddd 03000000",  # padding only
        "dddddddd ffffff7f",
        "00000000 00000000",  # full, zero length
        "0c000000 00000000",  # full, no payload
        "35000000 00000000",  # full, odd length
        "ffffffff 00000000",  # full, negative length
        "504f5354202f20485454502f312e31",  # HTTP
        "16030102 00000000",  # TLS
    ],
)
def test_bad_lengths_and_prefixes(data_hex: str) -> None:
    with pytest.raises(TransportError):
        ServerTransport().feed(bytes.fromhex(data_hex))


def test_max_payload_is_enforced_before_buffering() -> None:
    transport = ServerTransport(max_payload=64)
    transport.feed(b"\xee\xee\xee\xee" + struct.pack("<I", 64) + bytes(64))
    with pytest.raises(TransportError):
        transport.feed(struct.pack("<I", 68))
    assert DEFAULT_MAX_PAYLOAD >= 1 << 20


def test_full_bad_crc() -> None:
    data = bytearray(bytes.fromhex("34000000 00000000" + P + "b191944d"))
    data[20] ^= 1
    with pytest.raises(TransportError) as info:
        ServerTransport().feed(bytes(data))
    assert "crc" in info.value.reason


@pytest.mark.parametrize("seqs", [[0, 0], [0, 2], [0, -1], [0, 1, 1]])
def test_full_bad_seq(seqs: list[int]) -> None:
    transport = ServerTransport()
    packets = b""
    for seq in seqs:
        head = struct.pack("<Ii", len(PAYLOAD) + 12, seq) + PAYLOAD
        packets += head + struct.pack("<I", zlib.crc32(head))
    with pytest.raises(TransportError) as info:
        transport.feed(packets)
    assert "seq" in info.value.reason


def test_failure_is_sticky() -> None:
    transport = ServerTransport()
    with pytest.raises(TransportError):
        transport.feed(bytes.fromhex("eeeeeeee 29000000"))
    with pytest.raises(TransportError):
        transport.feed(bytes.fromhex("08000000 0000000000000000"))


def test_truncated_input_waits() -> None:
    transport = ServerTransport()
    assert transport.feed(bytes.fromhex("eeeeeeee 28000000") + PAYLOAD[:-1]) == []
    assert transport.feed(PAYLOAD[-1:]) == [Frame(PAYLOAD)]
    # Ambiguous prefixes wait for more bytes instead of guessing.
    for prefix in ["ee", "eeeeee", "dd", "01020304", "0102030405060708" * 7]:
        undecided = ServerTransport()
        assert undecided.feed(bytes.fromhex(prefix)) == []
        assert undecided.kind is None


def test_encode_rejects_bad_payloads() -> None:
    transport = ServerTransport()
    transport.feed(b"\xef")
    for bad in [b"", b"abc", bytes(5)]:
        with pytest.raises(ValueError):
            transport.encode(bad)
    with pytest.raises(ValueError):
        transport.encode(PAYLOAD, padding=b"")  # padding outside padded intermediate
    with pytest.raises(ValueError):
        transport.encode_quick_ack(1 << 32)


def _run_random(data: bytes, chunk: int, make: Callable[[], ServerTransport]) -> None:
    transport = make()
    try:
        for frame in feed_all(transport, data, chunk):
            assert 0 < len(frame.payload) <= transport.max_payload
            assert len(frame.payload) % 4 == 0
    except TransportError:
        pass


@settings(max_examples=300, deadline=None)
@given(
    prefix=st.sampled_from([b"", b"\xef", b"\xee\xee\xee\xee", b"\xdd\xdd\xdd\xdd", bytes(8)]),
    data=st.binary(max_size=300),
    chunk=st.integers(min_value=1, max_value=64),
)
def test_random_bytes_only_raise_transport_error(prefix: bytes, data: bytes, chunk: int) -> None:
    _run_random(prefix + data, chunk, lambda: ServerTransport(max_payload=256))


@settings(max_examples=100, deadline=None)
@given(
    payloads=st.lists(
        st.binary(min_size=1, max_size=600).map(lambda b: b + bytes(-len(b) % 4)),
        min_size=1,
        max_size=5,
    ),
    chunk=st.integers(min_value=1, max_value=200),
    codec_cls=st.sampled_from([AbridgedPacketCodec, IntermediatePacketCodec, FullPacketCodec]),
)
def test_any_split_decodes_same(
    payloads: list[bytes], chunk: int, codec_cls: type[PacketCodec]
) -> None:
    client = telethon_codec(codec_cls)
    stream = telethon_prefix(codec_cls) + b"".join(client.encode_packet(p) for p in payloads)
    frames = feed_all(ServerTransport(), stream, chunk)
    assert [f.payload for f in frames] == payloads
