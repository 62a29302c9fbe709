"""messages.sendMessage limits, and explicit errors for the options not implemented,
through Telethon."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from telethon import functions, types
from telethon.errors import RPCError

from .conftest import ClientFactory
from .test_messages import peer_of, sign_in

_random = itertools.count(9_000_000)


async def send(client: Any, peer: Any, text: str = "x", **kw: Any) -> Any:
    return await client(
        functions.messages.SendMessageRequest(
            peer=peer, message=text, random_id=next(_random), **kw
        )
    )


_GENERIC = {"RPCError", "BadRequestError", "ForbiddenError", "UnauthorizedError", "FloodError"}


async def error_of(coro: Any) -> str:
    """The error's wire name. Telethon turns names it knows into classes
    (QuoteTextInvalidError) and keeps the name as the message only for others."""
    with pytest.raises(RPCError) as info:
        await coro
    name = type(info.value).__name__
    if name in _GENERIC:
        return str(info.value.message)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name.removesuffix("Error")).upper()


async def test_send_limits_at_and_past(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)

    await send(alice, peer, "a" * 4096)
    assert await error_of(send(alice, peer, "a" * 4097)) == "MESSAGE_TOO_LONG"
    assert await error_of(send(alice, peer, "   ")) == "MESSAGE_EMPTY"

    target = (await send(alice, peer, "q" * 2000)).updates[0].id
    ok = types.InputReplyToMessage(
        reply_to_msg_id=target, quote_text="q" * 1024, quote_offset=10**6
    )
    answer = await send(alice, peer, "quoting", reply_to=ok)
    header = answer.updates[1].message.reply_to
    assert header.quote_text == "q" * 1024 and header.quote_offset == 4096  # clamped
    too_long = types.InputReplyToMessage(reply_to_msg_id=target, quote_text="q" * 1025)
    assert await error_of(send(alice, peer, "x", reply_to=too_long)) == "QUOTE_TEXT_INVALID"

    bold = types.MessageEntityBold(offset=0, length=5)
    await send(alice, peer, "hello", entities=[bold])
    past = types.MessageEntityBold(offset=0, length=6)
    assert await error_of(send(alice, peer, "hello", entities=[past])) == "ENTITY_BOUNDS_INVALID"


async def test_out_of_scope_options_get_the_seeds_errors(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    markup = types.ReplyKeyboardHide()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"schedule_date": 2_000_000_000}, "SCHEDULE_DATE_INVALID"),
        ({"reply_markup": markup}, "REPLY_MARKUP_INVALID"),
        ({"effect": 5}, "EFFECT_ID_INVALID"),
        ({"allow_paid_stars": 1}, "PAYMENT_UNSUPPORTED"),
        ({"send_as": types.InputPeerSelf()}, "SEND_AS_PEER_INVALID"),
        (
            {"quick_reply_shortcut": types.InputQuickReplyShortcutId(shortcut_id=1)},
            "SHORTCUT_INVALID",
        ),
        (
            {"reply_to": types.InputReplyToStory(peer=types.InputPeerSelf(), story_id=1)},
            "STORY_ID_INVALID",
        ),
        (
            {"reply_to": types.InputReplyToMonoForum(monoforum_peer_id=types.InputPeerSelf())},
            "REPLY_TO_MONOFORUM_PEER_INVALID",
        ),
        (
            {"reply_to": types.InputReplyToMessage(reply_to_msg_id=999_999)},
            "REPLY_MESSAGE_ID_INVALID",
        ),
        (
            {"reply_to": types.InputReplyToMessage(reply_to_msg_id=1, poll_option=b"1")},
            "POLL_OPTION_INVALID",
        ),
    ]
    for options, expected in cases:
        assert await error_of(send(alice, peer, "x", **options)) == expected, options
    forged = types.InputPeerUser(user_id=peer.user_id, access_hash=peer.access_hash ^ 1)
    assert await error_of(send(alice, forged, "x")) == "PEER_ID_INVALID"


async def test_reply_to_message_zero_means_no_reply(make_client: ClientFactory) -> None:
    # pyrotgfork sends InputReplyToMessage(reply_to_msg_id=0) with every message.
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    result = await send(alice, peer, "plain", reply_to=types.InputReplyToMessage(reply_to_msg_id=0))
    (sent,) = [u.message for u in result.updates if hasattr(u, "message")]
    assert sent.message == "plain" and sent.reply_to is None
    zero_with_quote = types.InputReplyToMessage(reply_to_msg_id=0, quote_text="p")
    assert await error_of(send(alice, peer, "x", reply_to=zero_with_quote)) == (
        "REPLY_MESSAGE_ID_INVALID"
    )


async def test_a_refused_reply_takes_no_pts(make_client: ClientFactory) -> None:
    # A reply to a message outside the chat is refused before anything is taken: no
    # noop in either log, so neither side's pts moves (and no device wakes for it).
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    bob_peer = await peer_of(bob, alice)
    await send(alice, peer, "first")
    theirs = (await send(bob, bob_peer, "in bob's ids")).updates[0].id
    before = [(await c(functions.updates.GetStateRequest())).pts for c in (alice, bob)]
    for reply_to in (999_999, theirs + 1000):
        refused = send(alice, peer, "x", reply_to=types.InputReplyToMessage(reply_to))
        assert await error_of(refused) == "REPLY_MESSAGE_ID_INVALID"
    after = [(await c(functions.updates.GetStateRequest())).pts for c in (alice, bob)]
    assert after == before
    # A valid reply still goes through, and takes exactly one pts on each side.
    answer = await send(alice, peer, "reply", reply_to=types.InputReplyToMessage(1))
    assert answer.updates[1].message.reply_to.reply_to_msg_id == 1
    final = [(await c(functions.updates.GetStateRequest())).pts for c in (alice, bob)]
    assert final == [before[0] + 1, before[1] + 1]


async def test_save_default_send_as_is_refused_for_private_chats(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    for send_as in (types.InputPeerSelf(), peer):
        request = functions.messages.SaveDefaultSendAsRequest(peer=peer, send_as=send_as)
        assert await error_of(alice(request)) == "SEND_AS_PEER_INVALID"
    forged = types.InputPeerUser(user_id=peer.user_id, access_hash=peer.access_hash ^ 1)
    request = functions.messages.SaveDefaultSendAsRequest(peer=forged, send_as=peer)
    assert await error_of(alice(request)) == "PEER_ID_INVALID"
