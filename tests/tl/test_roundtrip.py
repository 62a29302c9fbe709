"""Every constructor and request in the schema survives serialize -> parse."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings

from telesrv.tl import CLASSES, TLObject, decode
from tl.tlgen import COMBINATORS, Builder, Source, any_object, object_of


def roundtrip(obj: TLObject) -> None:
    data = obj.to_bytes()
    assert len(data) % 4 == 0
    back = decode(data)
    assert back == obj, (obj, back)
    assert back.to_bytes() == data


def test_schema_has_every_combinator_class() -> None:
    assert {c.id for c in COMBINATORS} == set(CLASSES)


@pytest.mark.parametrize("mode", ["all-absent", "all-present", "random"])
def test_every_combinator_roundtrips(mode: str) -> None:
    rng = random.Random(f"sweep-{mode}")
    builder = Builder(Source(rng), max_depth=3)
    all_present = {"all-absent": False, "all-present": True, "random": None}[mode]
    for c in COMBINATORS:
        obj = builder.build(c, all_present=all_present)
        assert type(obj).CONSTRUCTOR_ID == c.id
        roundtrip(obj)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_object())
def test_generated_objects_roundtrip(obj: TLObject) -> None:
    roundtrip(obj)


# The objects the server sends most get deeper, more varied examples of their own.
HOT = ["message", "updates", "user", "dialog", "config", "messages.messages", "userFull"]


@pytest.mark.parametrize("name", HOT)
def test_hot_types_roundtrip(name: str) -> None:
    from tl.tlgen import BY_NAME

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(object_of(BY_NAME[name], max_depth=4))
    def check(obj: TLObject) -> None:
        roundtrip(obj)

    check()


def test_equality_repr_and_to_dict() -> None:
    from telesrv.tl import types

    a = types.Message(id=1, peer_id=types.PeerUser(user_id=2), date=3, message="x")
    b = types.Message(id=1, peer_id=types.PeerUser(user_id=2), date=3, message="x")
    assert a == b
    b.peer_id = types.PeerUser(user_id=9)
    assert a != b
    assert a != types.MessageEmpty(id=1)
    assert repr(a) == "Message(id=1, peer_id=PeerUser(user_id=2), date=3, message='x')"
    d = a.to_dict()
    assert d["_"] == "message" and d["peer_id"] == {"_": "peerUser", "user_id": 2}
    assert d["out"] is False and d["entities"] is None
    nested = types.messages.Messages(messages=[a], chats=[], topics=[], users=[])
    assert nested.to_dict()["messages"][0]["message"] == "x"
    assert repr(nested).startswith("messages.Messages(messages=[Message(")
