"""Down-converting answers and updates for a client at an older layer: objects that
layer lacks become its same-name constructor (an ``OldObject``) or a fallback."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from telesrv.tl._generated import layer as _layer
from telesrv.tl.core import TLObject, read_boxed, write_vector_boxed
from telesrv.tl.layers.fields import CLASSES, SCALAR_DEFAULTS, field_info, py
from telesrv.tl.layers.old_objects import (
    SCALAR_WRITERS,
    VECTOR_WRITERS,
    OldObject,
    compile_writer,
)
from telesrv.tl.layers.selection import LAYER, served_layer
from telesrv.tl.layers.upgrade import field_plan
from telesrv.tl.layers.vendored import layer_diff
from telesrv.tl.parser import parse_schema

log = logging.getLogger(__name__)


class ConversionError(ValueError):
    """An answer holds an object the client's layer cannot express."""


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


def _fallback_update(obj: TLObject) -> TLObject | None:
    # An update the client cannot parse is not sent; one that carries the account's
    # pts is replaced by an empty delete with the same pts, so that the client's pts
    # moves on as the log's does, with no hole to wait for and fetch again.
    pts = getattr(obj, "pts", None)
    pts_count = getattr(obj, "pts_count", None)
    if isinstance(pts, int) and isinstance(pts_count, int) and "channel_id" not in obj.FIELDS:
        return _layer.UpdateDeleteMessages(messages=[], pts=pts, pts_count=pts_count)
    return None


