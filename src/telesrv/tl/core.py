"""TL runtime: the base object, primitive readers/writers and the manual types.

Generated code (``telesrv/tl/_generated``) calls the helpers here. Readers take
``(data, pos, depth)`` and return ``(value, new_pos)``; writers append to one
``bytearray``. Everything that can go wrong with hostile bytes is turned into
``DecodeError`` at the entry points (``decode``, ``read_object``).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, NoReturn

# The base class lives in a module of its own, which is never compiled: the generated
# classes derive from it, and a class mypyc compiles cannot have interpreted subclasses.
from telesrv.tl.tlobject import TLObject as TLObject

VECTOR_ID = 0x1CB5C415
BOOL_TRUE_ID = 0x997275B5
BOOL_FALSE_ID = 0xBC799737
GZIP_PACKED_ID = 0x3072CFA1
MSG_CONTAINER_ID = 0x73F1F8DC
RPC_RESULT_ID = 0xF35C6D01
RPC_ERROR_ID = 0x2144CA19

MAX_DEPTH = 64  # nesting of boxed objects; real schemas stay under ~15
# What gzip_packed may expand to, in total, within one decoded message: twice the
# largest frame, so decompression gives a sender no more to parse than plain bytes
# could, while a gzipped 512 KiB file part still fits.
MAX_GZIP_OUTPUT = 2 * 1024 * 1024
MAX_CONTAINER_MESSAGES = 1024

Reader = Callable[[bytes, int, int], tuple[Any, int]]


class DecodeError(ValueError):
    """The bytes are not a valid TL value of the expected type."""


# -- struct helpers used by generated code ----------------------------------

_S_I = struct.Struct("<I")
_S_i = struct.Struct("<i")
_S_q = struct.Struct("<q")
_S_d = struct.Struct("<d")
_S_II = struct.Struct("<II")
_S_Ii = struct.Struct("<Ii")

unpack_I = _S_I.unpack_from
unpack_i = _S_i.unpack_from
unpack_q = _S_q.unpack_from
unpack_d = _S_d.unpack_from
pack_I = _S_I.pack
pack_i = _S_i.pack
pack_q = _S_q.pack
pack_d = _S_d.pack
pack_Ii = _S_Ii.pack

BOOL_TRUE = pack_I(BOOL_TRUE_ID)
BOOL_FALSE = pack_I(BOOL_FALSE_ID)

_struct_cache: dict[str, struct.Struct] = {}
_STRUCT_CACHE_LIMIT = 512  # vector lengths come from the wire: never cache without bound


def cached_struct(fmt: str) -> struct.Struct:
    s = _struct_cache.get(fmt)
    if s is None:
        s = struct.Struct(fmt)
        if len(_struct_cache) < _STRUCT_CACHE_LIMIT:
            _struct_cache[fmt] = s
    return s


# -- readers ------------------------------------------------------------------


def read_bytes(b: bytes, p: int) -> tuple[bytes, int]:
    n = b[p]
    if n < 254:
        start = p + 1
        end = start + n
        nxt = p + ((n + 4) & ~3)  # 1 length byte + n, rounded up to 4
    elif n == 254:
        n = b[p + 1] | (b[p + 2] << 8) | (b[p + 3] << 16)
        start = p + 4
        end = start + n
        nxt = start + ((n + 3) & ~3)
    else:
        raise DecodeError(f"bad string length marker 255 at {p}")
    if nxt > len(b):
        raise DecodeError(f"string of {n} bytes at {p} runs past the end")
    return b[start:end], nxt


def read_string(b: bytes, p: int) -> tuple[str, int]:
    raw, p = read_bytes(b, p)
    return raw.decode("utf-8", "replace"), p


def read_bool(b: bytes, p: int) -> tuple[bool, int]:
    (c,) = unpack_I(b, p)
    if c == BOOL_TRUE_ID:
        return True, p + 4
    if c == BOOL_FALSE_ID:
        return False, p + 4
    raise DecodeError(f"expected Bool, got constructor {c:#010x} at {p}")


def read_int128(b: bytes, p: int) -> tuple[int, int]:
    if p + 16 > len(b):
        raise DecodeError("truncated int128")
    return int.from_bytes(b[p : p + 16], "little", signed=True), p + 16


def read_int256(b: bytes, p: int) -> tuple[int, int]:
    if p + 32 > len(b):
        raise DecodeError("truncated int256")
    return int.from_bytes(b[p : p + 32], "little", signed=True), p + 32


def _vector_header(b: bytes, p: int, elem_min: int) -> tuple[int, int]:
    c, n = unpack_Ii_from(b, p)
    if c != VECTOR_ID:
        raise DecodeError(f"expected vector, got constructor {c:#010x} at {p}")
    p += 8
    if n < 0 or n * elem_min > len(b) - p:
        raise DecodeError(f"vector count {n} at {p} exceeds the input")
    return n, p


def _bare_count(b: bytes, p: int, elem_min: int) -> tuple[int, int]:
    (n,) = unpack_i(b, p)
    p += 4
    if n < 0 or n * elem_min > len(b) - p:
        raise DecodeError(f"vector count {n} at {p} exceeds the input")
    return n, p


unpack_Ii_from = _S_Ii.unpack_from


def _fixed_vector(fmt: str, size: int) -> Callable[[bytes, int], tuple[list[Any], int]]:
    def read(b: bytes, p: int) -> tuple[list[Any], int]:
        n, p = _vector_header(b, p, size)
        return list(cached_struct(f"<{n}{fmt}").unpack_from(b, p)), p + n * size

    return read


read_vector_int = _fixed_vector("i", 4)
read_vector_long = _fixed_vector("q", 8)
read_vector_double = _fixed_vector("d", 8)


def read_vector_string(b: bytes, p: int) -> tuple[list[str], int]:
    n, p = _vector_header(b, p, 4)
    out = []
    for _ in range(n):
        s, p = read_string(b, p)
        out.append(s)
    return out, p


def read_vector_bytes(b: bytes, p: int) -> tuple[list[bytes], int]:
    n, p = _vector_header(b, p, 4)
    out = []
    for _ in range(n):
        s, p = read_bytes(b, p)
        out.append(s)
    return out, p


def read_vector_bool(b: bytes, p: int) -> tuple[list[bool], int]:
    n, p = _vector_header(b, p, 4)
    out = []
    for _ in range(n):
        v, p = read_bool(b, p)
        out.append(v)
    return out, p


def read_vector_boxed(m: dict[int, Reader], b: bytes, p: int, d: int) -> tuple[list[Any], int]:
    n, p = _vector_header(b, p, 4)
    out: list[Any] = []
    append = out.append
    d += 1
    for _ in range(n):
        (c,) = unpack_I(b, p)
        f = m.get(c)
        if f is None:
            unexpected(c, p, m)
        o, p = f(b, p + 4, d)
        append(o)
    return out, p


def read_bare_vector(reader: Reader, b: bytes, p: int, d: int) -> tuple[list[Any], int]:
    """``vector<T>`` of a bare constructor (``future_salt``) or boxed type (``IpPort``)."""
    n, p = _bare_count(b, p, 4)
    out = []
    for _ in range(n):
        o, p = reader(b, p, d + 1)
        out.append(o)
    return out, p


def read_boxed(m: dict[int, Reader], b: bytes, p: int, d: int) -> tuple[Any, int]:
    if d > MAX_DEPTH:
        too_deep()
    (c,) = unpack_I(b, p)
    f = m.get(c)
    if f is None:
        unexpected(c, p, m)
    return f(b, p + 4, d + 1)


def mixed_flag_fields(obj: TLObject, names: str) -> NoReturn:
    """Fields sharing one flag bit must be all set or all unset, or the bytes are garbage."""
    raise ValueError(f"{obj.TL_NAME}: {names} must be all set or all unset (they share a flag)")


def too_deep() -> NoReturn:
    raise DecodeError(f"objects nested deeper than {MAX_DEPTH}")


_map_names: dict[int, str] = {}


def name_map(m: dict[int, Reader], name: str) -> dict[int, Reader]:
    _map_names[id(m)] = name
    return m


def unexpected(c: int, p: int, m: dict[int, Reader]) -> NoReturn:
    expected = _map_names.get(id(m), "object")
    raise DecodeError(
        f"unexpected constructor {c:#010x} at {p - 4 if p >= 4 else p} for {expected}"
    )


class UnpackBudget:
    """What ``gzip_packed`` may still expand to while one message is decoded.

    Shared by every ``gzip_packed`` of the message (container items included), so
    many small bombs cannot add up. Unpacked data may not hold another
    ``gzip_packed``: one level is all clients use, and nesting multiplies the work.
    """

    __slots__ = ("remaining", "unpacking")

    def __init__(self, limit: int = MAX_GZIP_OUTPUT) -> None:
        self.remaining = limit
        self.unpacking = False  # decoding bytes that came out of a gzip_packed

    def gunzip(self, packed: bytes) -> bytes:
        if self.unpacking:
            raise DecodeError("gzip_packed inside gzip_packed")
        out = gunzip(packed, self.remaining)
        self.remaining -= len(out)
        return out


# The budget of the message being decoded (set by read_object); the generated
# readers only pass (data, pos, depth) along.
current_budget: ContextVar[UnpackBudget | None] = ContextVar("tl_unpack_budget", default=None)


def gzip_reader(m: dict[int, Reader]) -> Reader:
    """A reader for ``gzip_packed`` that yields one whole object from the map ``m``."""

    def read(b: bytes, p: int, d: int) -> tuple[Any, int]:
        packed, p = read_bytes(b, p)
        budget = current_budget.get()
        token = None
        if budget is None:
            budget = UnpackBudget()
            token = current_budget.set(budget)
        try:
            inner = budget.gunzip(packed)
            budget.unpacking = True
            try:
                obj, end = read_boxed(m, inner, 0, d)
            finally:
                budget.unpacking = False
        finally:
            if token is not None:
                current_budget.reset(token)
        if end != len(inner):
            raise DecodeError(f"{len(inner) - end} trailing bytes inside gzip_packed")
        return obj, p

    return read


def gunzip(packed: bytes, limit: int = MAX_GZIP_OUTPUT) -> bytes:
    """One complete gzip (or zlib) stream, expanding to at most ``limit`` bytes.

    Decompression stops at ``limit``: the output is never built past it.
    """
    try:
        z = zlib.decompressobj(wbits=zlib.MAX_WBITS | 32)
        out = z.decompress(packed, max(limit, 0) or 1)
    except zlib.error as e:
        raise DecodeError(f"bad gzip_packed data: {e}") from None
    if z.unconsumed_tail or len(out) > limit or (not z.eof and len(out) >= limit):
        raise DecodeError(f"gzip_packed expands beyond {limit} bytes")
    if not z.eof:
        raise DecodeError("bad gzip_packed data: truncated stream")
    if z.unused_data:
        raise DecodeError("bad gzip_packed data: bytes after the stream")
    return out


# -- writers ------------------------------------------------------------------


# Zero padding after a short (1-byte length) string, indexed by ``len & 3``.
_SHORT_PAD = (b"\0\0\0", b"\0\0", b"\0", b"")


def write_bytes(buf: bytearray, data: bytes) -> None:
    n = len(data)
    if n < 254:
        buf.append(n)
        buf += data
        buf += _SHORT_PAD[n & 3]
        return
    if n >= 1 << 24:
        raise ValueError("TL bytes longer than 16 MiB")
    buf += bytes((254, n & 0xFF, (n >> 8) & 0xFF, n >> 16))
    buf += data
    pad = (-n) & 3
    if pad:
        buf += b"\0" * pad


def write_string(buf: bytearray, s: str) -> None:
    data = s.encode("utf-8")
    n = len(data)
    if n < 254:  # the common case, without a second call
        buf.append(n)
        buf += data
        buf += _SHORT_PAD[n & 3]
    else:
        write_bytes(buf, data)


def write_int128(buf: bytearray, v: int) -> None:
    buf += v.to_bytes(16, "little", signed=True)


def write_int256(buf: bytearray, v: int) -> None:
    buf += v.to_bytes(32, "little", signed=True)


def write_vector_int(buf: bytearray, v: list[int]) -> None:
    n = len(v)
    buf += pack_Ii(VECTOR_ID, n)
    buf += cached_struct(f"<{n}i").pack(*v)


def write_vector_long(buf: bytearray, v: list[int]) -> None:
    n = len(v)
    buf += pack_Ii(VECTOR_ID, n)
    buf += cached_struct(f"<{n}q").pack(*v)


def write_vector_double(buf: bytearray, v: list[float]) -> None:
    n = len(v)
    buf += pack_Ii(VECTOR_ID, n)
    buf += cached_struct(f"<{n}d").pack(*v)


def write_vector_string(buf: bytearray, v: list[str]) -> None:
    buf += pack_Ii(VECTOR_ID, len(v))
    for s in v:
        write_bytes(buf, s.encode("utf-8"))


def write_vector_bytes(buf: bytearray, v: list[bytes]) -> None:
    buf += pack_Ii(VECTOR_ID, len(v))
    for s in v:
        write_bytes(buf, s)


def write_vector_bool(buf: bytearray, v: list[bool]) -> None:
    buf += pack_Ii(VECTOR_ID, len(v))
    for x in v:
        buf += BOOL_TRUE if x else BOOL_FALSE


def write_object(buf: bytearray, o: TLObject) -> None:
    """One boxed object, written after what ``buf`` holds."""
    o._write(buf)


def write_vector_boxed(buf: bytearray, v: list[TLObject]) -> None:
    buf += pack_Ii(VECTOR_ID, len(v))
    for o in v:
        o._write(buf)
