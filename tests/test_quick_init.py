"""quick_init stands in exactly for a frozen dataclass's own __init__."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

import telesrv.wiring  # noqa: F401  # imports every module that decorates a class
from telesrv.quick_init import DECORATED, quick_init


def _values(cls: type) -> dict[str, Any]:
    # A distinct object per field, so that a field set from another's argument shows.
    return {f.name: object() for f in dataclasses.fields(cls)}


def test_the_hot_path_s_classes_are_decorated() -> None:
    names = {cls.__qualname__ for cls in DECORATED}
    assert {"BoxMessage", "SendParams", "SendResult", "UpdateEvent", "Allocation"} <= names


@pytest.mark.parametrize("cls", list(DECORATED), ids=lambda c: c.__qualname__)
def test_each_class_is_made_as_its_dataclass_init_makes_it(cls: type) -> None:
    generated = DECORATED[cls]
    assert inspect.signature(cls.__dict__["__init__"]) == inspect.signature(generated)
    values = _values(cls)
    quick = cls(**values)
    reference: Any = object.__new__(cls)
    generated(reference, **values)
    for f in dataclasses.fields(cls):
        assert getattr(quick, f.name) is values[f.name] is getattr(reference, f.name)
    # by position too, for the fields that may be given so, and with the defaults
    positional = [f for f in dataclasses.fields(cls) if not f.kw_only]
    required = [f.name for f in positional if f.default is dataclasses.MISSING]
    required_kw = {
        f.name: values[f.name]
        for f in dataclasses.fields(cls)
        if f.kw_only and f.default is dataclasses.MISSING
    }
    short = cls(*[values[n] for n in required], **required_kw)
    short_reference: Any = object.__new__(cls)
    generated(short_reference, *[values[n] for n in required], **required_kw)
    for f in dataclasses.fields(cls):
        assert getattr(short, f.name) is getattr(short_reference, f.name)
    # still frozen
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(quick, name, None)


def test_a_missing_or_unknown_argument_is_refused_as_before() -> None:
    from telesrv.services.origin import Origin

    with pytest.raises(TypeError):
        Origin(1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Origin(1, 2, 3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Origin(auth_key_id=1, session=2)  # type: ignore[call-arg]


def test_keyword_only_fields_stay_keyword_only() -> None:
    @quick_init
    @dataclasses.dataclass(frozen=True, slots=True)
    class K:
        a: int
        b: int = dataclasses.field(default=2, kw_only=True)

    assert K(1).b == 2 and K(1, b=3).b == 3
    with pytest.raises(TypeError):
        K(1, 3)  # type: ignore[call-arg]
    assert inspect.signature(K.__init__) == inspect.signature(DECORATED[K])


@pytest.mark.parametrize(
    "make",
    [
        lambda: dataclasses.dataclass(frozen=True)(
            type("NoSlots", (), {"__annotations__": {"a": int}})
        ),
        lambda: dataclasses.dataclass(slots=True)(
            type("NotFrozen", (), {"__annotations__": {"a": int}})
        ),
    ],
    ids=["no slots", "not frozen"],
)
def test_a_class_it_cannot_stand_in_for_is_refused(make: Any) -> None:
    with pytest.raises(TypeError):
        quick_init(make())


def test_post_init_and_factories_are_refused() -> None:
    with pytest.raises(TypeError):

        @quick_init
        @dataclasses.dataclass(frozen=True, slots=True)
        class Post:
            a: int

            def __post_init__(self) -> None:
                pass

    with pytest.raises(TypeError):

        @quick_init
        @dataclasses.dataclass(frozen=True, slots=True)
        class Factory:
            a: list[int] = dataclasses.field(default_factory=list)
