"""Conversions written by hand, where a constructor's meaning changed between layers
rather than its fields: matching fields by name would send such a layer the wrong
thing or nothing. Each is named for the change and tested in tests/tl."""

from __future__ import annotations

from typing import Any

from telesrv.tl._generated import layer as _layer
from telesrv.tl.core import TLObject
from telesrv.tl.layers.downgrade import ADAPTERS, DROP, Downgrader


def user_full_with_user(d: Downgrader, obj: TLObject) -> Any:
    """``users.userFull`` before it existed (layer 133): ``users.getFullUser`` answered
    the bare ``userFull``, which held the ``user`` itself instead of its id."""
    if d.has("users.userFull") or d.old_field_type("userFull", "user") != "User":
        return NotImplemented
    assert isinstance(obj, _layer.users_UserFull)
    full = obj.full_user
    user_id = getattr(full, "id", None)
    user = next((u for u in obj.users if getattr(u, "id", None) == user_id), None)
    if user is None:
        return DROP  # nothing to fill the required user with
    return d.build_old("userFull", full, {"user": user})


def _emoticon(reaction: Any) -> str | None:
    return reaction.emoticon if isinstance(reaction, _layer.ReactionEmoji) else None


def reaction_count_as_emoticon(d: Downgrader, obj: TLObject) -> Any:
    """A reaction was an emoticon string before it became ``Reaction`` (layer 145), and
    "chosen" a flag before it was the order of choosing: custom emoji and paid
    reactions have no form there and are left out."""
    if d.old_field_type("reactionCount", "reaction") != "string":
        return NotImplemented
    assert isinstance(obj, _layer.ReactionCount)
    emoticon = _emoticon(obj.reaction)
    if emoticon is None:
        return DROP
    return d.build_old(
        "reactionCount", obj, {"reaction": emoticon, "chosen": obj.chosen_order is not None}
    )


def peer_reaction_as_emoticon(d: Downgrader, obj: TLObject) -> Any:
    """Who reacted with what, while a reaction was an emoticon string (see above)."""
    if d.old_field_type("messagePeerReaction", "reaction") != "string":
        return NotImplemented
    assert isinstance(obj, _layer.MessagePeerReaction)
    emoticon = _emoticon(obj.reaction)
    if emoticon is None:
        return DROP
    return d.build_old("messagePeerReaction", obj, {"reaction": emoticon})


def _color_fields(color: Any) -> dict[str, Any]:
    if isinstance(color, _layer.PeerColor):
        return {"color": color.color, "background_emoji_id": color.background_emoji_id}
    if isinstance(color, _layer.PeerColorCollectible):
        return {"color": color.accent_color, "background_emoji_id": color.background_emoji_id}
    return {"color": None, "background_emoji_id": None}


def _peer_color_as_int(name: str) -> Any:
    def adapter(d: Downgrader, obj: TLObject) -> Any:
        """A name color was an int (and its emoji a field of its own) for a few layers
        (160 to 166) before it became ``PeerColor``."""
        if d.old_field_type(name, "color") != "int":
            return NotImplemented
        return d.build_old(name, obj, _color_fields(getattr(obj, "color", None)))

    adapter.__name__ = f"{name}_color_as_int"
    return adapter


ADAPTERS.update(
    {
        "users.userFull": user_full_with_user,
        "reactionCount": reaction_count_as_emoticon,
        "messagePeerReaction": peer_reaction_as_emoticon,
        "user": _peer_color_as_int("user"),
        "channel": _peer_color_as_int("channel"),
    }
)


def peer_settings_bare(d: Downgrader, obj: TLObject) -> Any:
    """``messages.getPeerSettings`` answered the bare ``peerSettings`` before the answer
    carried the users it mentions (layer 135)."""
    if d.has("messages.peerSettings"):
        return NotImplemented
    assert isinstance(obj, _layer.messages_PeerSettings)
    return d.convert_value(obj.settings)


ADAPTERS["messages.peerSettings"] = peer_settings_bare
