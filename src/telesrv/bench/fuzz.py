"""`telesrv bench fuzz`: mutated MTProto frames after a real key exchange.

A client and the server's sans-io MTProto stack run in one process, so that a
million frames take a minute rather than an hour of sockets. The key is made by
the real key exchange (RSA_PAD, DH) between the test client's code and the
server's :class:`AuthKeyExchange`. Then each frame is a message from a corpus of
valid requests and service messages, mutated (bit flips, hostile integers and
lengths, truncation, splices, gzip_packed and containers around mutated items),
encrypted with the key and fed through the same steps as the gateway: transport
framing, decryption, the session registry, :meth:`ServerSession.receive` (which
decodes the TL) and :meth:`ServerSession.flush`. Requests that decode are
answered with an error, as the RPC layer would for a method it refuses.

Anything raised that the gateway does not expect (it expects only a transport or
decryption failure) counts as a crash. Memory is sampled as it goes; it must
level off, since every buffer on this path is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import struct
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from telesrv.gateway.auth_keys import AuthKeyRecord

_LEN = struct.Struct("<i")
_HEADER = struct.Struct("<qqqii")
_INTERMEDIATE = b"\xee\xee\xee\xee"
_INTERESTING_I32 = (
    0, 1, -1, 2, 3, 4, 253, 254, 255, 256, 1 << 16, 1 << 24, (1 << 31) - 1, -(1 << 31),
    0x1CB5C415, 0x3072CFA1, 0x73F1F8DC, 0x997275B5, 0xBC799737,
)  # fmt: skip


def _rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except OSError:  # not Linux: the peak is the best available figure
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- the key exchange, client and server in one process -----------------------------------


class _Loopback:
    """A RawConnection stand-in that hands unencrypted messages to the server's
    handshake and returns its answers."""

    def __init__(self, exchange: Any) -> None:
        from telesrv.mtproto.msgid import ServerMsgIds

        self.exchange = exchange
        self.new_key: Any = None
        self._ids = ServerMsgIds()
        self._answers: list[bytes] = []

    def send(self, payload: bytes) -> None:
        from telesrv.mtproto.handshake import encode_plain, parse_plain
        from telesrv.tl import decode

        request = decode(parse_plain(payload).body, exact=False)
        answer, new_key = self.exchange.handle(request, int(time.time()))
        if new_key is not None:
            self.new_key = new_key
        self._answers.append(
            encode_plain(self._ids.next(time.time(), response=True), answer.to_bytes())
        )

    async def recv(self) -> bytes:
        return self._answers.pop(0)


def exchange_key() -> tuple[bytes, int, float]:
    """A permanent key made by a real exchange: (auth_key, auth_key_id, seconds)."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    from telesrv.bench._client import PublicKey, create_auth_key
    from telesrv.mtproto.handshake import AuthKeyExchange
    from telesrv.mtproto.rsa import rsa_fingerprint

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = private.private_numbers()
    public = PublicKey(numbers.public_numbers.n, numbers.public_numbers.e)
    started = time.perf_counter()
    exchange = AuthKeyExchange(
        rsa_key=numbers,
        fingerprint=rsa_fingerprint(public.n, public.e),
        random_bytes=os.urandom,
    )
    loop = _Loopback(exchange)
    key = asyncio.run(create_auth_key(loop, public))  # type: ignore[arg-type]
    if loop.new_key is None or loop.new_key.auth_key != key.auth_key:
        raise click.ClickException("client and server disagree on the key")
    return key.auth_key, key.auth_key_id, time.perf_counter() - started


# -- corpus and mutations ---------------------------------------------------------------------


