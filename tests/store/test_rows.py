"""Rows become dataclasses by column name, whatever order a query selects them in."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import pytest

from telesrv import store
from telesrv.store import db as dbmod
from telesrv.store.outbox import OutboxRow
from telesrv.store.rows import from_row


@dataclass(frozen=True)
class Pair:
    first: int
    second: str


async def test_columns_fill_the_fields_of_their_name(db: dbmod.Db) -> None:
    # Selected in the opposite order of the fields, with one column the class lacks.
    row = await db.pool.fetchrow("SELECT 'b' AS second, 7 AS extra, 1 AS first")
    assert from_row(Pair, row) == Pair(first=1, second="b")


async def test_a_missing_column_is_an_error_not_a_shifted_value(db: dbmod.Db) -> None:
    row = await db.pool.fetchrow("SELECT 1 AS first, 'b' AS other")
    with pytest.raises(KeyError):
        from_row(Pair, row)


async def test_a_default_field_still_needs_its_column(db: dbmod.Db) -> None:
    # OutboxRow.state_id has a default; a query that forgets it must not pass silently.
    row = await db.pool.fetchrow(
        "SELECT 1 AS target_user_id, 2 AS id, 3 AS pts, NULL::bigint AS exclude_auth_key_id,"
        " NULL::bigint AS exclude_session_id, 1 AS attempts"
    )
    with pytest.raises(KeyError):
        from_row(OutboxRow, row)
    full = dict(row) | {"state_id": None}
    assert from_row(OutboxRow, full) == OutboxRow(
        target_user_id=1,
        id=2,
        pts=3,
        exclude_auth_key_id=None,
        exclude_session_id=None,
        attempts=1,
        state_id=None,
    )


@dataclass(frozen=True)
class Mixed:
    first: int
    second: str = "x"
    _: KW_ONLY
    third: bool
    hidden: int = field(default=0, init=False)


async def test_keyword_only_and_non_init_fields_are_filled_by_name(db: dbmod.Db) -> None:
    row = await db.pool.fetchrow("SELECT true AS third, 'b' AS second, 9 AS hidden, 1 AS first")
    assert from_row(Mixed, row) == Mixed(1, "b", third=True)
    assert from_row(Mixed, row).hidden == 0  # not an init field: never read from the row


@dataclass(frozen=True, slots=True)
class Slotted:
    first: int
    second: str


@dataclass(frozen=True)
class Checked:
    first: int
    second: str

    def __post_init__(self) -> None:
        if self.first < 0:
            raise ValueError(self.first)


def _store_dataclasses() -> list[type[Any]]:
    found: dict[str, type[Any]] = {}
    for info in pkgutil.iter_modules(store.__path__, "telesrv.store."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if dataclasses.is_dataclass(value) and isinstance(value, type):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[k] for k in sorted(found)]


@pytest.mark.parametrize("cls", [Pair, Slotted, Mixed, *_store_dataclasses()])
def test_a_row_makes_the_object_its_init_makes(cls: type[Any]) -> None:
    # Frozen classes are made without their __init__ (store/rows.py): the same object,
    # field for field, for every dataclass of the store and each kind of class.
    fields = [f for f in dataclasses.fields(cls) if f.init]
    row = {f.name: (i, f.name) for i, f in enumerate(fields)}
    made = from_row(cls, row)
    expected = cls(**row)
    assert type(made) is cls
    assert made == expected
    assert [getattr(made, f.name) for f in dataclasses.fields(cls)] == [
        getattr(expected, f.name) for f in dataclasses.fields(cls)
    ]
    if cls.__dataclass_params__.frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.__setattr__(fields[0].name, None)


@dataclass(frozen=True)
class Counted:
    first: int

    def __init__(self, first: int) -> None:
        object.__setattr__(self, "first", first * 2)


@dataclass(frozen=True, slots=True)
class CountedChild(Slotted):
    third: int = 0


class Renamed(Slotted):
    def __init__(self, first: int, second: str) -> None:
        super().__init__(first + 1, second)


@dataclass(frozen=True)
class Plain:
    first: int


@dataclass(frozen=True, slots=True)
class SlottedOnPlain(Plain):
    second: str


def test_a_slotted_class_on_a_base_without_slots() -> None:
    assert from_row(SlottedOnPlain, {"first": 1, "second": "b"}) == SlottedOnPlain(1, "b")


@dataclass(frozen=True, slots=True)
class SlottedBase:
    first: int


@dataclass(frozen=True)
class PlainOnSlotted(SlottedBase):
    second: str


class Upper:
    """A field's descriptor: what is set is kept upper-cased."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = "_" + name

    def __get__(self, obj: object, owner: type | None = None) -> str:
        if obj is None:
            return ""  # the field's default, as @dataclass reads it
        value: str = getattr(obj, self.name)
        return value

    def __set__(self, obj: object, value: str) -> None:
        object.__setattr__(obj, self.name, value.upper())


@dataclass(frozen=True)
class Shouting:
    word: Upper = Upper()


@dataclass(frozen=True, init=False)
class NoInit(Plain):
    second: int


@dataclass(frozen=True)
class WithInitVar:
    first: int
    secret: dataclasses.InitVar[int]


@dataclass(frozen=True, slots=True)
class Empty:
    pass


def test_fields_behind_descriptors_are_set_through_them() -> None:
    assert from_row(PlainOnSlotted, {"first": 1, "second": "b"}) == PlainOnSlotted(1, "b")
    assert from_row(Shouting, {"word": "ab"}).word == "AB"


def test_a_class_whose_init_refuses_the_row_still_refuses_it() -> None:
    with pytest.raises(TypeError):
        from_row(NoInit, {"first": 1, "second": 2})
    with pytest.raises(TypeError):
        from_row(WithInitVar, {"first": 1})


def test_a_class_without_fields() -> None:
    assert from_row(Empty, {"any": 1}) == Empty()


def test_an_init_written_by_hand_is_still_called() -> None:
    assert from_row(Counted, {"first": 2}).first == 4
    assert from_row(Renamed, {"first": 1, "second": "b"}).first == 2
    # A dataclass subclass of a dataclass is made like any other.
    made = from_row(CountedChild, {"first": 1, "second": "b", "third": 3})
    assert made == CountedChild(1, "b", 3)


def test_a_class_with_post_init_still_runs_it() -> None:
    assert from_row(Checked, {"first": 1, "second": "b"}) == Checked(1, "b")
    with pytest.raises(ValueError):
        from_row(Checked, {"first": -1, "second": "b"})
