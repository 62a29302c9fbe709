"""Frozen dataclasses with slots, made through their slots' own setters.

A frozen dataclass's generated ``__init__`` sets each field with
``object.__setattr__(self, name, value)``, since the class's own ``__setattr__``
refuses: per field, a lookup of ``__setattr__``, a generic call, and a search of the
class's MRO for the attribute's descriptor. With slots, each field's descriptor is
known once the class is made, and calling its setter directly makes the same object in
about half the time for a class of twenty fields. Two shapes of that code live here:

- ``quick_init``: a class's ``__init__``, for the classes made on every message (a box,
  an event, a send's parameters). The class stays frozen for every other assignment.
- ``slot_filler``: a function that makes one from its fields' values in order,
  without calling ``__init__``, for rows read from the database (store/rows.py,
  which decides for which classes that is the same as calling ``__init__``).

Both only set fields. ``quick_init`` takes only a class whose ``__init__`` dataclasses
made and that does nothing else (no ``__post_init__``, default factories, init-only
variables or fields left out), and checks that its own ``__init__`` takes the same
parameters; it raises TypeError when the class is made otherwise. The setters are
the decorated class's own: a subclass that turns a field into a property, or gives it
a slot of its own, is not made through them by a quick ``__init__`` it inherits (none
does here; such a subclass would need one of its own).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Callable, Sequence
from types import MemberDescriptorType
from typing import Any, TypeVar

T = TypeVar("T")

# The names the generated code binds begin with this, so no field's name can clash.
_P = "__slots_"


def _slot_setters(cls: type, names: Sequence[str]) -> list[Callable[[Any, Any], None]] | None:
    """The setter of each named field's slot (a base class's slot too); None when a
    field is not kept in a slot (a class without slots, a property)."""
    setters = []
    for name in names:
        slot = inspect.getattr_static(cls, name, None)
        if not isinstance(slot, MemberDescriptorType):
            return None
        setters.append(slot.__set__)
    return setters


def sets_fields_only(cls: type) -> bool:
    """Whether ``cls`` is a frozen dataclass whose own ``__init__`` is the one dataclasses
    wrote (or ``quick_init``'s, which stands in for it) with no ``__post_init__``: one
    that sets the fields it takes and does nothing else. (An init-only variable is a
    parameter that is no field: each caller compares the parameters with the fields.)"""
    params = cls.__dict__.get("__dataclass_params__")
    code = getattr(cls.__dict__.get("__init__"), "__code__", None)
    return (
        params is not None
        and params.init
        and params.frozen
        and code is not None
        # dataclasses' code has no file; an __init__ written by hand has one
        and code.co_filename == "<string>"
        and not hasattr(cls, "__post_init__")
    )


def slot_filler(cls: type[T], names: Sequence[str]) -> Callable[[Sequence[Any]], T] | None:
    """A function that makes ``cls`` from the values of the fields ``names``, in that
    order, setting each slot and calling nothing else; None when a field has no slot."""
    setters = _slot_setters(cls, names)
    if setters is None:
        return None
    # Unpacked first: a wrong number of values is an error, as for __init__.
    unpack = "".join(f"v{i}, " for i in range(len(names)))
    body = "".join(f"    {_P}set_{i}(made, v{i})\n" for i in range(len(names)))
    source = f"def fill(values):\n    {unpack}= values\n    made = {_P}new({_P}cls)\n"
    source += f"{body}    return made\n"
    scope: dict[str, Any] = {f"{_P}new": object.__new__, f"{_P}cls": cls}
    scope.update((f"{_P}set_{i}", setter) for i, setter in enumerate(setters))
    exec(source, scope)  # noqa: S102 - code made here from the class's own field names
    fill: Callable[[Sequence[Any]], T] = scope["fill"]
    return fill


def quick_init(cls: type[T]) -> type[T]:
    """``cls`` (a frozen dataclass with slots) with an ``__init__`` that sets its fields
    through their slots. The one dataclasses made stays as ``_dataclass_init``."""
    if (
        not sets_fields_only(cls)
        or "__slots__" not in cls.__dict__
        or "_dataclass_init" in cls.__dict__  # given a quick one already
    ):
        raise TypeError(f"{cls.__qualname__}: quick_init takes a frozen dataclass with slots")
    original = cls.__dict__["__init__"]
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if any(not f.init or f.default_factory is not dataclasses.MISSING for f in fields):
        raise TypeError(f"{cls.__qualname__}: quick_init sets fields given to __init__ only")
    setters = _slot_setters(cls, [f.name for f in fields])
    if setters is None:
        raise TypeError(f"{cls.__qualname__}: a field of it is not kept in a slot")
    positional: list[str] = []
    keyword: list[str] = []
    defaults: dict[str, Any] = {}
    for i, f in enumerate(fields):
        parameter = f.name
        if f.default is not dataclasses.MISSING:
            defaults[f"{_P}default_{i}"] = f.default
            parameter += f"={_P}default_{i}"
        (keyword if f.kw_only else positional).append(parameter)
    # The instance's name as in the __init__ dataclasses wrote ("self", unless a field
    # or a pseudo-field took it).
    self_name = next(iter(inspect.signature(original).parameters))
    body = "".join(f"        {_P}set_{i}({self_name}, {f.name})\n" for i, f in enumerate(fields))
    parameters = [self_name, *positional, *(["*", *keyword] if keyword else [])]
    factory_parameters = [f"{_P}set_{i}" for i in range(len(fields))] + list(defaults)
    source = (
        f"def {_P}factory({', '.join(factory_parameters)}):\n"
        f"    def __init__({', '.join(parameters)}):\n{body or '        pass'}\n"
        f"    return __init__\n"
    )
    # Run in the class's module, as dataclasses does, so that the annotations copied
    # below resolve there (typing.get_type_hints, hypothesis's builds).
    scope: dict[str, Any] = {}
    module = sys.modules.get(cls.__module__)
    exec(source, vars(module) if module is not None else {}, scope)  # noqa: S102 - field names
    init = scope[f"{_P}factory"](*setters, *defaults.values())
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(original.__annotations__)
    if _shape(init) != _shape(original):  # an init-only variable, say: not ours to drop
        raise TypeError(f"{cls.__qualname__}: quick_init cannot take its __init__'s shape")
    cls._dataclass_init = original  # type: ignore[attr-defined]
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def _shape(init: Any) -> list[tuple[str, Any, Any]]:
    """An __init__'s parameters after self: name, kind and default."""
    parameters = list(inspect.signature(init).parameters.values())[1:]
    return [(p.name, p.kind, p.default) for p in parameters]
