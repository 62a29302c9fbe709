"""A plain TL reader driven by one layer's schema, for tests: it shares no code with the
server's codecs, so bytes it parses are bytes a client of that layer can parse."""

from __future__ import annotations

import struct
from functools import cache
from typing import Any, cast

from telesrv.tl.parser import Combinator, TLType, load_all, load_old_layers

VECTOR_ID = 0x1CB5C415
BOOL_TRUE = 0x997275B5
BOOL_FALSE = 0xBC799737


class SchemaReadError(ValueError):
    pass


@cache
def all_layers() -> dict[int, list[Combinator]]:
    return load_old_layers()


class SchemaReader:
    """Decodes boxed objects of one layer into ``{"_": name, field: value}``."""

    def __init__(self, combinators: list[Combinator]) -> None:
        self.by_id = {c.id: c for c in combinators if not c.is_function}
        self.by_name = {c.name: c for c in combinators if not c.is_function}

    @classmethod
    @cache
    def for_layer(cls, layer: int) -> SchemaReader:
        from telesrv.tl import LAYER

        if layer == LAYER:
            return cls([c for c in load_all() if c.schema == "api"])
        return cls(all_layers()[layer])

    def read(self, data: bytes) -> Any:
        value, end = self._boxed(data, 0, "Object")
        if end != len(data):
            raise SchemaReadError(f"{len(data) - end} trailing bytes")
        return value

    def _boxed(self, b: bytes, p: int, expected: str) -> tuple[Any, int]:
        (cid,) = struct.unpack_from("<I", b, p)
        if cid == VECTOR_ID and expected in ("Object", "X"):
            # A bare result vector (a few methods return Vector<T>).
            (n,) = struct.unpack_from("<i", b, p + 4)
            p += 8
            out = []
            for _ in range(n):
                v, p = self._boxed(b, p, "Object")
                out.append(v)
            return out, p
        if expected == "Bool" and cid in (BOOL_TRUE, BOOL_FALSE):
            return cid == BOOL_TRUE, p + 4
        c = self.by_id.get(cid)
        if c is None:
            raise SchemaReadError(f"constructor {cid:#010x} is not in this layer (at {p})")
        if expected not in ("Object", "X") and c.result != expected:
            raise SchemaReadError(f"{c.name} where {expected} was expected")
        return self._fields(c, b, p + 4)

    def _fields(self, c: Combinator, b: bytes, p: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {"_": c.name}
        flags: dict[str, int] = {}
        for f in c.fields:
            t = f.type
            if t.is_flags:
                (flags[f.name],) = struct.unpack_from("<I", b, p)
                p += 4
                continue
            if t.flag_field is not None:
                if t.flag_field not in flags:
                    raise SchemaReadError(f"{c.name}.{f.name}: flag field read after use")
                if not flags[t.flag_field] & (1 << t.flag_bit):
                    out[f.name] = False if t.is_true else None
                    continue
                if t.is_true:
                    out[f.name] = True
                    continue
            out[f.name], p = self._value(t, b, p)
        return out, p

    def _value(self, t: TLType, b: bytes, p: int) -> tuple[Any, int]:
        if t.vector is not None:
            if t.vector == "Vector":
                (vid,) = struct.unpack_from("<I", b, p)
                if vid != VECTOR_ID:
                    raise SchemaReadError(f"vector id {vid:#010x}")
                p += 4
            (n,) = struct.unpack_from("<i", b, p)
            p += 4
            if n < 0 or n > len(b):
                raise SchemaReadError(f"vector length {n}")
            items = []
            for _ in range(n):
                v, p = self._value(TLType(t.name), b, p)
                items.append(v)
            return items, p
        name = t.name
        if name == "int":
            return struct.unpack_from("<i", b, p)[0], p + 4
        if name == "long":
            return struct.unpack_from("<q", b, p)[0], p + 8
        if name == "double":
            return struct.unpack_from("<d", b, p)[0], p + 8
        if name == "int128":
            return int.from_bytes(b[p : p + 16], "little", signed=True), p + 16
        if name == "int256":
            return int.from_bytes(b[p : p + 32], "little", signed=True), p + 32
        if name in ("string", "bytes"):
            raw, p = _tl_bytes(b, p)
            if name == "string":
                return raw.decode("utf-8"), p
            return raw, p
        if name == "Bool":
            (cid,) = struct.unpack_from("<I", b, p)
            if cid not in (BOOL_TRUE, BOOL_FALSE):
                raise SchemaReadError(f"Bool {cid:#010x}")
            return cid == BOOL_TRUE, p + 4
        if t.is_bare_constructor:
            return self._fields(self.by_name[name], b, p)
        return self._boxed(b, p, name)


def _tl_bytes(b: bytes, p: int) -> tuple[bytes, int]:
    if p >= len(b):
        raise SchemaReadError("bytes past the end")
    n = b[p]
    if n == 254:
        n = int.from_bytes(b[p + 1 : p + 4], "little")
        start = p + 4
        head = 4
    elif n == 255:
        raise SchemaReadError("bytes length 255")
    else:
        start = p + 1
        head = 1
    end = start + n
    if end > len(b):
        raise SchemaReadError("bytes past the end")
    total = head + n
    return b[start:end], p + total + (-total) % 4


def write_old(layer: int, name: str, values: dict[str, Any], *, function: bool = True) -> bytes:
    """``name`` as a client at ``layer`` writes it (scalars, booleans, flags, and
    already-serialized boxed values given as bytes)."""
    (c,) = [x for x in all_layers()[layer] if x.name == name and x.is_function == function]
    out = bytearray(struct.pack("<I", c.id))
    flags: dict[str, int] = {}
    for f in c.fields:
        t = f.type
        if t.flag_field is not None and values.get(f.name) not in (None, False):
            flags[t.flag_field] = flags.get(t.flag_field, 0) | (1 << t.flag_bit)
    for f in c.fields:
        t = f.type
        v = values.get(f.name)
        if t.is_flags:
            out += struct.pack("<I", flags.get(f.name, 0))
        elif t.is_true or (t.flag_field is not None and v is None):
            continue
        elif t.name == "int":
            out += struct.pack("<i", v)
        elif t.name == "long":
            out += struct.pack("<q", v)
        elif t.name == "string":
            raw = cast(str, v).encode()
            head = bytes([len(raw)]) if len(raw) < 254 else b"\xfe" + len(raw).to_bytes(3, "little")
            out += head + raw + b"\0" * (-(len(head) + len(raw)) % 4)
        elif t.name == "Bool":
            out += struct.pack("<I", BOOL_TRUE if v else BOOL_FALSE)
        else:
            assert isinstance(v, bytes), f.name
            out += v
    return bytes(out)
