"""An InputPeer where the schema asks for an InputUser or InputChannel reads as the declared type
(Telegram accepts it and Pyrogram-family clients send it), and nowhere else."""

from __future__ import annotations

from typing import Any

import pytest

from telesrv.tl import DecodeError, TLObject, codegen, decode, functions, types
from telesrv.tl.codegen import layer as codegen_layer
from telesrv.tl.parser import parse_schema


def as_sent(peer: TLObject) -> Any:
    """``peer`` where the schema asks for another type, as those clients write it: the
    writer takes any object, the constructors' annotations name the declared type."""
    return peer


def test_get_users_with_resolved_peers_reads_input_users() -> None:
    request = functions.users.GetUsers(
        id=[
            as_sent(types.InputPeerUser(user_id=1000001, access_hash=-5)),
            as_sent(types.InputPeerSelf()),
            as_sent(
                types.InputPeerUserFromMessage(
                    peer=types.InputPeerUser(user_id=3, access_hash=4), msg_id=9, user_id=7
                )
            ),
        ]
    )
    # Pinned so that a writer change cannot make this test pass vacuously.
    assert request.to_bytes().hex() == (
        "48a5910d15c4b51c03000000"
        "4ca5e8dd41420f0000000000fbffffffffffffff"
        "c97ea07d"
        "1c0a7ba84ca5e8dd03000000000000000400000000000000090000000700000000000000"
    )
    decoded = decode(request.to_bytes())
    assert decoded == functions.users.GetUsers(
        id=[
            types.InputUser(user_id=1000001, access_hash=-5),
            types.InputUserSelf(),
            types.InputUserFromMessage(
                peer=types.InputPeerUser(user_id=3, access_hash=4), msg_id=9, user_id=7
            ),
        ]
    )


def test_get_full_user_with_a_peer() -> None:
    decoded = decode(functions.users.GetFullUser(id=as_sent(types.InputPeerSelf())).to_bytes())
    assert decoded == functions.users.GetFullUser(id=types.InputUserSelf())


def test_input_channel_accepts_a_channel_peer() -> None:
    raw = functions.channels.GetChannels(
        id=[as_sent(types.InputPeerChannel(channel_id=11, access_hash=12))]
    ).to_bytes()
    assert decode(raw) == functions.channels.GetChannels(
        id=[types.InputChannel(channel_id=11, access_hash=12)]
    )


def test_peers_stay_peers_where_the_schema_asks_for_a_peer() -> None:
    request = functions.messages.GetHistory(
        peer=types.InputPeerUser(user_id=5, access_hash=6),
        offset_id=0,
        offset_date=0,
        add_offset=0,
        limit=10,
        max_id=0,
        min_id=0,
        hash=0,
    )
    assert decode(request.to_bytes()) == request
    assert decode(types.InputPeerSelf().to_bytes()) == types.InputPeerSelf()


def test_other_peer_kinds_are_still_rejected_as_users() -> None:
    raw = functions.users.GetUsers(id=[as_sent(types.InputPeerChat(chat_id=5))]).to_bytes()
    with pytest.raises(DecodeError):
        decode(raw)
    raw = functions.users.GetUsers(
        id=[as_sent(types.InputPeerChannel(channel_id=5, access_hash=1))]
    ).to_bytes()
    with pytest.raises(DecodeError):
        decode(raw)


def test_an_alias_between_different_layouts_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = (
        "inputPeerUser#11 user_id:long access_hash:long = InputPeer;\n"
        "inputUser#22 user_id:long = InputUser;\n"
    )
    monkeypatch.setattr(
        codegen_layer, "LENIENT_ALIASES", {"InputUser": {"inputPeerUser": "inputUser"}}
    )
    with pytest.raises(SystemExit, match="fields differ"):
        codegen.Generator(parse_schema(schema, "api"), 1).layer_module()
