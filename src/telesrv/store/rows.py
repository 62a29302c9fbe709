"""Rows to dataclasses, by column name.

A row's values are never spread by position: a query that selects its columns in
another order, or one more or fewer, would otherwise fill the wrong fields silently.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


class Row(Protocol):
    """What ``from_row`` reads of a record (``asyncpg.Record``, a dict)."""

    def __getitem__(self, key: str, /) -> Any: ...


@cache
def _columns(cls: type[DataclassInstance]) -> tuple[tuple[str, ...], bool]:
    """The init fields' names, and whether they may all be given by position (none is
    keyword-only)."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    return tuple(f.name for f in fields), not any(f.kw_only for f in fields)


def from_row(cls: type[T], row: Row) -> T:
    """``cls`` with each field taken from the column of the same name.

    Other columns are ignored; a missing one raises KeyError, so a query out of step
    with its dataclass fails at once. The values read by name are passed in the
    dataclass's own field order when it allows that: cheaper than keywords, and rows of
    hot queries (outbox batches, boxes, events) become dataclasses by the thousand.
    """
    names, positional = _columns(cls)
    if positional:
        return cls(*[row[name] for name in names])
    return cls(**{name: row[name] for name in names})
