"""Reactions in a private chat with unmodified Telethon: a reaction reaches the author
live (no getDifference), counts as an unread reaction of the author's dialog until
readReactions, renders in history on both sides, and reaches an offline device of the
author through getDifference; every named error."""

from __future__ import annotations

from typing import Any

import pytest
from telethon import TelegramClient, errors, functions, types

from .conftest import ClientFactory
from .test_chat_list import error_of, next_update
from .test_state_updates import collect, count_get_difference, sign_in


def like(emoticon: str = "👍") -> list[types.TypeReaction]:
    return [types.ReactionEmoji(emoticon=emoticon)]


async def pair(make_client: ClientFactory) -> tuple[Any, ...]:
    """Alice (phone, and a tablet receiving updates) and Bob, with a message from Alice."""
    alice = await sign_in(make_client, updates=False)
    me = await alice.get_me()
    tablet = await sign_in(make_client, "+" + me.phone)
    bob = await sign_in(make_client, updates=False)
    await alice(functions.account.UpdateUsernameRequest(f"react{me.id}"))
    alice_in_bob = await bob.get_input_entity(f"react{me.id}")
    await bob.send_message(alice_in_bob, "hello")
    await alice.get_dialogs()
    bob_id = (await bob.get_me()).id
    bob_in = await alice.get_input_entity(bob_id)
    sent = await alice.send_message(bob_in, "react to me")
    [bobs_copy] = await bob.get_messages(alice_in_bob, limit=1)
    assert bobs_copy.message == "react to me"
    return alice, tablet, bob, me.id, bob_id, bob_in, alice_in_bob, sent.id, bobs_copy.id


async def dialog_with(client: TelegramClient, peer: Any) -> Any:
    answer = await client(
        functions.messages.GetPeerDialogsRequest(peers=[types.InputDialogPeer(peer=peer)])
    )
    [dialog] = answer.dialogs
    return dialog


async def test_a_reaction_reaches_the_author_live_and_is_read(make_client: ClientFactory) -> None:
    alice, tablet, bob, alice_id, bob_id, bob_in, alice_in_bob, mine, theirs = await pair(
        make_client
    )
    await tablet.get_dialogs()
    tablet_bob = await tablet.get_input_entity(bob_id)
    diffs = count_get_difference(tablet)
    seen = collect(tablet, types.UpdateMessageReactions)

    answer = await bob(
        functions.messages.SendReactionRequest(peer=alice_in_bob, msg_id=theirs, reaction=like())
    )
    [own] = answer.updates
    assert isinstance(own, types.UpdateMessageReactions) and own.msg_id == theirs
    [count] = own.reactions.results
    assert count.count == 1 and count.chosen_order == 0
    [recent] = own.reactions.recent_reactions
    assert recent.my and not recent.unread and recent.peer_id == types.PeerUser(bob_id)

    live = await next_update(seen, types.UpdateMessageReactions)
    assert live.msg_id == mine and live.peer == types.PeerUser(bob_id)
    [count] = live.reactions.results
    assert count.reaction == types.ReactionEmoji("👍") and count.chosen_order is None
    [recent] = live.reactions.recent_reactions
    assert recent.unread and not recent.my
    assert diffs[0] == 0

    assert (await dialog_with(tablet, tablet_bob)).unread_reactions_count == 1
    listing = await tablet(_all_dialogs())
    listed = {d.peer.user_id: d for d in listing.dialogs}
    assert listed[bob_id].unread_reactions_count == 1
    top = {m.id: m for m in listing.messages}[listed[bob_id].top_message]
    assert top.id == mine and top.reactions.results[0].count == 1  # the top message too
    # Reading the chat's history does not read its reactions.
    await alice(functions.messages.ReadHistoryRequest(peer=bob_in, max_id=0))
    assert (await dialog_with(alice, bob_in)).unread_reactions_count == 1
    unread = await alice(
        functions.messages.GetUnreadReactionsRequest(
            peer=bob_in, offset_id=0, add_offset=0, limit=10, max_id=0, min_id=0
        )
    )
    assert [m.id for m in unread.messages] == [mine]

    # Both sides see the reaction in their history.
    [in_alices] = await alice.get_messages(bob_in, ids=[mine])
    assert in_alices.reactions.results[0].count == 1
    assert in_alices.reactions.recent_reactions[0].unread
    [in_bobs] = await bob.get_messages(alice_in_bob, ids=[theirs])
    assert in_bobs.reactions.results[0].chosen_order == 0

    affected = await alice(functions.messages.ReadReactionsRequest(peer=bob_in))
    assert affected.pts_count == 0 and affected.offset == 0
    read = await next_update(seen, types.UpdateMessageReactions)
    assert read.msg_id == mine and not read.reactions.recent_reactions[0].unread
    assert (await dialog_with(tablet, tablet_bob)).unread_reactions_count == 0
    unread = await alice(
        functions.messages.GetUnreadReactionsRequest(
            peer=bob_in, offset_id=0, add_offset=0, limit=10, max_id=0, min_id=0
        )
    )
    assert unread.messages == []

    # Taking the reaction back empties it on the author's devices.
    await bob(functions.messages.SendReactionRequest(peer=alice_in_bob, msg_id=theirs))
    gone = await next_update(seen, types.UpdateMessageReactions)
    assert gone.msg_id == mine and gone.reactions.results == []
    [in_alices] = await alice.get_messages(bob_in, ids=[mine])
    assert in_alices.reactions is None
    assert diffs[0] == 0