# What an object becomes for a layer that has no constructor of its name, by its
# type; None means "left out" (an element of a vector is dropped, an optional field
# is left unset). Types not listed are left out the same way.
FALLBACKS: dict[str, Callable[[TLObject], TLObject | None]] = {
    "MessageMedia": _fallback_unsupported_media,
    "MessageEntity": _fallback_unknown_entity,
    "MessageAction": _fallback_empty_action,
    "Update": _fallback_update,
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


_INT_BITS = {"int": 32, "long": 64, "int128": 128, "int256": 256}


def _fit_scalar(v: Any, old_type: str) -> Any:
    """``v`` for an old scalar field of ``old_type``, or None where it has no form there
    (a value that would not fit the old width is not sent cut short)."""
    if isinstance(v, _layer.TextWithEntities) and old_type == "string":
        # Text that became text with entities (folder titles after 181): the text goes
        # out, its entities cannot.
        return v.text
    if not isinstance(v, _SCALAR_CHECKS[old_type]):
        return None
    bits = _INT_BITS.get(old_type)
    if bits is not None and isinstance(v, int) and not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
        return None
    return v


def _tl_type_of(v: Any) -> str | None:
    if isinstance(v, OldObject):
        return v.tl_type
    if isinstance(v, TLObject):
        return v.TL_TYPE
    return None


# Hand-written conversions where a meaning changed, by current constructor name: each
# takes the converter and the object and answers what goes out instead (an old
# object, a current one to convert further, or DROP), or NotImplemented where its
# change does not concern the client's layer (``adapters`` fills this in).
Adapter = Callable[["Downgrader", TLObject], Any]
ADAPTERS: dict[str, Adapter] = {}
DROP: Any = _DROP


class OldVector(TLObject):
    """A result an older layer returned as a bare vector where we return an object."""

    __slots__ = ("items",)
    FIELDS = ("items",)

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def _write(self, buf: bytearray) -> None:
        write_vector_boxed(buf, self.items)


# Results an older layer had as ``Vector<X>``: the current constructor -> its field
# holding that vector (messages.getDialogFilters in layer 158).
VECTOR_RESULTS: dict[str, str] = {"messages.dialogFilters": "filters"}


class Downgrader:
    """Converts current-layer objects for one older layer."""

    def __init__(self, old_layer: int) -> None:
        diff = layer_diff(old_layer)
        self.layer = old_layer
        self.lacking = diff.lacking  # current constructor ids this layer does not have
        self.by_name = {
            c.name: c for c in parse_schema("\n".join(diff.type_lines), "api") if not c.is_function
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
            info = field_info(cls)
            fields = tuple(f for f, (kind, _o) in info.items() if kind not in SCALAR_DEFAULTS)
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
                kind, optional = field_info(cls)[f]
                if not optional:
                    empty = self._empty_of(kind[3:] if kind.startswith("_T_") else kind)
                    if empty is None:
                        # A value it must carry has no form here, so neither has it:
                        # its type's fallback goes instead, or it is left out of a
                        # list, or refused as a whole answer.
                        return self._fallback(obj)
                    y = empty
                else:
                    y = None
            object.__setattr__(copy, f, y)
        return obj if copy is None else copy

    def convert_value(self, obj: TLObject) -> Any:
        """``obj`` as this layer has it, or DROP (for adapters that answer a part)."""
        return self._convert_obj(obj)

    def has(self, name: str) -> bool:
        """Whether this layer has a constructor named ``name`` under another id (one
        it shares by id is never converted)."""
        return name in self.by_name

    def old_field_type(self, name: str, field: str) -> str | None:
        """The type of ``field`` in this layer's ``name`` (where its id differs from
        ours), or None where it has no such field."""
        c = self.by_name.get(name)
        for f in c.fields if c is not None else ():
            if f.name == field:
                return f.type.name
        return None

    def _to_old(self, obj: TLObject) -> Any:
        name = obj.TL_NAME
        adapter = ADAPTERS.get(name)
        if adapter is not None:
            out = adapter(self, obj)
            if out is not NotImplemented:
                return out
        plans = self._plan(name)
        if plans is None:
            vector_field = VECTOR_RESULTS.get(name)
            if vector_field is not None:
                return OldVector(self._convert_list(getattr(obj, vector_field)))
            return self._fallback(obj)
        out = self.build_old(name, obj)
        return self._fallback(obj) if out is _DROP else out

    def _fallback(self, obj: TLObject) -> Any:
        """What goes out for ``obj`` where it has no form in this layer."""
        fallback = FALLBACKS.get(obj.TL_TYPE)
        replacement = fallback(obj) if fallback is not None else None
        if replacement is None:
            return _DROP
        return self._convert_obj(replacement)

    def build_old(self, name: str, obj: object, overrides: dict[str, Any] | None = None) -> Any:
        """This layer's ``name`` from the fields of the same names in ``obj`` (those in
        ``overrides`` from there), or DROP where a value it needs has no form."""
        plans = self._plan(name)
        if plans is None:
            return _DROP
        try:
            return self._build_old(name, plans, obj, overrides or {})
        except ConversionError as e:
            log.debug("%s", e)
            return _DROP

    def _build_old(
        self, name: str, plans: tuple[list[Any], list[Any], Any], obj: object, over: dict[str, Any]
    ) -> OldObject:
        plan, write_plan, writer = plans
        values: list[Any] = []
        append = values.append
        for fname, kind, _w, flag_field, _bit, old_type in plan:
            v = over[fname] if fname in over else getattr(obj, fname, None)
            if kind == "flags":
                append(0)  # computed by the writer
            elif v is None:
                if flag_field is None:
                    v = self._old_default(kind, old_type, name, fname)
                append(v)
            elif kind == "true":
                append(bool(v))
            else:
                v = self._fit_old(v, kind, old_type)
                if v is None and flag_field is None:
                    v = self._old_default(kind, old_type, name, fname)
                append(v)
        return OldObject(self.by_name[name], write_plan, values, writer)

    def _fit_old(self, v: Any, kind: str, old_type: str) -> Any:
        """``v`` converted for an old field of ``old_type``, or None if it cannot be."""
        if kind == "scalar":
            return _fit_scalar(v, old_type)
        if kind == "vscalar":
            if not isinstance(v, list):
                return None
            return v if all(_fit_scalar(x, old_type) is x for x in v) else None
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
        if isinstance(v, str) and old_type == "TextWithEntities":
            # Plain text that a layer has as text with entities (a bot verification's
            # description in 230).
            return _layer.TextWithEntities(text=v, entities=[])
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
            for cls in CLASSES.values():
                if cls.TL_TYPE != tl_type or cls.IS_FUNCTION:
                    continue
                if cls.CONSTRUCTOR_ID in self.lacking:
                    continue
                info = field_info(cls)
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
                        kind, arg = field_plan(f.type)
                        if kind == "scalar":
                            writer: Any = SCALAR_WRITERS[arg]
                        elif kind == "vscalar":
                            writer = VECTOR_WRITERS[arg]
                        else:
                            writer = None
                        old_type = f.type.name
                        plan.append(
                            (
                                py(f.name),
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
    if served == LAYER:
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
