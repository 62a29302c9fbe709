"""frozen_slots: quick_init stands in exactly for a frozen dataclass's own __init__."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from collections.abc import Sequence
from typing import Any

import pytest

import telesrv.wiring  # noqa: F401  # imports every module that decorates a class
from telesrv.store.frozen_slots import quick_init, slot_filler

# The classes made on every message: each must keep its quick __init__.
HOT = {
    "Allocation", "BoxMessage", "Origin", "OutgoingText", "SendBatch", "SendClaim",
    "SendParams", "SendResult", "Sent", "UpdateEvent", "_Call",
}  # fmt: skip


def _decorated() -> list[type]:
    found = {
        value
        for name, module in list(sys.modules.items())
        if name.startswith("telesrv.")
        for value in vars(module).values()
        if isinstance(value, type) and "_dataclass_init" in value.__dict__
    }
    return sorted(found, key=lambda c: c.__qualname__)


def test_the_hot_path_s_classes_are_decorated() -> None:
    assert {cls.__qualname__ for cls in _decorated()} == HOT


def _check_same(cls: type) -> None:
    """``cls(...)`` makes what the dataclass's own __init__ makes, however it is called."""
    generated = cls.__dict__["_dataclass_init"]
    assert inspect.signature(cls.__dict__["__init__"]) == inspect.signature(generated)
    fields = dataclasses.fields(cls)
    # A distinct object per field, so that a field set from another's argument shows.
    values = {f.name: object() for f in fields}
    required = [f.name for f in fields if not f.kw_only and f.default is dataclasses.MISSING]
    required_kw = {
        f.name: values[f.name] for f in fields if f.kw_only and f.default is dataclasses.MISSING
    }
    calls: list[tuple[list[Any], dict[str, Any]]] = [
        ([], values),  # every field by name
        ([values[n] for n in required], required_kw),  # the least, defaults for the rest
    ]
    for args, kwargs in calls:
        quick = cls(*args, **kwargs)
        reference: Any = object.__new__(cls)
        generated(reference, *args, **kwargs)
        for f in fields:
            assert getattr(quick, f.name) is getattr(reference, f.name)
    assert all(getattr(cls(**values), f.name) is values[f.name] for f in fields)


@pytest.mark.parametrize("cls", _decorated(), ids=lambda c: c.__qualname__)
def test_each_class_is_made_as_its_dataclass_init_makes_it(cls: type) -> None:
    _check_same(cls)
    # Its annotations resolve where the class's own do.
    hints = typing.get_type_hints(cls.__dict__["__init__"])
    assert hints == typing.get_type_hints(cls.__dict__["_dataclass_init"])


def test_a_missing_or_unknown_argument_is_refused_as_before() -> None:
    from telesrv.services.origin import Origin

    with pytest.raises(TypeError):
        Origin(1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Origin(1, 2, 3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Origin(auth_key_id=1, session=2)  # type: ignore[call-arg]


@dataclasses.dataclass(frozen=True, slots=True)
class _Base:
    a: int


@quick_init
@dataclasses.dataclass(frozen=True, slots=True)
class _Odd(_Base):
    """Keyword-only fields, a base's slot, a shared default, and names the generated
    code could trip over."""

    self: int = 1
    b: tuple[int, ...] = ()
    c: Sequence[int] = dataclasses.field(default=(1,), kw_only=True)
    d: int = dataclasses.field(kw_only=True, default=4)


def test_keyword_only_base_and_odd_names_are_made_as_before() -> None:
    _check_same(_Odd)
    made = _Odd(1, 2, c=(3,))
    assert (made.a, made.self, made.c, made.d) == (1, 2, (3,), 4)
    with pytest.raises(TypeError):
        _Odd(1, 2, (), (3,))  # type: ignore[call-arg]


def _frozen_slots(namespace: dict[str, Any], **options: Any) -> type:
    options.setdefault("frozen", True)
    options.setdefault("slots", True)
    annotations = namespace.pop("__annotations__", {"a": int})
    return dataclasses.dataclass(**options)(
        type("C", (), {"__annotations__": annotations, **namespace})
    )


def _init(self: Any, a: int) -> None:
    object.__setattr__(self, "a", a + 1)


@pytest.mark.parametrize(
    "make",
    [
        lambda: _frozen_slots({}, slots=False),
        lambda: _frozen_slots({}, frozen=False),
        lambda: _frozen_slots({}, init=False),
        lambda: _frozen_slots({"__init__": _init}),
        lambda: _frozen_slots({"__post_init__": lambda self: None}),
        lambda: _frozen_slots({"a": dataclasses.field(default_factory=int)}),
        lambda: _frozen_slots({"a": dataclasses.field(init=False, default=1)}),
        lambda: _frozen_slots({"__annotations__": {"a": int, "b": dataclasses.InitVar[int]}}),
    ],
    ids=[
        "no slots", "not frozen", "no init", "its own init", "post init", "a factory",
        "a field out of init", "an init-only variable",
    ],
)  # fmt: skip
def test_a_class_it_cannot_stand_in_for_is_refused(make: Any) -> None:
    cls = make()
    with pytest.raises(TypeError):
        quick_init(cls)


def test_a_base_without_slots_is_taken_and_a_second_decoration_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class InADict:
        a: int

    # A slotted dataclass gives its base's fields slots of its own.
    @quick_init
    @dataclasses.dataclass(frozen=True, slots=True)
    class Child(InADict):
        b: int

    _check_same(Child)
    with pytest.raises(TypeError):
        quick_init(_Odd)  # its __init__ is quick_init's already


def test_a_filler_sets_the_slots_and_calls_nothing_else() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Guarded:
        a: int

        def __post_init__(self) -> None:
            raise AssertionError("the filler calls no __init__")

    guarded: Any = slot_filler(Guarded, ["a"])
    assert guarded is not None and guarded([5]).a == 5
    fill = slot_filler(_Odd, ["a", "self", "b", "c", "d"])
    assert fill is not None
    made: Any = fill([1, 2, 3, 4, 5])
    assert (made.a, made.self, made.b, made.c, made.d) == (1, 2, 3, 4, 5)
    with pytest.raises(ValueError):
        fill([1, 2])
    assert slot_filler(_frozen_slots({}, slots=False), ["a"]) is None  # kept in a dict