def _all_dialogs() -> Any:
    return functions.messages.GetDialogsRequest(
        offset_date=None, offset_id=0, offset_peer=types.InputPeerEmpty(), limit=100, hash=0
    )


async def test_an_offline_device_gets_the_reaction_through_get_difference(
    make_client: ClientFactory,
) -> None:
    alice, tablet, bob, alice_id, bob_id, bob_in, alice_in_bob, mine, theirs = await pair(
        make_client
    )
    before = await tablet(functions.updates.GetStateRequest())
    await tablet.disconnect()
    await bob(
        functions.messages.SendReactionRequest(
            peer=alice_in_bob, msg_id=theirs, reaction=like("🔥"), big=True
        )
    )
    # A message that arrives while the tablet is away, and Alice's reaction to it from
    # her phone: the tablet gets the message already carrying the reaction.
    fresh = await bob.send_message(alice_in_bob, "new")
    [incoming] = await alice.get_messages(bob_in, limit=1)
    await alice(
        functions.messages.SendReactionRequest(peer=bob_in, msg_id=incoming.id, reaction=like())
    )
    await tablet.connect()
    diff = await tablet(
        functions.updates.GetDifferenceRequest(pts=before.pts, date=before.date, qts=0)
    )
    assert isinstance(diff, types.updates.Difference)
    assert diff.state.pts == before.pts + 1  # the new message's; reactions took none
    [message] = diff.new_messages
    assert message.id == incoming.id and message.message == fresh.message
    [mine_on_it] = message.reactions.recent_reactions
    assert mine_on_it.my and message.reactions.results[0].chosen_order == 0
    updates = [u for u in diff.other_updates if isinstance(u, types.UpdateMessageReactions)]
    assert [u.msg_id for u in updates] == [mine, incoming.id]
    update = updates[0]
    [recent] = update.reactions.recent_reactions
    assert recent.big and recent.unread and recent.reaction == types.ReactionEmoji("🔥")
    assert bob_id in {u.id for u in diff.users}


