"""Decoding older layers' requests: readers built from the old definitions, whose
values are upgraded to the current object of the same name (with fixups for renamed
or retyped fields)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from telesrv.tl._generated import layer as _layer
from telesrv.tl.core import (
    MAX_DEPTH,
    DecodeError,
    Reader,
    TLObject,
    name_map,
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
)
from telesrv.tl.layers.fields import CLASSES_BY_NAME, SCALAR_DEFAULTS, field_info, py
from telesrv.tl.layers.selection import LAYER
from telesrv.tl.parser import Combinator, TLType


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
    # topics); now it is ``reply_to:InputReplyTo``. An object that still has the field
    # (an older inputReplyToMessage itself) keeps it.
    if "reply_to_msg_id" in cls.FIELDS:
        return
    msg_id = values.pop("reply_to_msg_id", None)
    top = values.pop("top_msg_id", None) if "top_msg_id" not in cls.FIELDS else None
    if msg_id is not None and "reply_to" in cls.FIELDS and values.get("reply_to") is None:
        values["reply_to"] = _layer.InputReplyToMessage(reply_to_msg_id=msg_id, top_msg_id=top)


def _title_text(values: dict[str, Any], cls: type[TLObject]) -> None:
    # A folder's title was a plain string before it became TextWithEntities.
    title = values.get("title")
    if isinstance(title, str) and field_info(cls).get("title", ("", False))[0] == (
        "_T_TextWithEntities"
    ):
        values["title"] = _layer.TextWithEntities(text=title, entities=[])


def _reaction_emoticon(values: dict[str, Any], cls: type[TLObject]) -> None:
    # A reaction was an emoticon string before layer 145; sendReaction took one where
    # it now takes a list.
    emoticon = values.get("reaction")
    if not isinstance(emoticon, str):
        return
    kind = field_info(cls).get("reaction", ("", False))[0]
    reaction = _layer.ReactionEmoji(emoticon=emoticon) if emoticon else _layer.ReactionEmpty()
    if kind == "_T_Reaction":
        values["reaction"] = reaction
    elif kind == "list":
        values["reaction"] = [reaction] if emoticon else []


def _sound_name(values: dict[str, Any], cls: type[TLObject]) -> None:
    # A notification sound was a name before it became NotificationSound (layer 136):
    # "default" the default sound, "" none, anything else a sound on the device.
    sound = values.get("sound")
    if not isinstance(sound, str) or field_info(cls).get("sound", ("", False))[0] != (
        "_T_NotificationSound"
    ):
        return
    if sound == "default":
        values["sound"] = _layer.NotificationSoundDefault()
    elif not sound:
        values["sound"] = _layer.NotificationSoundNone()
    else:
        values["sound"] = _layer.NotificationSoundLocal(title=sound, data=sound)


UP_FIXUPS: tuple[tuple[str, UpFixup], ...] = (
    ("reply_to_msg_id", _reply_to_msg_id),
    ("title", _title_text),
    ("reaction", _reaction_emoticon),
    ("sound", _sound_name),
)


def upgrade(name: str, is_function: bool, values: dict[str, Any]) -> TLObject:
    """The current object named ``name`` from an older layer's field values."""
    cls = CLASSES_BY_NAME.get((name, is_function))
    if cls is None:
        raise DecodeError(f"{name} has no counterpart in layer {LAYER}")
    for trigger, fixup in UP_FIXUPS:
        if trigger in values:
            fixup(values, cls)
    info = field_info(cls)
    obj = object.__new__(cls)
    for f, (kind, optional) in info.items():
        v = values.get(f)
        if v is not None and not _fits(kind, v):
            # Retyped since, with no fixup: refused rather than read as something else
            # or dropped without a word.
            raise DecodeError(f"{name}.{f} from an older layer has no form in layer {LAYER}")
        if v is None:
            if kind == "bool" and not optional:
                v = False
            elif not optional:
                if kind == "list":
                    v = []
                elif kind in SCALAR_DEFAULTS:
                    v = SCALAR_DEFAULTS[kind]
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


def type_map(tl_type: str) -> dict[int, Reader]:
    """The reader map of a boxed type: the current layer's, or one for a type only
    older layers have."""
    m = getattr(_layer, "_M_" + tl_type.replace(".", "_"), None)
    if m is None:
        m = _extra_maps.get(tl_type)
        if m is None:
            m = _extra_maps[tl_type] = name_map({}, tl_type)
    return m


def field_plan(t: TLType) -> tuple[str, Any]:
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


def make_reader(c: Combinator) -> Reader:
    plan = []
    for f in c.fields:
        kind, arg = field_plan(f.type)
        if kind == "scalar":
            arg = _SCALAR_READERS[arg]
        elif kind == "vscalar":
            arg = _VECTOR_READERS[arg]
        elif kind in ("boxed", "vboxed") and isinstance(arg, str):
            arg = type_map(arg)
        plan.append((py(f.name), kind, arg, f.type.flag_field, 1 << f.type.flag_bit))
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
