"""The hand-written layer adapters, each on the layers whose meaning differs, checked
by parsing what goes out with that layer's own schema."""

from __future__ import annotations

from typing import Any

import pytest

from telesrv.tl import DecodeError, TLObject, decode, functions, types
from telesrv.tl.layers import adapters, downgrade
from telesrv.tl.layers.downgrade import ADAPTERS, downgrader

from .schema_reader import SchemaReader, write_old


def sent(obj: TLObject, layer: int) -> Any:
    return SchemaReader.for_layer(layer).read(downgrade(obj, layer).to_bytes())


def user(uid: int = 5, **kw: Any) -> types.User:
    return types.User(id=uid, access_hash=77, first_name="Ann", **kw)


def test_every_adapter_is_named_for_its_change() -> None:
    assert {name: fn.__name__ for name, fn in ADAPTERS.items()} == {
        "users.userFull": "user_full_with_user",
        "reactionCount": "reaction_count_as_emoticon",
        "messagePeerReaction": "peer_reaction_as_emoticon",
        "user": "user_color_as_int",
        "channel": "channel_color_as_int",
        "messages.peerSettings": "peer_settings_bare",
    }
    assert adapters.user_full_with_user.__doc__


# -- users.userFull before it existed ------------------------------------------------


def full_user() -> types.users.UserFull:
    return types.users.UserFull(
        full_user=types.UserFull(
            id=5,
            about="hello",
            settings=types.PeerSettings(),
            notify_settings=types.PeerNotifySettings(),
            common_chats_count=2,
            blocked=True,
        ),
        chats=[],
        users=[user(9), user(5)],
    )


@pytest.mark.parametrize("layer", [133, 134])
def test_user_full_holds_the_user_before_users_user_full(layer: int) -> None:
    out = sent(full_user(), layer)
    assert out["_"] == "userFull"
    assert out["user"]["_"] == "user" and out["user"]["id"] == 5  # the right one of two
    assert (out["about"], out["common_chats_count"], out["blocked"]) == ("hello", 2, True)


@pytest.mark.parametrize("layer", [135, 198, 213])
def test_user_full_keeps_its_wrapper_from_135(layer: int) -> None:
    out = sent(full_user(), layer)
    assert out["_"] == "users.userFull"
    assert out["full_user"]["id"] == 5 and [u["id"] for u in out["users"]] == [9, 5]


def test_user_full_without_its_user_has_no_form_at_133() -> None:
    obj = full_user()
    obj.users = [user(9)]
    with pytest.raises(ValueError):
        downgrade(obj, 133)


# -- reactions as emoticon strings ---------------------------------------------------


def reactions() -> types.MessageReactions:
    return types.MessageReactions(
        results=[
            types.ReactionCount(reaction=types.ReactionEmoji(emoticon="👍"), count=2),
            types.ReactionCount(
                reaction=types.ReactionCustomEmoji(document_id=1), count=1, chosen_order=1
            ),
            types.ReactionCount(
                reaction=types.ReactionEmoji(emoticon="❤"), count=1, chosen_order=0
            ),
        ],
        recent_reactions=[
            types.MessagePeerReaction(
                peer_id=types.PeerUser(user_id=5),
                date=1_700_000_000,
                reaction=types.ReactionEmoji(emoticon="❤"),
                unread=True,
            ),
            types.MessagePeerReaction(
                peer_id=types.PeerUser(user_id=6),
                date=1_700_000_000,
                reaction=types.ReactionCustomEmoji(document_id=1),
            ),
        ],
    )


@pytest.mark.parametrize("layer", [138, 140, 144])
def test_reactions_are_emoticons_before_145(layer: int) -> None:
    out = sent(reactions(), layer)
    counts = [(r["reaction"], r["count"], r["chosen"]) for r in out["results"]]
    assert counts == [("👍", 2, False), ("❤", 1, True)]  # the custom emoji left out
    recent = [
        (r["peer_id"]["user_id"], r["reaction"], r["unread"]) for r in out["recent_reactions"]
    ]
    assert recent == [(5, "❤", True)]


def test_reactions_are_objects_from_145() -> None:
    out = sent(reactions(), 145)
    assert [r["reaction"]["_"] for r in out["results"]] == [
        "reactionEmoji",
        "reactionCustomEmoji",
        "reactionEmoji",
    ]
    assert out["results"][2]["chosen_order"] == 0


# -- name colors as ints -------------------------------------------------------------


@pytest.mark.parametrize(
    ("color", "expected"),
    [
        (types.PeerColor(color=3, background_emoji_id=77), (3, 77)),
        (types.PeerColor(color=4), (4, None)),
        (
            types.PeerColorCollectible(
                collectible_id=1,
                gift_emoji_id=2,
                background_emoji_id=88,
                accent_color=6,
                colors=[1],
            ),
            (6, 88),
        ),
    ],
)
def test_user_color_is_an_int_at_166(color: TLObject, expected: tuple[int, int | None]) -> None:
    out = sent(user(color=color), 166)
    assert (out["color"], out["background_emoji_id"]) == expected


def test_channel_color_is_an_int_at_166() -> None:
    channel = types.Channel(
        id=3,
        title="news",
        photo=types.ChatPhotoEmpty(),
        date=1_700_000_000,
        color=types.PeerColor(color=2, background_emoji_id=9),
    )
    out = sent(channel, 166)
    assert (out["color"], out["background_emoji_id"]) == (2, 9)


