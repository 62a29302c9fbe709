"""Objects of an older layer written from its definition: ``OldObject`` and the
straight-line writers compiled for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from telesrv.tl.core import (
    BOOL_FALSE,
    BOOL_TRUE,
    TLObject,
    pack_d,
    pack_I,
    pack_i,
    pack_Ii,
    pack_q,
    write_bytes,
    write_int128,
    write_int256,
    write_string,
    write_vector_bool,
    write_vector_bytes,
    write_vector_double,
    write_vector_int,
    write_vector_long,
    write_vector_string,
)
from telesrv.tl.parser import Combinator


class OldObject(TLObject):
    """A constructor of an older layer, written from its definition."""

    __slots__ = ("_combinator", "_plan", "_values", "_writer")

    def __init__(
        self,
        combinator: Combinator,
        plan: list[Any],
        values: list[Any],
        writer: Callable[[bytearray, list[Any]], None],
    ) -> None:
        self._combinator = combinator
        self._plan = plan
        self._values = values
        self._writer = writer

    @property
    def tl_name(self) -> str:
        return self._combinator.name

    @property
    def tl_type(self) -> str:
        return self._combinator.result

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"_": self._combinator.name}
        for (fname, kind, _w, _ff, _bit), v in zip(self._plan, self._values, strict=True):
            if kind != "flags":
                out[fname] = v.to_dict() if isinstance(v, TLObject) else v
        return out

    def __repr__(self) -> str:
        return f"OldObject({self._combinator.name}#{self._combinator.id:08x})"

    def _write(self, buf: bytearray) -> None:
        self._writer(buf, self._values)


def compile_writer(c: Combinator, plan: list[Any]) -> Callable[[bytearray, list[Any]], None]:
    """A straight-line writer of ``c`` for values in ``plan`` order (compiled once per
    constructor and layer, as the generated writers are for the current layer)."""
    env: dict[str, Any] = {"pack_I": pack_I, "pack_Ii": pack_Ii, "ID": pack_I(c.id)}
    body = ["    buf += ID"]
    flag_vars = {fname: f"f{i}" for i, (fname, kind, *_r) in enumerate(plan) if kind == "flags"}
    pre = [f"    {v} = 0" for v in flag_vars.values()]
    for i, (_fname, kind, writer, flag_field, bit) in enumerate(plan):
        if flag_field is not None:
            test = f"v[{i}]" if kind == "true" else f"v[{i}] is not None"
            pre.append(f"    if {test}: {flag_vars[flag_field]} |= {bit}")
        if kind == "flags":
            body.append(f"    buf += pack_I({flag_vars[_fname]})")
            continue
        if kind == "true":
            continue
        if kind == "boxed":
            stmt = [f"v[{i}]._write(buf)"]
        elif kind == "vboxed":
            stmt = [f"buf += pack_Ii(0x1CB5C415, len(v[{i}]))", f"for o in v[{i}]: o._write(buf)"]
        else:
            env[f"W{i}"] = writer
            stmt = [f"W{i}(buf, v[{i}])"]
        if flag_field is not None:
            body.append(f"    if v[{i}] is not None:")
            body += [f"        {x}" for x in stmt]
        else:
            body += [f"    {x}" for x in stmt]
    source = "def write(buf, v):\n" + "\n".join(pre + body) + "\n"
    exec(compile(source, f"<layer writer {c.name}>", "exec"), env)
    writer_fn: Callable[[bytearray, list[Any]], None] = env["write"]
    return writer_fn


def _w_int(buf: bytearray, v: int) -> None:
    buf += pack_i(v)


def _w_long(buf: bytearray, v: int) -> None:
    buf += pack_q(v)


def _w_double(buf: bytearray, v: float) -> None:
    buf += pack_d(v)


def _w_bool(buf: bytearray, v: bool) -> None:
    buf += BOOL_TRUE if v else BOOL_FALSE


SCALAR_WRITERS: dict[str, Callable[[bytearray, Any], None]] = {
    "int": _w_int,
    "long": _w_long,
    "double": _w_double,
    "string": write_string,
    "bytes": write_bytes,
    "Bool": _w_bool,
    "int128": write_int128,
    "int256": write_int256,
}
VECTOR_WRITERS: dict[str, Callable[[bytearray, Any], None]] = {
    "int": write_vector_int,
    "long": write_vector_long,
    "double": write_vector_double,
    "string": write_vector_string,
    "bytes": write_vector_bytes,
    "Bool": write_vector_bool,
}
