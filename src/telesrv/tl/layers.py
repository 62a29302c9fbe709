"""Older API layers: decode their requests, down-convert answers to them.

Constructor ids are hashes of their definitions, so an id from any vendored
layer names one definition whatever layer the client declared. Readers for the
ids older layers have and the current layer lacks are added to the current
layer's per-type reader maps; each upgrades what it read to the current object
of the same name, field by field (new fields take their defaults, renamed or
retyped fields go through the fixups below). A current-layer request decodes
exactly as before: the maps only gained entries.

Answers and updates for a connection at an older layer are walked once before
serialization: every object whose id that layer lacks is replaced by its
same-name constructor of that layer (fields it lacks dropped, fields it requires
and we lack given defaults), or by a fallback when the layer has no such
constructor at all (``FALLBACKS``). Objects the layer shares are written by the
generated writers. Only the differences are stored (``_generated/old_layers``).

A layer between two vendored ones is served the nearest vendored one (the
lower on a tie); a layer above the current one is served the current one.
"""

from __future__ import annotations

import keyword
import logging
from collections.abc import Callable
from typing import Any

from telesrv.tl._generated import layer as _layer
from telesrv.tl._generated.old_layers import DIFFS
from telesrv.tl.core import (
    BOOL_FALSE,
    BOOL_TRUE,
    MAX_DEPTH,
    DecodeError,
    Reader,
    TLObject,
    name_map,
    pack_d,
    pack_I,
    pack_i,
    pack_Ii,
    pack_q,
    read_bool,
    read_boxed,
    read_bytes,
    read_int128,
    read_int256,
    read_string,
    read_vector_bool,
    read_vector_boxed,
    read_vector_bytes,
    read_vector_double,
    read_vector_int,
    read_vector_long,
    read_vector_string,
    too_deep,
    unpack_d,
    unpack_I,
    unpack_i,
    unpack_q,
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
from telesrv.tl.parser import Combinator, TLType, parse_schema

__all__ = [
    "LAYER",
    "OLD_LAYERS",
    "ConversionError",
    "downgrade",
    "downgrade_bytes",
    "install",
    "served_layer",
]

log = logging.getLogger(__name__)

LAYER: int = _layer.LAYER
OLD_LAYERS: tuple[int, ...] = tuple(sorted(DIFFS))


class ConversionError(ValueError):
    """An answer holds an object the client's layer cannot express."""


def served_layer(declared: int) -> int:
    """The layer whose objects a client declaring ``declared`` is sent."""
    if declared >= LAYER or not OLD_LAYERS:
        return LAYER
    candidates = (*OLD_LAYERS, LAYER)
    return min(candidates, key=lambda v: (abs(v - declared), v))


def _py(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) or name == "self" else name


_CLASSES: dict[int, type[TLObject]] = _layer.CLASSES
_CLASSES_BY_NAME: dict[tuple[str, bool], type[TLObject]] = {
    (cls.TL_NAME, cls.IS_FUNCTION): cls for cls in _CLASSES.values()
}


# -- the current layer's field defaults --------------------------------------------

_SCALAR_DEFAULTS: dict[str, Any] = {"int": 0, "float": 0.0, "str": "", "bytes": b"", "bool": False}


def _annotation_kind(annotation: str) -> tuple[str, bool]:
    """("int" | "float" | "str" | "bytes" | "bool" | "list" | "_T_Type" | ..., optional)."""
    optional = annotation.endswith(" | None")
    if optional:
        annotation = annotation[: -len(" | None")]
    annotation = annotation.replace("builtins.", "")
    if annotation.startswith("list["):
        return "list", optional
    return annotation, optional


_field_info_cache: dict[type[TLObject], dict[str, tuple[str, bool]]] = {}


def _field_info(cls: type[TLObject]) -> dict[str, tuple[str, bool]]:
    info = _field_info_cache.get(cls)
    if info is None:
        init = cls.__dict__.get("__init__")  # constructors without fields have none
        annotations = getattr(init, "__annotations__", {})
        defaults = getattr(init, "__kwdefaults__", None) or {}
        info = {}
        for f in cls.FIELDS:
            kind, optional = _annotation_kind(str(annotations.get(f, "TLObject")))
            # true flags default to False, other optional fields to None
            info[f] = (kind, optional or (f in defaults and defaults[f] is None))
        _field_info_cache[cls] = info
    return info


def _fits(kind: str, value: Any) -> bool:
    """Whether ``value`` may stand in a current-layer field of ``kind``."""
    if kind in ("int", "bool"):
        return isinstance(value, int)
    if kind == "float":
        return isinstance(value, (int, float))
    if kind == "str":
        return isinstance(value, str)
    if kind == "bytes":
        return isinstance(value, bytes)
    if kind == "list":
        return isinstance(value, list)
    if kind.startswith("_T_"):
        return isinstance(value, TLObject) and "_T_" + value.TL_TYPE.replace(".", "_") == kind
    return isinstance(value, TLObject)


# -- decoding old requests: read by the old definition, upgrade by name ---------------

# Renamed or retyped fields, old -> current: (old values by current field name, the
# current class) -> the values to use. One per pattern, each covered by a test.
UpFixup = Callable[[dict[str, Any], type[TLObject]], None]


def _reply_to_msg_id(values: dict[str, Any], cls: type[TLObject]) -> None:
    # Before layer 160 a reply was ``reply_to_msg_id:int`` (plus ``top_msg_id`` for
    # topics); now it is ``reply_to:InputReplyTo``.
    msg_id = values.pop("reply_to_msg_id", None)
    top = values.pop("top_msg_id", None) if "top_msg_id" not in cls.FIELDS else None
    if msg_id is not None and "reply_to" in cls.FIELDS and values.get("reply_to") is None:
        values["reply_to"] = _layer.InputReplyToMessage(reply_to_msg_id=msg_id, top_msg_id=top)


UP_FIXUPS: tuple[tuple[str, UpFixup], ...] = (("reply_to_msg_id", _reply_to_msg_id),)


def upgrade(name: str, is_function: bool, values: dict[str, Any]) -> TLObject:
    """The current object named ``name`` from an older layer's field values."""
    cls = _CLASSES_BY_NAME.get((name, is_function))
    if cls is None:
        raise DecodeError(f"{name} has no counterpart in layer {LAYER}")
    for trigger, fixup in UP_FIXUPS:
        if trigger in values:
            fixup(values, cls)
    info = _field_info(cls)
    obj = object.__new__(cls)
    for f, (kind, optional) in info.items():
        v = values.get(f)
        if v is not None and not _fits(kind, v):
            v = None  # retyped without a fixup: treated as absent
        if v is None:
            if kind == "bool" and not optional:
                v = False
            elif not optional:
                if kind == "list":
                    v = []
                elif kind in _SCALAR_DEFAULTS:
                    v = _SCALAR_DEFAULTS[kind]
                else:
                    raise DecodeError(f"{name}: no value for required {f} at layer {LAYER}")
            elif kind == "bool":
                v = False
        object.__setattr__(obj, f, v)
    return obj


_VECTOR_READERS: dict[str, Callable[[bytes, int], tuple[Any, int]]] = {
    "int": read_vector_int,
    "long": read_vector_long,
    "double": read_vector_double,
    "string": read_vector_string,
    "bytes": read_vector_bytes,
    "Bool": read_vector_bool,
}


def _read_int(b: bytes, p: int) -> tuple[int, int]:
    return unpack_i(b, p)[0], p + 4


def _read_long(b: bytes, p: int) -> tuple[int, int]:
    return unpack_q(b, p)[0], p + 8


def _read_double(b: bytes, p: int) -> tuple[float, int]:
    return unpack_d(b, p)[0], p + 8


_SCALAR_READERS: dict[str, Callable[[bytes, int], tuple[Any, int]]] = {
    "int": _read_int,
    "long": _read_long,
    "double": _read_double,
    "string": read_string,
    "bytes": read_bytes,
    "Bool": read_bool,
    "int128": read_int128,
    "int256": read_int256,
}

_extra_maps: dict[str, dict[int, Reader]] = {}


def _type_map(tl_type: str) -> dict[int, Reader]:
    """The reader map of a boxed type: the current layer's, or one for a type only
    older layers have."""
    m = getattr(_layer, "_M_" + tl_type.replace(".", "_"), None)
    if m is None:
        m = _extra_maps.get(tl_type)
        if m is None:
            m = _extra_maps[tl_type] = name_map({}, tl_type)
    return m


def _field_plan(t: TLType) -> tuple[str, Any]:
    """(how to read/write, with what) for one field type."""
    if t.is_flags:
        return "flags", None
    if t.is_true:
        return "true", None
    if t.generic_ref or t.name in ("X", "Object"):
        return "boxed", _layer.ALL_READERS
    if t.vector is not None:
        if t.vector == "vector" or t.is_bare_constructor:
            raise ValueError(f"bare vector {t}")
        if t.name in _VECTOR_READERS:
            return "vscalar", t.name
        return "vboxed", t.name
    if t.name in _SCALAR_READERS:
        return "scalar", t.name
    if t.is_bare_constructor:
        raise ValueError(f"bare constructor {t}")
    return "boxed", t.name


def _make_reader(c: Combinator) -> Reader:
    plan = []
    for f in c.fields:
        kind, arg = _field_plan(f.type)
        if kind == "scalar":
            arg = _SCALAR_READERS[arg]
        elif kind == "vscalar":
            arg = _VECTOR_READERS[arg]
        elif kind in ("boxed", "vboxed") and isinstance(arg, str):
            arg = _type_map(arg)
        plan.append((_py(f.name), kind, arg, f.type.flag_field, 1 << f.type.flag_bit))
    name, is_function = c.name, c.is_function

    def read(b: bytes, p: int, d: int) -> tuple[TLObject, int]:
        if d > MAX_DEPTH:
            too_deep()
        values: dict[str, Any] = {}
        flags: dict[str, int] = {}
        for fname, kind, arg, flag_field, bit in plan:
            if flag_field is not None and not flags[flag_field] & bit:
                continue
            if kind == "scalar" or kind == "vscalar":
                values[fname], p = arg(b, p)
            elif kind == "boxed":
                values[fname], p = read_boxed(arg, b, p, d)
            elif kind == "vboxed":
                values[fname], p = read_vector_boxed(arg, b, p, d)
            elif kind == "true":
                values[fname] = True
            else:  # flags
                flags[fname] = unpack_I(b, p)[0]
                p += 4
        return upgrade(name, is_function, values), p

    return read


# -- down-converting answers ---------------------------------------------------------

_DROP: Any = object()  # a vector element the old layer cannot express


def _fallback_unsupported_media(obj: TLObject) -> TLObject | None:
    return _layer.MessageMediaUnsupported()


def _fallback_unknown_entity(obj: TLObject) -> TLObject | None:
    return _layer.MessageEntityUnknown(
        offset=getattr(obj, "offset", 0), length=getattr(obj, "length", 0)
    )


def _fallback_empty_action(obj: TLObject) -> TLObject | None:
    return _layer.MessageActionEmpty()


def _fallback_drop(obj: TLObject) -> TLObject | None:
    return None


# What an object becomes for a layer that has no constructor of its name, by its
# type; None means "left out" (an element of a vector is dropped, an optional field
# is left unset). Types not listed are left out the same way.
FALLBACKS: dict[str, Callable[[TLObject], TLObject | None]] = {
    "MessageMedia": _fallback_unsupported_media,
    "MessageEntity": _fallback_unknown_entity,
    "MessageAction": _fallback_empty_action,
    "Update": _fallback_drop,  # an update the client cannot parse is not sent
}

_DEFAULT_BY_OLD_TYPE: dict[str, Any] = {
    "int": 0,
    "long": 0,
    "double": 0.0,
    "string": "",
    "bytes": b"",
    "Bool": False,
    "int128": 0,
    "int256": 0,
}


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


_SCALAR_WRITERS: dict[str, Callable[[bytearray, Any], None]] = {
    "int": _w_int,
    "long": _w_long,
    "double": _w_double,
    "string": write_string,
    "bytes": write_bytes,
    "Bool": _w_bool,
    "int128": write_int128,
    "int256": write_int256,
}
_VECTOR_WRITERS: dict[str, Callable[[bytearray, Any], None]] = {
    "int": write_vector_int,
    "long": write_vector_long,
    "double": write_vector_double,
    "string": write_vector_string,
    "bytes": write_vector_bytes,
    "Bool": write_vector_bool,
}
_SCALAR_CHECKS: dict[str, type | tuple[type, ...]] = {
    "int": int,
    "long": int,
    "int128": int,
    "int256": int,
    "double": (int, float),
    "string": str,
    "bytes": bytes,
    "Bool": int,
}


def _tl_type_of(v: Any) -> str | None:
    if isinstance(v, OldObject):
        return v.tl_type
    if isinstance(v, TLObject):
        return v.TL_TYPE
    return None


# Answers converted for old layers: constructor name -> old field name -> the value
# of that field from the current object, for fields renamed or retyped since.
DownFixup = Callable[[TLObject], Any]
DOWN_FIXUPS: dict[str, dict[str, DownFixup]] = {}


class Downgrader:
    """Converts current-layer objects for one older layer."""

    def __init__(self, old_layer: int) -> None:
        types_lines, function_lines, lacking = DIFFS[old_layer]
        self.layer = old_layer
        self.lacking = lacking  # current constructor ids this layer does not have
        self.by_name = {
            c.name: c for c in parse_schema("\n".join(types_lines), "api") if not c.is_function
        }
        # name -> (fields with their old types, the same without, the compiled writer)
        self._plans: dict[str, tuple[list[Any], list[Any], Any] | None] = {}
        self._object_fields: dict[type[TLObject], tuple[str, ...]] = {}
        self._empty: dict[str, TLObject | None] = {}

    # The walk ------------------------------------------------------------------------

    def convert(self, value: Any) -> Any:
        """``value`` with every object this layer lacks replaced; shared objects are
        copied only where something below them changed."""
        if isinstance(value, list):
            return self._convert_list(value)
        if isinstance(value, TLObject):
            out = self._convert_obj(value)
            if out is _DROP:
                raise ConversionError(f"{value.TL_NAME} has no form in layer {self.layer}")
            return out
        return value

    def _convert_list(self, items: list[Any]) -> list[Any]:
        out: list[Any] | None = None
        for i, x in enumerate(items):
            y = self._convert_obj(x) if isinstance(x, TLObject) else x
            if y is not x and out is None:
                out = items[:i]
            if out is not None and y is not _DROP:
                out.append(y)
        return items if out is None else out

    def _convert_obj(self, obj: TLObject) -> Any:
        cls = type(obj)
        if cls.CONSTRUCTOR_ID in self.lacking:
            return self._to_old(obj)
        fields = self._object_fields.get(cls)
        if fields is None:
            info = _field_info(cls)
            fields = tuple(f for f, (kind, _o) in info.items() if kind not in _SCALAR_DEFAULTS)
            self._object_fields[cls] = fields
        copy: TLObject | None = None
        for f in fields:
            x = getattr(obj, f)
            if x is None:
                continue
            if isinstance(x, list):
                if not x or not isinstance(x[0], (TLObject, list)):
                    continue
                y: Any = self._convert_list(x)
            elif isinstance(x, TLObject):
                y = self._convert_obj(x)
            else:
                continue
            if y is x:
                continue
            if copy is None:
                copy = object.__new__(cls)
                for g in cls.FIELDS:
                    object.__setattr__(copy, g, getattr(obj, g))
            if y is _DROP:
                kind, optional = _field_info(cls)[f]
                if not optional:
                    empty = self._empty_of(kind[3:] if kind.startswith("_T_") else kind)
                    if empty is None:
                        raise ConversionError(
                            f"{x.TL_NAME} in {cls.TL_NAME} has no form in layer {self.layer}"
                        )
                    y = empty
                else:
                    y = None
            object.__setattr__(copy, f, y)
        return obj if copy is None else copy

    def _to_old(self, obj: TLObject) -> Any:
        name = obj.TL_NAME
        plans = self._plan(name)
        if plans is None:
            fallback = FALLBACKS.get(obj.TL_TYPE)
            replacement = fallback(obj) if fallback is not None else None
            if replacement is None:
                return _DROP
            return self._convert_obj(replacement)
        plan, write_plan, writer = plans
        values: list[Any] = []
        append = values.append
        fixups = DOWN_FIXUPS.get(name)
        for fname, kind, _w, flag_field, _bit, old_type in plan:
            if fixups is not None and fname in fixups:
                v = fixups[fname](obj)
            else:
                v = getattr(obj, fname, None)
            if kind == "flags":
                append(0)  # computed by the writer
            elif v is None:
                if flag_field is None:
                    v = self._old_default(kind, old_type, name, fname)
                append(v)
            elif kind == "true":
                append(bool(v))
            else:
                if kind == "scalar":
                    if not isinstance(v, _SCALAR_CHECKS[old_type]):
                        v = None
                else:
                    v = self._fit_old(v, kind, old_type)
                if v is None and flag_field is None:
                    v = self._old_default(kind, old_type, name, fname)
                append(v)
        return OldObject(self.by_name[name], write_plan, values, writer)

    def _fit_old(self, v: Any, kind: str, old_type: str) -> Any:
        """``v`` converted for an old field of ``old_type``, or None if it cannot be."""
        if kind == "scalar":
            return v if isinstance(v, _SCALAR_CHECKS[old_type]) else None
        if kind == "vscalar":
            if not isinstance(v, list):
                return None
            check = _SCALAR_CHECKS[old_type]
            return v if all(isinstance(x, check) for x in v) else None
        if kind == "vboxed":
            if not isinstance(v, list):
                return None
            out = []
            for x in v:
                y = self._convert_obj(x) if isinstance(x, TLObject) else _DROP
                if y is not _DROP and (old_type in ("X", "Object") or _tl_type_of(y) == old_type):
                    out.append(y)
            return out
        # boxed
        if not isinstance(v, TLObject):
            return None
        y = self._convert_obj(v)
        if y is _DROP:
            return None
        if old_type not in ("X", "Object") and _tl_type_of(y) != old_type:
            return None
        return y

    def _old_default(self, kind: str, old_type: str, name: str, fname: str) -> Any:
        if kind == "scalar":
            return _DEFAULT_BY_OLD_TYPE[old_type]
        if kind in ("vscalar", "vboxed"):
            return []
        empty = self._empty_of(old_type)
        if empty is None:
            raise ConversionError(f"{name}.{fname} needs a value in layer {self.layer}")
        return empty

    def _empty_of(self, tl_type: str) -> TLObject | None:
        """A constructor of ``tl_type`` this layer shares and that needs no values."""
        if tl_type in FALLBACKS:
            return None  # those types have their own rule; no stand-in is invented
        if tl_type not in self._empty:
            found: TLObject | None = None
            for cls in _CLASSES.values():
                if cls.TL_TYPE != tl_type or cls.IS_FUNCTION:
                    continue
                if cls.CONSTRUCTOR_ID in self.lacking:
                    continue
                info = _field_info(cls)
                if all(opt or kind == "bool" for kind, opt in info.values()):
                    found = cls()
                    break
            self._empty[tl_type] = found
        return self._empty[tl_type]

    def _plan(self, name: str) -> tuple[list[Any], list[Any], Any] | None:
        if name not in self._plans:
            c = self.by_name.get(name)
            plan: list[Any] | None = None
            if c is not None:
                try:
                    plan = []
                    for f in c.fields:
                        kind, arg = _field_plan(f.type)
                        if kind == "scalar":
                            writer: Any = _SCALAR_WRITERS[arg]
                        elif kind == "vscalar":
                            writer = _VECTOR_WRITERS[arg]
                        else:
                            writer = None
                        old_type = f.type.name
                        plan.append(
                            (
                                _py(f.name),
                                kind,
                                writer,
                                f.type.flag_field,
                                1 << f.type.flag_bit,
                                old_type,
                            )
                        )
                except ValueError:
                    plan = None
            if plan is None or c is None:
                self._plans[name] = None
            else:
                write_plan = [p[:5] for p in plan]
                self._plans[name] = (plan, write_plan, compile_writer(c, write_plan))
        return self._plans[name]


_downgraders: dict[int, Downgrader] = {}


def downgrader(layer: int) -> Downgrader | None:
    """The converter for a client at ``layer``, or None when it gets current objects."""
    served = served_layer(layer)
    if served >= LAYER:
        return None
    d = _downgraders.get(served)
    if d is None:
        d = _downgraders[served] = Downgrader(served)
    return d


def downgrade(value: Any, layer: int) -> Any:
    """``value`` (an object, or a list of them) as a client at ``layer`` can parse it."""
    d = downgrader(layer)
    return value if d is None else d.convert(value)


def downgrade_bytes(body: bytes, layer: int) -> bytes | None:
    """A serialized current-layer object (a pushed ``Updates``) for a client at
    ``layer``; None when nothing of it is left to send."""
    d = downgrader(layer)
    if d is None:
        return body
    obj, _end = read_boxed(_layer.ALL_READERS, body, 0, 0)
    try:
        converted = d.convert(obj)
    except ConversionError as e:
        log.debug("not sent to layer %d: %s", layer, e)
        return None
    return converted.to_bytes() if converted is not obj else body


# -- installation ---------------------------------------------------------------------

_installed = False


def install() -> None:
    """Teach the decoder every older layer's ids (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    all_readers = _layer.ALL_READERS
    for old_layer in OLD_LAYERS:
        types_lines, function_lines, _lacking = DIFFS[old_layer]
        text = "\n".join((*types_lines, "---functions---", *function_lines))
        for c in parse_schema(text, "api"):
            if c.id in all_readers or (c.name, c.is_function) not in _CLASSES_BY_NAME:
                continue
            try:
                reader = _make_reader(c)
            except ValueError:
                log.debug("layer %d: %s has fields the reader cannot take", old_layer, c.name)
                continue
            if not c.is_function:
                _type_map(c.result)[c.id] = reader
            all_readers[c.id] = reader


install()