@pytest.mark.parametrize("layer", [167, 213])
def test_user_color_is_an_object_from_167(layer: int) -> None:
    out = sent(user(color=types.PeerColor(color=3)), layer)
    assert out["color"] == {"_": "peerColor", "color": 3, "background_emoji_id": None}


# -- messages.peerSettings before it existed -----------------------------------------


@pytest.mark.parametrize("layer", [133, 134])
def test_peer_settings_are_bare_before_135(layer: int) -> None:
    obj = types.messages.PeerSettings(
        settings=types.PeerSettings(add_contact=True, block_contact=True), chats=[], users=[user()]
    )
    out = sent(obj, layer)
    assert out["_"] == "peerSettings"
    assert (out["add_contact"], out["block_contact"]) == (True, True)


# -- text that gained entities -------------------------------------------------------


def test_plain_text_goes_to_230_as_text_with_entities() -> None:
    full = types.UserFull(
        id=5,
        settings=types.PeerSettings(),
        notify_settings=types.PeerNotifySettings(),
        common_chats_count=0,
        bot_verification=types.BotVerification(bot_id=1, icon=2, description="verified"),
    )
    out = sent(full, 230)
    assert out["bot_verification"]["description"] == {
        "_": "textWithEntities",
        "text": "verified",
        "entities": [],
    }


# -- requests of layers whose fields changed meaning ----------------------------------


def peer() -> bytes:
    return types.InputPeerUser(user_id=42, access_hash=7).to_bytes()


@pytest.mark.parametrize("layer", [136, 140, 144])
def test_an_emoticon_reaction_request_becomes_a_reaction(layer: int) -> None:
    request = decode(
        write_old(layer, "messages.sendReaction", {"peer": peer(), "msg_id": 5, "reaction": "👍"})
    )
    assert isinstance(request, functions.messages.SendReaction)
    assert request.reaction == [types.ReactionEmoji(emoticon="👍")]
    taken_back = decode(write_old(layer, "messages.sendReaction", {"peer": peer(), "msg_id": 5}))
    assert isinstance(taken_back, functions.messages.SendReaction)
    assert taken_back.reaction is None


def test_an_emoticon_filter_of_the_reactions_list_becomes_a_reaction() -> None:
    request = decode(
        write_old(
            140,
            "messages.getMessageReactionsList",
            {"peer": peer(), "id": 5, "reaction": "❤", "limit": 50},
        )
    )
    assert isinstance(request, functions.messages.GetMessageReactionsList)
    assert request.reaction == types.ReactionEmoji(emoticon="❤")


@pytest.mark.parametrize(
    ("name", "sound"),
    [
        ("default", types.NotificationSoundDefault()),
        ("", types.NotificationSoundNone()),
        ("bell.mp3", types.NotificationSoundLocal(title="bell.mp3", data="bell.mp3")),
    ],
)
def test_a_sound_name_becomes_a_notification_sound(name: str, sound: TLObject) -> None:
    settings = write_old(133, "inputPeerNotifySettings", {"sound": name}, function=False)
    request = decode(
        write_old(
            133,
            "account.updateNotifySettings",
            {
                "peer": types.InputNotifyPeer(
                    peer=types.InputPeerUser(user_id=42, access_hash=7)
                ).to_bytes(),
                "settings": settings,
            },
        )
    )
    assert isinstance(request, functions.account.UpdateNotifySettings)
    assert request.settings.sound == sound


def test_a_field_retyped_without_an_adapter_is_refused() -> None:
    # account.updateColor took the color as an int at 166; read as PeerColor now, it
    # would be dropped without a word.
    with pytest.raises(DecodeError, match="color"):
        decode(write_old(166, "account.updateColor", {"color": 3}))


# -- updates a layer cannot parse --------------------------------------------------------


def test_an_update_with_pts_the_layer_lacks_keeps_its_pts() -> None:
    # Every pts-bearing update exists by name in every served layer, so this is the
    # rule for one whose required value has no form there: it keeps the sequence.
    update = types.UpdateNewMessage(
        message=types.MessageService(
            id=9,
            peer_id=types.PeerUser(user_id=5),
            date=1_700_000_000,
            action=types.MessageActionEmpty(),
        ),
        pts=41,
        pts_count=1,
    )
    converter = downgrader(133)
    assert converter is not None
    out = converter._fallback(update)
    assert out == types.UpdateDeleteMessages(messages=[], pts=41, pts_count=1)


def test_an_update_without_pts_the_layer_lacks_is_left_out() -> None:
    updates = types.Updates(
        updates=[
            types.UpdateMessageReactions(
                peer=types.PeerUser(user_id=5),
                msg_id=9,
                reactions=types.MessageReactions(results=[]),
            ),
            types.UpdateReadHistoryOutbox(
                peer=types.PeerUser(user_id=5), max_id=9, pts=42, pts_count=1
            ),
        ],
        users=[],
        chats=[],
        date=1_700_000_000,
        seq=0,
    )
    out = sent(updates, 133)  # 133 has no reactions at all
    assert [u["_"] for u in out["updates"]] == ["updateReadHistoryOutbox"]