async def test_reaction_methods_and_errors(make_client: ClientFactory) -> None:
    alice, tablet, bob, alice_id, bob_id, bob_in, alice_in_bob, mine, theirs = await pair(
        make_client
    )
    send = functions.messages.SendReactionRequest
    assert await error_of(bob(send(peer=alice_in_bob, msg_id=theirs, reaction=like("🦖")))) == (
        "ReactionInvalidError"
    )
    custom = [types.ReactionCustomEmoji(document_id=1)]
    assert await error_of(bob(send(peer=alice_in_bob, msg_id=theirs, reaction=custom))) == (
        "ReactionInvalidError"
    )
    paid = [types.ReactionPaid()]
    assert await error_of(bob(send(peer=alice_in_bob, msg_id=theirs, reaction=paid))) == (
        "ReactionInvalidError"
    )
    two = like("👍") + like("🔥")  # one reaction per user is the limit without Premium
    with pytest.raises(errors.PremiumAccountRequiredError):
        await bob(send(peer=alice_in_bob, msg_id=theirs, reaction=two))
    assert await error_of(bob(send(peer=alice_in_bob, msg_id=theirs + 1000, reaction=like()))) == (
        "MessageIdInvalidError"
    )
    # At the limit: one reaction each, both listed.
    await bob(send(peer=alice_in_bob, msg_id=theirs, reaction=like("👍")))
    await alice(send(peer=bob_in, msg_id=mine, reaction=like("👍")))
    got = await alice(functions.messages.GetMessagesReactionsRequest(peer=bob_in, id=[mine]))
    [update] = got.updates
    [count] = update.reactions.results
    assert count.count == 2 and count.chosen_order == 0
    listing = functions.messages.GetMessageReactionsListRequest
    first = await alice(listing(peer=bob_in, id=mine, limit=1))
    assert first.count == 2 and len(first.reactions) == 1 and first.next_offset
    rest = await alice(listing(peer=bob_in, id=mine, limit=100, offset=first.next_offset))
    assert len(rest.reactions) == 1 and rest.next_offset is None
    who = {r.peer_id.user_id for r in first.reactions + rest.reactions}
    assert who == {alice_id, bob_id}
    assert await error_of(alice(listing(peer=bob_in, id=mine, limit=101))) == "LimitInvalidError"
    assert await error_of(alice(listing(peer=bob_in, id=mine, limit=0))) == "LimitInvalidError"
    assert await error_of(alice(listing(peer=bob_in, id=mine + 1000, limit=10))) == (
        "MessageIdInvalidError"
    )
    many = list(range(1, 102))
    assert await error_of(
        alice(functions.messages.GetMessagesReactionsRequest(peer=bob_in, id=many))
    ) == ("LimitInvalidError")
    assert (
        len(
            (
                await alice(
                    functions.messages.GetMessagesReactionsRequest(peer=bob_in, id=many[:100])
                )
            ).updates
        )
        <= 100
    )

    available = await alice(functions.messages.GetAvailableReactionsRequest(hash=0))
    assert "👍" in [r.reaction for r in available.reactions]
    # Each reaction names a real icon document, which anyone may download.
    thumbs_up = next(r for r in available.reactions if r.reaction == "👍")
    icon = thumbs_up.static_icon
    assert isinstance(icon, types.Document) and icon.mime_type == "image/webp"
    assert thumbs_up.select_animation == icon and thumbs_up.around_animation is None
    data = await bob.download_media(icon, file=bytes)
    assert len(data) == icon.size and data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    location = types.InputDocumentFileLocation(
        id=icon.id, access_hash=icon.access_hash, file_reference=icon.file_reference, thumb_size=""
    )
    part = await bob(functions.upload.GetFileRequest(location=location, offset=0, limit=4096))
    assert part.bytes == data[:4096]
    whole = await bob(functions.upload.GetFileRequest(location=location, offset=0, limit=65536))
    assert whole.bytes == data
    assert await error_of(
        bob(
            functions.upload.GetFileRequest(
                location=types.InputDocumentFileLocation(
                    id=icon.id, access_hash=icon.access_hash ^ 1, file_reference=b"x", thumb_size=""
                ),
                offset=0,
                limit=4096,
            )
        )
    ) == ("FileIdInvalidError")
    assert await error_of(
        bob(
            functions.upload.GetFileRequest(
                location=types.InputDocumentFileLocation(
                    id=icon.id,
                    access_hash=icon.access_hash,
                    file_reference=icon.file_reference,
                    thumb_size="m",
                ),
                offset=0,
                limit=4096,
            )
        )
    ) == ("LocationInvalidError")
    # An icon is shown by apps, never put in a message.
    assert await error_of(
        bob.send_file(
            alice_in_bob,
            types.InputDocument(
                id=icon.id, access_hash=icon.access_hash, file_reference=icon.file_reference
            ),
        )
    ) == ("MediaInvalidError")
    again = await alice(functions.messages.GetAvailableReactionsRequest(hash=available.hash))
    assert isinstance(again, types.messages.AvailableReactionsNotModified)
    assert await alice(functions.messages.SetDefaultReactionRequest(like("🔥")[0]))
    assert await error_of(
        alice(functions.messages.SetDefaultReactionRequest(types.ReactionEmoji("🦖")))
    ) == ("ReactionInvalidError")
    config = await alice(functions.help.GetConfigRequest())
    assert config.reactions_default == types.ReactionEmoji("🔥")
    app = await alice(functions.help.GetAppConfigRequest(hash=0))
    keys = {v.key: v.value for v in app.config.value}
    assert keys["reactions_user_max_default"].value == 1
    for name in ("dialogs_pinned_limit", "dialog_filters_limit", "dialog_filters_chats_limit"):
        assert keys[f"{name}_default"].value == keys[f"{name}_premium"].value > 0


