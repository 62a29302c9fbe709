"""Every layer from 133 to 230: random current-layer objects of every type the server
sends, converted for the layer, parse with that layer's own schema (read by a reader
that shares no code with the server's codecs) and keep every field the layer has."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telesrv.tl import LAYER, TLObject, types
from telesrv.tl.layers import OTHER_LAYERS, ConversionError, downgrade

from .schema_reader import SchemaReader
from .tlgen import BY_TYPE, Builder, DrawSource

# The types whose objects the server sends, in answers and pushes.
SENT_TYPES = (
    "User",
    "users.UserFull",
    "UserStatus",
    "Message",
    "MessageMedia",
    "MessageEntity",
    "MessageReplyHeader",
    "MessageReactions",
    "Dialog",
    "DialogFilter",
    "Updates",
    "updates.Difference",
    "updates.State",
    "messages.Messages",
    "messages.Dialogs",
    "Config",
    "Authorization",
    "account.Authorizations",
    "auth.Authorization",
    "auth.LoginToken",
    "Photo",
    "Document",
    "PeerNotifySettings",
    "PeerSettings",
)
# Updates go out inside ``updates`` (never as updateShort, whose single update could
# have no form in an old layer), and inside differences.
CONSTRUCTORS = [c for t in SENT_TYPES for c in BY_TYPE[t] if c.name != "updateShort"]


@st.composite
def sent_objects(draw: Any) -> TLObject:
    c = draw(st.sampled_from(CONSTRUCTORS))
    return Builder(DrawSource(draw), max_depth=3, max_vector=2).build(c)


# What an adapter sends in an old field's place, by (old constructor, old field).
def _color_int(v: Any) -> Any:
    if isinstance(v, types.PeerColorCollectible):
        return v.accent_color
    return getattr(v, "color", None)


def _emoticon(v: Any) -> Any:
    return v.emoticon if isinstance(v, types.ReactionEmoji) else None


ADAPTED: dict[tuple[str, str], tuple[str, Any]] = {
    # (the old field's type where the adapter applies, what it sends)
    ("user", "color"): ("int", _color_int),
    ("channel", "color"): ("int", _color_int),
    ("reactionCount", "reaction"): ("string", _emoticon),
    ("messagePeerReaction", "reaction"): ("string", _emoticon),
}

_PY_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int,
    "long": int,
    "int128": int,
    "int256": int,
    "double": (int, float),
    "string": str,
    "bytes": bytes,
    "Bool": (bool, int),
}
_INT_RANGES = {"int": 32, "long": 64, "int128": 128, "int256": 256}


def _fits(old_type: str, value: Any) -> bool:
    """Whether a current value can go out unchanged in an old field of ``old_type``."""
    check = _PY_TYPES.get(old_type)
    if check is None:
        return isinstance(value, TLObject)
    if not isinstance(value, check):
        return False
    bits = _INT_RANGES.get(old_type)
    return bits is None or -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


def kept(ours: Any, theirs: Any, reader: SchemaReader, path: str) -> None:
    """``theirs`` (an old layer's parse of what we sent for ``ours``) holds each of our
    values wherever the old layer has a field of the same name and kind."""
    if isinstance(ours, list):
        assert isinstance(theirs, list), path
        if len(ours) != len(theirs):
            # Elements the layer cannot express were left out: what is left keeps order.
            assert len(theirs) < len(ours), path
            return
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            kept(a, b, reader, f"{path}[{i}]")
        return
    if not isinstance(ours, TLObject):
        return
    if isinstance(theirs, list):
        return  # a result the old layer had as a bare vector (checked in test_old_layers)
    assert isinstance(theirs, dict), path
    name = theirs["_"]
    if name != ours.TL_NAME:
        return  # a fallback or an adapter's other constructor
    old = reader.by_name[name]
    for f in old.fields:
        t = f.type
        if t.is_flags:
            continue
        attr = f.name + "_" if f.name in ("self", "from", "default", "global") else f.name
        if attr not in ours.FIELDS:
            continue  # only the old layer has it: a neutral value went out
        value = getattr(ours, attr)
        got = theirs[f.name]
        where = f"{path}.{f.name}"
        adapted = ADAPTED.get((name, f.name))
        if adapted is not None and adapted[0] == t.name:
            assert got == adapted[1](value), where
            continue
        if t.is_true:
            assert got == bool(value), where
            continue
        if value is None:
            continue
        if t.vector is not None:
            if not isinstance(value, list):
                continue
            if t.name in _PY_TYPES:
                if all(_fits(t.name, x) for x in value):
                    assert got == value, where
                continue
            kept(value, got, reader, where)
            continue
        if t.name == "string" and isinstance(value, types.TextWithEntities):
            assert got == value.text, where  # text that gained entities since
            continue
        if t.name == "TextWithEntities" and isinstance(value, str):
            assert got == {"_": "textWithEntities", "text": value, "entities": []}, where
            continue
        if t.name in _PY_TYPES:
            if _fits(t.name, value):
                if isinstance(value, float) or t.name == "double":
                    assert got == pytest.approx(value), where
                else:
                    assert got == value, where
            elif t.flag_field is not None:
                assert got is None, where  # retyped: left out rather than misread
            continue
        if isinstance(value, TLObject):
            if got is None:
                # Only an optional field may be left out, and only when the value had
                # no form in this layer.
                assert t.flag_field is not None, where
                continue
            kept(value, got, reader, where)


def check_layer(layer: int, obj: TLObject) -> None:
    reader = SchemaReader.for_layer(layer)
    try:
        converted = downgrade(obj, layer)
    except ConversionError:
        # Only an object whose kind the layer does not have at all may be refused (an
        # answer is always of a kind its method's layer has).
        assert obj.TL_NAME not in reader.by_name
        return
    data = converted.to_bytes()
    theirs = reader.read(data)
    kept(obj, theirs, reader, obj.TL_NAME)


@pytest.mark.parametrize("layer", [*OTHER_LAYERS])
def test_random_objects_parse_in_every_layer(layer: int) -> None:
    @settings(
        max_examples=int(os.environ.get("TELESRV_LAYER_EXAMPLES", "40")),
        deadline=None,
        derandomize=os.environ.get("TELESRV_LAYER_EXAMPLES") is None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(sent_objects())
    def run(obj: TLObject) -> None:
        check_layer(layer, obj)

    run()


def test_the_current_layer_is_sent_unchanged() -> None:
    user = types.User(id=5, first_name="A", access_hash=1)
    assert downgrade(user, LAYER) is user
