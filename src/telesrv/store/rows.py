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
def _columns(cls: type[DataclassInstance]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def from_row(cls: type[T], row: Row) -> T:
    """``cls`` with each field taken from the column of the same name.

    Other columns are ignored; a missing one raises KeyError, so a query out of step
    with its dataclass fails at once.
    """
    return cls(**{name: row[name] for name in _columns(cls)})