async def test_reactions_across_a_block(make_client: ClientFactory) -> None:
    alice, tablet, bob, alice_id, bob_id, bob_in, alice_in_bob, mine, theirs = await pair(
        make_client
    )
    send = functions.messages.SendReactionRequest
    seen = collect(tablet, types.UpdateMessageReactions)
    await alice(functions.contacts.BlockRequest(id=bob_in))
    # The blocker may not react, as they may not write.
    with pytest.raises(errors.YouBlockedUserError):
        await alice(send(peer=bob_in, msg_id=mine, reaction=like()))
    # The blocked user's reaction is accepted and shown to them alone.
    await bob(send(peer=alice_in_bob, msg_id=theirs, reaction=like("🔥")))
    [in_bobs] = await bob.get_messages(alice_in_bob, ids=[theirs])
    assert in_bobs.reactions.results[0].reaction.emoticon == "🔥"
    [in_alices] = await alice.get_messages(bob_in, ids=[mine])
    assert in_alices.reactions is None
    assert (await dialog_with(alice, bob_in)).unread_reactions_count == 0
    listed = await alice(
        functions.messages.GetMessageReactionsListRequest(peer=bob_in, id=mine, limit=10)
    )
    assert listed.count == 0 and listed.reactions == []
    # After the unblock a new reaction arrives, and it is the first Alice's devices hear of.
    await alice(functions.contacts.UnblockRequest(id=bob_in))
    await bob(send(peer=alice_in_bob, msg_id=theirs, reaction=like("👍")))
    update = await next_update(seen, types.UpdateMessageReactions)
    assert update.msg_id == mine
    assert [c.reaction.emoticon for c in update.reactions.results] == ["👍"]


async def test_recent_reactions(make_client: ClientFactory) -> None:
    alice, _, bob, _, _, bob_in, alice_in_bob, mine, theirs = await pair(make_client)
    send = functions.messages.SendReactionRequest
    await alice(send(peer=bob_in, msg_id=mine, reaction=like("🔥"), add_to_recent=True))
    await alice(send(peer=bob_in, msg_id=mine, reaction=like("🎉"), add_to_recent=True))
    await alice(send(peer=bob_in, msg_id=mine, reaction=like("👍")))  # not remembered
    recent = await alice(functions.messages.GetRecentReactionsRequest(limit=10, hash=0))
    assert [r.emoticon for r in recent.reactions] == ["🎉", "🔥"]
    same = await alice(functions.messages.GetRecentReactionsRequest(limit=10, hash=recent.hash))
    assert isinstance(same, types.messages.ReactionsNotModified)
    assert await alice(functions.messages.ClearRecentReactionsRequest())
    cleared = await alice(functions.messages.GetRecentReactionsRequest(limit=10, hash=0))
    assert cleared.reactions == []
    assert (
        await bob(functions.messages.GetRecentReactionsRequest(limit=10, hash=0))
    ).reactions == []
