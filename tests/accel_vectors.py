"""Byte vectors of the modules the accelerator compiles (telesrv/accel.py).

``vectors()`` runs the TL runtime, the transports, the encryption and a session on fixed
inputs and returns every output as text. tests/test_accel.py computes them on the pure
path in its own process and on the compiled path in a child process, and compares.
Run as a script it prints them as JSON, with the modules the process compiled.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
import zlib
from collections.abc import Callable
from functools import partial
from typing import Any

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

import telesrv
from telesrv import accel
from telesrv.mtproto import crypto, salts
from telesrv.mtproto.session import ServerSession
from telesrv.mtproto.transport import ServerTransport
from telesrv.tl import decode, functions, mt, types
from telesrv.tl.core import DecodeError
from telesrv.tl.service import ContainerItem, encode_container, gzip_packed

AUTH_KEY = b"".join(hashlib.sha256(b"telesrv accel vectors %d" % i).digest() for i in range(8))
AUTH_KEY_ID = crypto.auth_key_id(AUTH_KEY)
SECRET = b"telesrv accel salt secret"
SESSION_ID = 0x1112131415161718
NOW = 1_700_000_000.0


def fixed_random(n: int) -> bytes:
    return bytes((0x40 + 7 * i) & 0xFF for i in range(n))


def objects() -> list[Any]:
    """TL values that take every kind of field: flags, vectors, long strings, int128."""
    peer = types.PeerUser(user_id=1 << 40)
    long_text = "é" * 300  # a length past 253 bytes takes the 4-byte string header
    message = types.Message(
        id=7,
        peer_id=peer,
        from_id=types.PeerUser(user_id=5),
        date=1_700_000_000,
        message=long_text,
        out=True,
        entities=[types.MessageEntityBold(offset=0, length=3)],
        views=3,
        forwards=0,
        grouped_id=-(1 << 62),
    )
    user = types.User(id=42, first_name="Ann", username="ann", phone="123", self_=True)
    updates = types.Updates(
        updates=[types.UpdateNewMessage(message=message, pts=10, pts_count=1)],
        users=[user],
        chats=[],
        date=1_700_000_001,
        seq=0,
    )
    return [
        peer,
        message,
        user,
        updates,
        functions.messages.GetMessages(id=[types.InputMessageID(id=1), types.InputMessageID(id=2)]),
        functions.users.GetUsers(id=[types.InputUserSelf()]),
        mt.ResPQ(
            nonce=1 << 100,
            server_nonce=-(1 << 120),
            pq=b"\x17" * 8,
            server_public_key_fingerprints=[1, -2],
        ),
        mt.FutureSalts(
            req_msg_id=9, now=10, salts=[mt.FutureSalt(valid_since=1, valid_until=2, salt=3)]
        ),
    ]


def _error(call: Callable[[], object]) -> str:
    try:
        return repr(call())
    except (DecodeError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"


def tl_vectors() -> dict[str, str]:
    out: dict[str, str] = {}
    for i, obj in enumerate(objects()):
        data = obj.to_bytes()
        out[f"tl {i} {obj.TL_NAME}"] = data.hex()
        again = decode(data)
        out[f"tl {i} decoded again"] = again.to_bytes().hex()
        out[f"tl {i} repr"] = repr(again)
        out[f"tl {i} truncated"] = _error(partial(decode, data[: len(data) // 2]))
    packed = gzip_packed(objects()[3].to_bytes())
    out["gzip_packed decoded"] = decode(packed).to_bytes().hex()
    out["gzip bad"] = _error(lambda: decode(packed[:-6]))
    out["unknown constructor"] = _error(lambda: decode(b"\x01\x02\x03\x04" * 3))
    return out


def _obfuscated_header(tag: bytes, dc_id: int = -3) -> bytes:
    plain = bytearray(hashlib.sha512(b"accel vectors header").digest())
    plain[56:60] = tag
    plain[60:62] = dc_id.to_bytes(2, "little", signed=True)
    cipher = Cipher(algorithms.AES(bytes(plain[8:40])), modes.CTR(bytes(plain[40:56])))
    encrypted = cipher.encryptor().update(bytes(plain))
    return bytes(plain[:56]) + encrypted[56:]


def transport_vectors() -> dict[str, str]:
    out: dict[str, str] = {}
    payloads = [b"\x01\x02\x03\x04" * n for n in (1, 126, 127, 300)]
    # One connection per transport, announced by its first bytes.
    openings = {
        "abridged": b"\xef",
        "intermediate": b"\xee\xee\xee\xee",
        "padded": b"\xdd\xdd\xdd\xdd",
    }
    for name, opening in openings.items():
        server = ServerTransport(random_bytes=fixed_random)
        client = ServerTransport(random_bytes=fixed_random)
        server.feed(opening)
        client.feed(opening)
        for k, payload in enumerate(payloads):
            packet = server.encode(payload)
            out[f"{name} encode {k}"] = packet.hex()
            # The framing is the same both ways: a packet the server frames, fed back.
            frames = client.feed(packet)
            out[f"{name} feed {k}"] = repr([(f.payload.hex()[:32], f.quick_ack) for f in frames])
        out[f"{name} error"] = server.encode_error(-404).hex()
        out[f"{name} quick ack"] = server.encode_quick_ack(0x12345678).hex()
    for name, tag in (("abridged", b"\xef" * 4), ("padded", b"\xdd" * 4)):
        # The obfuscated stream: AES-CTR both ways, keys from the client's header.
        server = ServerTransport(random_bytes=fixed_random)
        server.feed(_obfuscated_header(tag))
        out[f"obfuscated {name} dc"] = str(server.dc_id)
        for k, payload in enumerate(payloads):
            out[f"obfuscated {name} encode {k}"] = server.encode(payload).hex()
        out[f"obfuscated {name} quick ack"] = server.encode_quick_ack(0x12345678).hex()
    full = ServerTransport()
    head = struct.pack("<ii", 12 + 8, 0) + b"\xaa" * 8
    frames = full.feed(head + struct.pack("<I", zlib.crc32(head)))
    out["full feed"] = repr([f.payload.hex() for f in frames])
    out["full encode"] = full.encode(b"\x05" * 8).hex()
    return out


def crypto_vectors() -> dict[str, str]:
    plaintext = struct.pack("<qqqii", 1, SESSION_ID, 0x62A1B2C300000004, 1, 8) + b"\x09" * 8
    padding = fixed_random(crypto.padding_length(len(plaintext)))
    wire = crypto.encrypt_server_message(AUTH_KEY, plaintext, padding)
    return {
        "auth key id": str(AUTH_KEY_ID),
        "encrypt": wire.hex(),
        "message key": crypto.message_key(AUTH_KEY, plaintext + padding, from_client=True).hex(),
        "quick ack": str(crypto.quick_ack_token(AUTH_KEY, plaintext + padding)),
        "ige": crypto.aes_ige_encrypt(b"\x11" * 64, b"\x22" * 32, b"\x33" * 32).hex(),
        "salt": str(salts.current_salt(SECRET, AUTH_KEY_ID, NOW)),
        "tmp aes": repr(crypto.tmp_aes_key_iv(b"\x44" * 32, b"\x55" * 16)),
    }


def _client_message(body: bytes, msg_id: int, seq_no: int) -> bytes:
    salt = salts.current_salt(SECRET, AUTH_KEY_ID, NOW)
    return struct.pack("<qqqii", salt, SESSION_ID, msg_id, seq_no, len(body)) + body


def session_vectors() -> dict[str, str]:
    """A session answering a ping and a request in a container, with a push; every packet
    it sends (its random bytes and clock fixed, so the packets are too)."""
    session = ServerSession(AUTH_KEY, AUTH_KEY_ID, SESSION_ID, SECRET, fixed_random)
    base = int(NOW * 2**32) & ~3
    request = functions.help.GetConfig().to_bytes()
    ping = mt.Ping(ping_id=77).to_bytes()
    body = encode_container(
        [ContainerItem(base - 400, 1, ping), ContainerItem(base - 396, 3, request)]
    )
    events = session.receive(_client_message(body, base - 392, 4), NOW)
    out = {"events": repr(events)}
    session.send_rpc_result(base - 396, types.PeerUser(user_id=3).to_bytes())
    session.send_update(objects()[3].to_bytes())
    for k, packet in enumerate(session.flush(NOW + 0.5)):
        out[f"packet {k}"] = packet.hex()
    return out


def vectors() -> dict[str, str]:
    out: dict[str, str] = {}
    for part in (tl_vectors, transport_vectors, crypto_vectors, session_vectors):
        out.update({f"{part.__name__}: {k}": v for k, v in part().items()})
    return out


def compiled_modules() -> list[str]:
    return [m for m in accel.MODULES if accel.is_compiled(sys.modules[m])]


if __name__ == "__main__":
    print(
        json.dumps(
            {
                "status": telesrv.ACCEL.describe(),
                "compiled": compiled_modules(),
                "vectors": vectors(),
            }
        )
    )
