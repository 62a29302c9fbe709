"""A faster ``__init__`` for the frozen dataclasses made on every message.

A frozen dataclass's generated ``__init__`` sets each field with
``object.__setattr__(self, name, value)``, since the class's own ``__setattr__``
refuses: per field, a lookup of ``__setattr__``, a generic call, and a search of the
class's MRO for the attribute's descriptor. For a class with slots the descriptor is
known when the class is made, so ``quick_init`` gives it an ``__init__`` that calls each
slot's own setter instead: the same parameters, defaults and keyword-only fields, about
half the time for a class of twenty fields. The class stays frozen for every other
assignment.

Only a class this can stand in for exactly is taken: frozen, with slots, no
``__post_init__``, no default factories and no fields left out of ``__init__`` (the
decorator raises otherwise, when the class is made). ``tests/test_quick_init.py``
holds every decorated class's ``__init__`` to the dataclass's own.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")

# Every class given a quick __init__, with the one dataclasses generated (for tests).
DECORATED: dict[type, Any] = {}


def quick_init(cls: type[T]) -> type[T]:
    """``cls`` (a frozen dataclass with slots) with its fields set by their slots."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__qualname__}: quick_init takes frozen dataclasses with slots")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__qualname__}: quick_init does not call __post_init__")
    namespace: dict[str, Any] = {}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not f.init or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__qualname__}.{f.name}: quick_init sets plain fields only")
        parameter = f.name
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            parameter += f"=_default_{f.name}"
        (keyword if f.kw_only else positional).append(parameter)
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        body.append(f"    _set_{f.name}(self, {f.name})")
    parameters = ["self", *positional, *(["*", *keyword] if keyword else [])]
    source = f"def __init__({', '.join(parameters)}):\n" + "\n".join(body or ["    pass"])
    exec(source, namespace)  # noqa: S102  # built from the class's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(cls.__init__.__annotations__)  # what introspection shows
    DECORATED[cls] = cls.__init__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