def corpus() -> list[bytes]:
    """Valid message bodies of every kind the session handles."""
    from telesrv.tl import functions, mt, types
    from telesrv.tl.service import gzip_packed

    peer = types.InputPeerUser(user_id=7, access_hash=-3)
    init = functions.InvokeWithLayer(
        layer=229,
        query=functions.InitConnection(
            api_id=1,
            device_model="fuzz",
            system_version="1",
            app_version="1",
            system_lang_code="en",
            lang_pack="",
            lang_code="en",
            query=functions.help.GetConfig(),
        ),
    )
    send = functions.messages.SendMessage(
        peer=peer,
        message="hello **world** " * 8,
        random_id=42,
        entities=[
            types.MessageEntityBold(offset=6, length=5),
            types.MessageEntityTextUrl(offset=0, length=5, url="https://example.com/x"),
        ],
        reply_to=types.InputReplyToMessage(reply_to_msg_id=3),
    )
    objects: list[Any] = [
        mt.Ping(ping_id=1),
        mt.PingDelayDisconnect(ping_id=2, disconnect_delay=75),
        mt.MsgsAck(msg_ids=[4, 8, 12]),
        mt.MsgsStateReq(msg_ids=[16, 20]),
        mt.MsgResendReq(msg_ids=[24]),
        mt.GetFutureSalts(num=3),
        mt.DestroySession(session_id=99),
        mt.RpcDropAnswer(req_msg_id=28),
        init,
        send,
        functions.InvokeAfterMsg(msg_id=32, query=functions.updates.GetState()),
        functions.InvokeWithoutUpdates(query=functions.messages.GetDialogs(
            offset_date=0, offset_id=0, offset_peer=types.InputPeerEmpty(), limit=20, hash=0
        )),
        functions.messages.GetHistory(
            peer=peer, offset_id=0, offset_date=0, add_offset=0, limit=100,
            max_id=0, min_id=0, hash=0,
        ),
        functions.messages.ForwardMessages(
            from_peer=peer, id=[1, 2, 3], random_id=[5, 6, 7], to_peer=types.InputPeerSelf()
        ),
        functions.updates.GetDifference(pts=10, date=1_700_000_000, qts=0),
        functions.auth.SendCode(
            phone_number="+15550001", api_id=1, api_hash="0" * 32,
            settings=types.CodeSettings(),
        ),
        functions.contacts.ImportContacts(contacts=[
            types.InputPhoneContact(client_id=1, phone="+1555", first_name="a", last_name="b")
        ]),
        functions.messages.EditMessage(peer=peer, id=5, message="edited"),
        functions.users.GetUsers(id=[types.InputUserSelf()]),
    ]  # fmt: skip
    bodies = [o.to_bytes() for o in objects]
    bodies += [gzip_packed(b) for b in bodies[8:12]]
    return bodies


