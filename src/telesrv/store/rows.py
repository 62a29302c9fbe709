"""Rows to dataclasses, by column name.

A row's values are never spread by position: a query that selects its columns in
another order, or one more or fewer, would otherwise fill the wrong fields silently.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from functools import cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from telesrv.store.frozen_slots import sets_fields_only, slot_filler

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


class Row(Protocol):
    """What ``from_row`` reads of a record (``asyncpg.Record``, a dict)."""

    def __getitem__(self, key: str, /) -> Any: ...


def _init_names(cls: type[Any]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def maker(cls: type[T]) -> Callable[[Sequence[Any]], T]:
    """The function that makes ``cls`` of its init fields' values, in field order: for
    a store function that reads some of a row's columns itself (turning a list into a
    set, say) and hands the rest over as they are."""
    make: Callable[[Sequence[Any]], T] = _maker(cls)
    return make


@cache
def _maker(cls: type[DataclassInstance]) -> Callable[[Sequence[Any]], Any]:
    names = _init_names(cls)
    if any(f.kw_only for f in dataclasses.fields(cls) if f.init):
        return lambda values: cls(**dict(zip(names, values, strict=True)))
    fill = _filler(cls, names)
    if fill is not None:
        return fill
    return lambda values: cls(*values)


@cache
def _builder(cls: type[DataclassInstance]) -> Callable[[Row], Any]:
    """The function that makes ``cls`` of a row: its init fields' values are read by
    name in one C call (``itemgetter``), then made into the object (``maker``)."""
    names = _init_names(cls)
    make = _maker(cls)
    if not names:
        return lambda row: make(())
    read = itemgetter(*names)
    if len(names) == 1:
        return lambda row: make((read(row),))
    return lambda row: make(read(row))


def _filler(cls: type[Any], names: tuple[str, ...]) -> Callable[[Sequence[Any]], Any] | None:
    """For a frozen dataclass whose fields are all set by its ``__init__`` and nothing
    else: a function that makes one from its fields' values without that ``__init__``,
    which sets every field through ``object.__setattr__`` (looked up and called by
    name, per field) to get past the frozen class's own ``__setattr__``. It fills the
    instance's dict at once, or sets each slot through the slot's descriptor
    (frozen_slots.slot_filler), which is about twice as fast for rows of twenty fields and
    makes the same object. None for any other class, which its ``__init__`` makes."""
    if (
        not names
        # A plain subclass, or a class whose __init__ @dataclass did not make (one
        # written by hand, one inherited), or one taking more than the fields (an
        # InitVar). It may do more than set the fields, so it is called.
        or not sets_fields_only(cls)
        or (init := cls.__dict__["__init__"].__code__).co_argcount + init.co_kwonlyargcount
        != len(names) + 1
        or len(dataclasses.fields(cls)) != len(names)
        # Making the instance is someone else's: a __new__, a metaclass's __call__.
        or any("__new__" in vars(base) for base in cls.__mro__[:-1])
        or type(cls).__call__ is not type.__call__
    ):
        return None
    if "__slots__" not in cls.__dict__:
        if any(_data_descriptor(inspect.getattr_static(cls, name, None)) for name in names):
            # A field behind a descriptor (a base's slot, a property, a descriptor-typed
            # field) is set through it, never in the dict.
            return None

        # Fields live in the instance's dict, which is filled at once.
        def fill_dict(values: Sequence[Any]) -> Any:
            made = object.__new__(cls)
            made.__dict__.update(zip(names, values, strict=True))
            return made

        return fill_dict
    return slot_filler(cls, names)  # None: a field kept elsewhere (a base without slots)


def _data_descriptor(attr: object) -> bool:
    return hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")


def from_row(cls: type[T], row: Row) -> T:
    """``cls`` with each field taken from the column of the same name.

    Other columns are ignored; a missing one raises KeyError, so a query out of step
    with its dataclass fails at once. Rows of hot queries (outbox batches, boxes,
    events, users) become dataclasses by the thousand, so how each class is built is
    worked out once (``_builder``).
    """
    built: T = _builder(cls)(row)
    return built
