"""Server side of the MTProto TCP transports, sans-io.

One :class:`ServerTransport` per connection. The transport is detected from the
first bytes the client sends:

* ``0xef``                      abridged
* ``0xeeeeeeee``                intermediate
* ``0xdddddddd``                padded intermediate
* bytes 4..8 are zero           full (the first packet's seq_no is 0)
* anything else, 64 bytes       obfuscated2 wrapping abridged / intermediate / padded

Every malformed input raises :class:`TransportError`; after that the transport
stays failed and the connection should be closed.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms, modes

__all__ = [
    "DEFAULT_MAX_PAYLOAD",
    "Frame",
    "ServerTransport",
    "TransportError",
    "TransportKind",
]

# 1 MiB of data plus room for the MTProto envelope around it.
DEFAULT_MAX_PAYLOAD = (1 << 20) + 4096

_TAG_ABRIDGED = 0xEF
_TAG_INTERMEDIATE = b"\xee\xee\xee\xee"
_TAG_PADDED = b"\xdd\xdd\xdd\xdd"
_OBFUSCATED_TAGS = {
    b"\xef\xef\xef\xef": "abridged",
    _TAG_INTERMEDIATE: "intermediate",
    _TAG_PADDED: "padded_intermediate",
}
_HTTP_PREFIXES = (b"POST", b"GET ", b"HEAD", b"OPTI", b"PUT ")
_TLS_PREFIX = b"\x16\x03\x01"
_OBFUSCATED_HEADER_LEN = 64
# Spec allows 0..15 bytes of padding in padded intermediate.
_MAX_PADDING = 15
_QUICK_ACK_BIT = 0x80000000
_ABRIDGED_MAX_WORDS = 1 << 24

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_FULL_HEAD = struct.Struct("<Ii")


class TransportError(Exception):
    """The peer sent bytes that are not a valid transport stream."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransportKind(enum.Enum):
    ABRIDGED = "abridged"
    INTERMEDIATE = "intermediate"
    PADDED_INTERMEDIATE = "padded_intermediate"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded client packet.

    ``quick_ack`` is set when the client asked for a quick acknowledgement
    (abridged/intermediate only). For padded intermediate the payload is cut
    to a multiple of 4, but a client may send up to 15 padding bytes, so up to
    12 trailing bytes can still be padding: ``padded`` tells the MTProto layer
    to ignore what lies past the message it parses.
    """

    payload: bytes
    quick_ack: bool = False
    padded: bool = False


def _ctr(key: bytes, iv: bytes) -> CipherContext:
    return Cipher(algorithms.AES(key), modes.CTR(iv)).encryptor()


class ServerTransport:
    """Framing codec for one client connection (server side).

    ``random_bytes`` is only needed for padded intermediate, where the server
    pads its own packets; it may be omitted if padding is passed to
    :meth:`encode` explicitly.
    """

    def __init__(
        self,
        *,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        random_bytes: Callable[[int], bytes] | None = None,
    ) -> None:
        if max_payload < 4:
            raise ValueError("max_payload must be at least 4")
        self.max_payload = max_payload
        self._random_bytes = random_bytes
        self.kind: TransportKind | None = None
        self.obfuscated = False
        # dc id announced in the obfuscated2 header (signed; negative for media DCs).
        self.dc_id: int | None = None
        self._buf = bytearray()
        self._decryptor: CipherContext | None = None
        self._encryptor: CipherContext | None = None
        self._in_seq = 0
        self._out_seq = 0
        self._failed: TransportError | None = None

    # -- input ---------------------------------------------------------------

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet make a complete packet."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        """Consume bytes from the socket and return every complete packet."""
        if self._failed is not None:
            raise self._failed
        try:
            return self._feed(data)
        except TransportError as exc:
            self._failed = exc
            self._buf = bytearray()
            raise

    def _feed(self, data: bytes) -> list[Frame]:
        if self._decryptor is not None:
            data = self._decryptor.update(data)
        self._buf += data
        if self.kind is None and not self._detect():
            return []
        return self._parse_frames()

    def _detect(self) -> bool:
        buf = self._buf
        if not buf:
            return False
        if buf[0] == _TAG_ABRIDGED:
            del buf[:1]
            self.kind = TransportKind.ABRIDGED
            return True
        if len(buf) < 4:
            return False
        head = bytes(buf[:4])
        if head == _TAG_INTERMEDIATE:
            del buf[:4]
            self.kind = TransportKind.INTERMEDIATE
            return True
        if head == _TAG_PADDED:
            del buf[:4]
            self.kind = TransportKind.PADDED_INTERMEDIATE
            return True
        if head in _HTTP_PREFIXES:
            raise TransportError("http transport is not supported")
        if head.startswith(_TLS_PREFIX):
            raise TransportError("fake-tls transport is not supported")
        if len(buf) < 8:
            return False
        if buf[4:8] == b"\0\0\0\0":
            # Full transport: bytes 4..8 are the first seq_no, which is 0.
            # Obfuscated clients never start with zeros there.
            self.kind = TransportKind.FULL
            return True
        if len(buf) < _OBFUSCATED_HEADER_LEN:
            return False
        self._start_obfuscation()
        return True

    def _start_obfuscation(self) -> None:
        header = bytes(self._buf[:_OBFUSCATED_HEADER_LEN])
        rest = bytes(self._buf[_OBFUSCATED_HEADER_LEN:])
        reversed_part = header[8:56][::-1]
        decryptor = _ctr(header[8:40], header[40:56])
        encryptor = _ctr(reversed_part[:32], reversed_part[32:48])
        # The header is encrypted as part of the stream, so decrypting all 64
        # bytes also advances the counter to where the payload begins.
        plain_header = decryptor.update(header)
        tag_name = _OBFUSCATED_TAGS.get(plain_header[56:60])
        if tag_name is None:
            raise TransportError("unknown obfuscated protocol tag")
        self.kind = TransportKind(tag_name)
        self.obfuscated = True
        self.dc_id = int.from_bytes(plain_header[60:62], "little", signed=True)
        self._decryptor = decryptor
        self._encryptor = encryptor
        self._buf = bytearray(decryptor.update(rest))

    def _parse_frames(self) -> list[Frame]:
        kind = self.kind
        if kind is TransportKind.ABRIDGED:
            step = self._next_abridged
        elif kind is TransportKind.FULL:
            step = self._next_full
        else:
            step = self._next_intermediate
        frames: list[Frame] = []
        pos = 0
        view = memoryview(self._buf)
        try:
            while True:
                result = step(view, pos)
                if result is None:
                    break
                frame, pos = result
                frames.append(frame)
        finally:
            view.release()
        if pos:
            # One shift per feed keeps buffering linear in the bytes received.
            del self._buf[:pos]
        return frames

    def _next_abridged(self, view: memoryview, pos: int) -> tuple[Frame, int] | None:
        avail = len(view) - pos
        if avail < 1:
            return None
        first = view[pos]
        quick_ack = bool(first & 0x80)
        words = first & 0x7F
        header = 1
        if words == 0x7F:
            if avail < 4:
                return None
            words = _U32.unpack_from(view, pos)[0] >> 8
            header = 4
        length = words * 4
        if length == 0:
            raise TransportError("empty packet")
        if length > self.max_payload:
            raise TransportError("packet too large")
        end = pos + header + length
        if end > len(view):
            return None
        return Frame(view[pos + header : end].tobytes(), quick_ack), end

    def _next_intermediate(self, view: memoryview, pos: int) -> tuple[Frame, int] | None:
        if len(view) - pos < 4:
            return None
        raw = _U32.unpack_from(view, pos)[0]
        quick_ack = bool(raw & _QUICK_ACK_BIT)
        length = raw & ~_QUICK_ACK_BIT
        padded = self.kind is TransportKind.PADDED_INTERMEDIATE
        if padded:
            if length > self.max_payload + _MAX_PADDING:
                raise TransportError("packet too large")
            payload_len = length - length % 4
        else:
            if length > self.max_payload:
                raise TransportError("packet too large")
            if length % 4:
                raise TransportError("packet length is not a multiple of 4")
            payload_len = length
        if payload_len == 0:
            raise TransportError("empty packet")
        end = pos + 4 + length
        if end > len(view):
            return None
        payload = view[pos + 4 : pos + 4 + payload_len].tobytes()
        return Frame(payload, quick_ack, padded), end

    def _next_full(self, view: memoryview, pos: int) -> tuple[Frame, int] | None:
        avail = len(view) - pos
        if avail < 4:
            return None
        total = _U32.unpack_from(view, pos)[0]
        # total counts length(4) + seq(4) + payload + crc(4)
        if total % 4:
            raise TransportError("packet length is not a multiple of 4")
        if total < 16:
            raise TransportError("empty packet")
        if total - 12 > self.max_payload:
            raise TransportError("packet too large")
        if avail < total:
            return None
        end = pos + total
        seq = _I32.unpack_from(view, pos + 4)[0]
        expected_crc = _U32.unpack_from(view, end - 4)[0]
        if zlib.crc32(view[pos : end - 4]) != expected_crc:
            raise TransportError("bad crc32")
        if seq != self._in_seq:
            raise TransportError("bad packet seq_no")
        self._in_seq += 1
        return Frame(view[pos + 8 : end - 4].tobytes()), end

    # -- output --------------------------------------------------------------

    def encode(self, payload: bytes, *, padding: bytes | None = None) -> bytes:
        """Frame (and, if obfuscated, encrypt) one server->client packet.

        For padded intermediate, ``padding`` defaults to 0..3 random bytes:
        some clients (Telethon) strip only ``len % 4`` trailing bytes, so longer
        padding would break them, though the spec allows up to 15.
        """
        kind = self._require_kind()
        size = len(payload)
        if size == 0 or size % 4:
            raise ValueError("payload length must be a positive multiple of 4")
        if padding is not None and kind is not TransportKind.PADDED_INTERMEDIATE:
            raise ValueError("padding only applies to padded intermediate")
        if kind is TransportKind.ABRIDGED:
            words = size >> 2
            if words >= _ABRIDGED_MAX_WORDS:
                raise ValueError("payload too large for abridged transport")
            if words < 0x7F:
                packet = bytes((words,)) + payload
            else:
                packet = _U32.pack((words << 8) | 0x7F) + payload
        elif kind is TransportKind.INTERMEDIATE:
            packet = _U32.pack(size) + payload
        elif kind is TransportKind.PADDED_INTERMEDIATE:
            if padding is None:
                padding = self._default_padding()
            elif len(padding) > _MAX_PADDING:
                raise ValueError("padding must be at most 15 bytes")
            packet = _U32.pack(size + len(padding)) + payload + padding
        else:
            head = _FULL_HEAD.pack(size + 12, self._out_seq)
            body = head + payload
            packet = body + _U32.pack(zlib.crc32(body))
            self._out_seq += 1
        return self._wrap(packet)

    def encode_error(self, code: int) -> bytes:
        """A transport error (e.g. -404 unknown auth key, -429 flood) as one packet."""
        return self.encode(_I32.pack(code))

    def encode_quick_ack(self, token: int) -> bytes:
        """Send a quick-ack token (32 bits; the top bit is forced on).

        The token is written without a length prefix; the top bit tells the
        client it is not a packet. Abridged sends it big-endian so that this
        bit lands in the first byte.
        """
        kind = self._require_kind()
        if not 0 <= token <= 0xFFFFFFFF:
            raise ValueError("quick-ack token must fit in 32 bits")
        token |= _QUICK_ACK_BIT
        if kind is TransportKind.ABRIDGED:
            packet = token.to_bytes(4, "big")
        elif kind is TransportKind.FULL:
            raise ValueError("the full transport has no quick acks")
        else:
            packet = token.to_bytes(4, "little")
        return self._wrap(packet)

    def _default_padding(self) -> bytes:
        if self._random_bytes is None:
            raise ValueError("padded intermediate needs random_bytes or explicit padding")
        count = self._random_bytes(1)[0] % 4
        return self._random_bytes(count) if count else b""

    def _wrap(self, packet: bytes) -> bytes:
        if self._encryptor is not None:
            return self._encryptor.update(packet)
        return packet

    def _require_kind(self) -> TransportKind:
        if self.kind is None:
            raise ValueError("transport not detected yet")
        return self.kind