@dataclass
class Mutator:
    rng: random.Random
    bodies: list[bytes]
    constructor_ids: list[int]

    def mutate(self, body: bytes) -> bytes:
        data = bytearray(body)
        for _ in range(self.rng.randint(1, 4)):
            op = self.rng.randrange(9)
            if op == 0 and data:  # flip a bit
                i = self.rng.randrange(len(data))
                data[i] ^= 1 << self.rng.randrange(8)
            elif op == 1 and data:  # a random byte
                data[self.rng.randrange(len(data))] = self.rng.randrange(256)
            elif op == 2 and len(data) >= 4:  # a hostile int at an aligned place
                i = self.rng.randrange(len(data) // 4) * 4
                value = self.rng.choice(_INTERESTING_I32) & 0xFFFFFFFF
                struct.pack_into("<I", data, i, value)
            elif op == 3 and len(data) >= 4:  # another constructor id
                i = self.rng.randrange(len(data) // 4) * 4
                struct.pack_into("<I", data, i, self.rng.choice(self.constructor_ids))
            elif op == 4 and data:  # truncate
                del data[self.rng.randrange(len(data)) :]
            elif op == 5:  # insert random bytes
                i = self.rng.randrange(len(data) + 1)
                data[i:i] = self.rng.randbytes(self.rng.choice((1, 4, 8, 16, 64)))
            elif op == 6 and data:  # duplicate a chunk
                i = self.rng.randrange(len(data))
                j = min(len(data), i + self.rng.randrange(1, 64))
                data[j:j] = data[i:j]
            elif op == 7:  # splice with another body
                other = self.rng.choice(self.bodies)
                i = self.rng.randrange(len(data) + 1)
                j = self.rng.randrange(len(other) + 1)
                data = data[:i] + other[j:]
            elif op == 8 and data:  # a long-string length marker
                i = self.rng.randrange(len(data))
                data[i] = 254
        return bytes(data)

    def message(self) -> tuple[bytes, bool]:
        """A mutated message body and whether it is content-related (odd seq_no)."""
        from telesrv.tl.service import ContainerItem, encode_container, gzip_packed

        kind = self.rng.random()
        body = self.mutate(self.rng.choice(self.bodies))
        if kind < 0.08:
            return gzip_packed(body), True
        if kind < 0.12:
            packed = gzip_packed(self.rng.choice(self.bodies))
            return self.mutate(packed), True
        if kind < 0.2:
            items = [
                ContainerItem(0, 0, self.mutate(self.rng.choice(self.bodies)))
                for _ in range(self.rng.randint(1, 5))
            ]
            return encode_container(items), False
        return body, self.rng.random() < 0.8


# -- the server side -------------------------------------------------------------------------


class _Connection:
    """Carries the fuzzed sessions in place of a client connection; nothing is sent."""

    def __init__(self) -> None:
        self.sessions: set[Any] = set()
        self.auth_key: AuthKeyRecord | None = None  # the session table may clear it; unused here

    def close(self) -> None:
        pass


@dataclass
class FuzzResult:
    frames: int = 0
    crashes: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    first_crash: str = ""
    rss_samples: list[int] = field(default_factory=list)


def run(
    frames: int, seed: int, progress: Callable[[int, FuzzResult], None] | None = None
) -> dict[str, Any]:
    """Feed ``frames`` mutated frames; the figures as a dict (see the command)."""
    from telesrv.gateway.sessions import SessionManager
    from telesrv.mtproto import crypto, salts
    from telesrv.mtproto.crypto import CryptoError, decrypt_client_message_with_ack
    from telesrv.mtproto.session import ServerSession
    from telesrv.mtproto.session_events import DestroySession, RpcRequest
    from telesrv.mtproto.transport import ServerTransport, TransportError
    from telesrv.tl import ALL_READERS

    auth_key, key_id, handshake_seconds = exchange_key()
    secret = os.urandom(32)

    def make_session(key: bytes, auth_key_id: int, session_id: int) -> ServerSession:
        return ServerSession(key, auth_key_id, session_id, secret, os.urandom)

    manager: SessionManager[_Connection] = SessionManager(make_session)
    conn = _Connection()
    codec = ServerTransport(max_payload=1024 * 1024 + 4096, random_bytes=os.urandom)
    codec.feed(_INTERMEDIATE)
    rng = random.Random(seed)
    mutator = Mutator(rng, corpus(), [c for c in ALL_READERS if isinstance(c, int)])
    key_id_bytes = crypto.auth_key_id_bytes(auth_key)
    session_ids = [rng.getrandbits(63) for _ in range(8)]
    seq = dict.fromkeys(session_ids, 0)
    last_msg_id = 0
    result = FuzzResult()
    rss_start = _rss()
    started = time.perf_counter()

    for n in range(frames):
        now = time.time()
        msg_id = max(int(now * 2**32) & ~3, last_msg_id + 4)
        last_msg_id = msg_id
        session_id = rng.choice(session_ids)
        body, content = mutator.message()
        seq[session_id] += 1
        seq_no = 2 * seq[session_id] + (1 if content else 0)
        salt = salts.current_salt(secret, key_id, now)
        roll = rng.random()
        if roll < 0.01:
            salt ^= 1  # bad_server_salt
        elif roll < 0.02:
            session_id = rng.getrandbits(63)  # new sessions keep coming: bounded per key
        elif roll < 0.03:
            msg_id -= 4 << 32  # older than the replay window of a busy session
        if len(body) % 4 and rng.random() < 0.95:
            body += b"\0" * (-len(body) % 4)  # whole words: on to the TL decoder
        plaintext = _HEADER.pack(salt, session_id, msg_id, seq_no, len(body)) + body
        if len(body) % 4:
            plaintext += b"\0" * (-len(body) % 4)  # the length field is then refused
        padding = rng.randbytes(crypto.padding_length(len(plaintext)))
        msg_key = crypto.message_key(auth_key, plaintext + padding, from_client=True)
        aes_key, iv = crypto.message_aes_key_iv(auth_key, msg_key, from_client=True)
        payload = key_id_bytes + msg_key + crypto.aes_ige_encrypt(plaintext + padding, aes_key, iv)
        if rng.random() < 0.02:  # damage in transit
            i = rng.randrange(8, len(payload))
            payload = payload[:i] + bytes([payload[i] ^ 0x10]) + payload[i + 1 :]
        try:
            for frame in codec.feed(_LEN.pack(len(payload)) + payload):
                try:
                    plain, _ = decrypt_client_message_with_ack(
                        auth_key, frame.payload[8:], allow_trailing=frame.padded
                    )
                except CryptoError:
                    result.outcomes["refused_by_crypto"] += 1
                    continue
                result.outcomes["reached_session"] += 1
                (sid,) = struct.unpack_from("<q", plain, 8)
                entry = manager.attach(auth_key, key_id, key_id, sid, conn, now)
                events = entry.session.receive(plain, now)
                for event in events:
                    if isinstance(event, RpcRequest):
                        result.outcomes["request_decoded"] += 1
                        entry.session.send_rpc_error(event.msg_id, 400, "FUZZ_REFUSED")
                    elif isinstance(event, DestroySession):
                        other = manager.get(key_id, event.session_id)
                        if other is not None and other is not entry:
                            manager.remove(other)
                        entry.session.answer_destroy_session(event.session_id, other is not None)
                    else:
                        result.outcomes[type(event).__name__] += 1
                entry.session.flush(now)
        except TransportError:
            result.outcomes["refused_by_transport"] += 1
            codec = ServerTransport(max_payload=1024 * 1024 + 4096, random_bytes=os.urandom)
            codec.feed(_INTERMEDIATE)
        except Exception:
            result.crashes += 1
            if not result.first_crash:
                result.first_crash = traceback.format_exc()
        result.frames = n + 1
        if (n + 1) % 50_000 == 0:
            result.rss_samples.append(_rss())
            if progress is not None:
                progress(n + 1, result)
    seconds = time.perf_counter() - started
    samples = result.rss_samples or [_rss()]
    # Growth after the first tenth: what keeps rising once caches and buffers are warm.
    warm = samples[max(0, len(samples) // 10 - 1)]
    return {
        "bench": "fuzz",
        "frames": result.frames,
        "crashes": result.crashes,
        "seconds": round(seconds, 1),
        "frames_per_s": round(result.frames / seconds) if seconds else 0,
        "handshake_s": round(handshake_seconds, 3),
        "sessions": len(manager),
        "held_bytes": manager.held_bytes,
        "rss_start_mib": round(rss_start / 2**20, 1),
        "rss_peak_mib": round(max(samples) / 2**20, 1),
        "rss_end_mib": round(samples[-1] / 2**20, 1),
        "rss_growth_after_warmup_mib": round((samples[-1] - warm) / 2**20, 1),
        **{k: result.outcomes[k] for k in sorted(result.outcomes)},
        "first_crash": result.first_crash.strip().splitlines()[-1] if result.first_crash else "",
    }


@click.command("fuzz")
@click.option("--frames", default=1_000_000, show_default=True)
@click.option("--seed", default=1, show_default=True)
def command(frames: int, seed: int) -> None:
    """Mutated MTProto frames after a real key exchange: crashes and memory."""
    click.echo(f"{'frames':>10}{'crashes':>9}{'decoded':>10}{'rss MiB':>9}{'frames/s':>10}")
    started = time.perf_counter()

    def progress(n: int, r: FuzzResult) -> None:
        rate = n / (time.perf_counter() - started)
        click.echo(
            f"{n:>10}{r.crashes:>9}{r.outcomes['request_decoded']:>10}"
            f"{r.rss_samples[-1] / 2**20:>9.1f}{rate:>10.0f}"
        )

    results = run(frames, seed, progress)
    if results["first_crash"]:
        click.echo(f"first crash: {results['first_crash']}", err=True)
    click.echo(json.dumps(results))
