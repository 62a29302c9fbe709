"""The current layer's classes by name and what their fields hold: each field's kind,
whether it is optional, and the defaults of the scalar kinds."""

from __future__ import annotations

import keyword
from typing import Any

from telesrv.tl._generated import layer as _layer
from telesrv.tl.core import TLObject


def py(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) or name == "self" else name


CLASSES: dict[int, type[TLObject]] = _layer.CLASSES
CLASSES_BY_NAME: dict[tuple[str, bool], type[TLObject]] = {
    (cls.TL_NAME, cls.IS_FUNCTION): cls for cls in CLASSES.values()
}


# -- the current layer's field defaults --------------------------------------------

SCALAR_DEFAULTS: dict[str, Any] = {"int": 0, "float": 0.0, "str": "", "bytes": b"", "bool": False}


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


def field_info(cls: type[TLObject]) -> dict[str, tuple[str, bool]]:
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
