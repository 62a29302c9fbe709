"""People and pins with unmodified Telethon: Alice pins a message and Bob sees it pinned
(updatePinnedMessages live, the message pinned in history, found by the pinned filter,
named in getFullUser), Bob finds Alice by a prefix of her name, and acceptContact
shows Alice's phone to Bob."""

from __future__ import annotations

from typing import Any

from telethon import TelegramClient, functions, types

from .conftest import ClientFactory
from .test_chat_list import next_update
from .test_state_updates import collect, count_get_difference, sign_in


async def pair(make_client: ClientFactory) -> tuple[Any, ...]:
    """Alice and Bob (receiving updates), in a chat Bob started."""
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client)
    alice_id, bob_id = (await alice.get_me()).id, (await bob.get_me()).id
    await alice(functions.account.UpdateUsernameRequest(f"pins{alice_id}"))
    alice_in_bob = await bob.get_input_entity(f"pins{alice_id}")
    await bob.send_message(alice_in_bob, "hello")
    await alice.get_dialogs()
    bob_in = await alice.get_input_entity(bob_id)
    return alice, bob, alice_id, bob_id, bob_in, alice_in_bob


async def test_a_pin_reaches_the_pinners_other_device(make_client: ClientFactory) -> None:
    alice, bob, alice_id, bob_id, bob_in, alice_in_bob = await pair(make_client)
    sent = await alice.send_message(bob_in, "pin me too")
    tablet = await sign_in(make_client, "+" + (await alice.get_me()).phone)
    await tablet.get_dialogs()
    diffs = count_get_difference(tablet)
    seen = collect(tablet, types.UpdatePinnedMessages)

    await alice.pin_message(bob_in, sent.id, pm_oneside=True)

    live = await next_update(seen, types.UpdatePinnedMessages)
    assert live.pinned and live.peer == types.PeerUser(bob_id) and live.messages == [sent.id]
    assert diffs[0] == 0
    assert (await only_message(tablet, bob_id)).pinned
    assert not (await only_message(bob, alice_in_bob)).pinned  # one side only


async def only_message(client: TelegramClient, peer: Any) -> Any:
    [message] = await client.get_messages(peer, limit=1)
    return message


async def test_alice_pins_a_message_and_bob_sees_it_pinned(make_client: ClientFactory) -> None:
    alice, bob, alice_id, bob_id, bob_in, alice_in_bob = await pair(make_client)
    sent = await alice.send_message(bob_in, "pin me")
    bobs_copy = await only_message(bob, alice_in_bob)
    assert bobs_copy.message == "pin me" and not bobs_copy.pinned
    diffs = count_get_difference(bob)
    seen = collect(bob, types.UpdatePinnedMessages)

    await alice.pin_message(bob_in, sent.id, notify=True)

    live = await next_update(seen, types.UpdatePinnedMessages)
    assert live.pinned and live.peer == types.PeerUser(alice_id)
    assert live.messages == [bobs_copy.id] and live.pts_count == 1
    assert diffs[0] == 0  # pushed in order: no gap for Bob's client to fetch
    assert (await only_message(bob, alice_in_bob)).pinned
    assert (await only_message(alice, bob_in)).pinned
    found = await bob.get_messages(alice_in_bob, filter=types.InputMessagesFilterPinned(), limit=10)
    assert [m.id for m in found] == [bobs_copy.id]
    full = await bob(functions.users.GetFullUserRequest(alice_in_bob))
    assert full.full_user.pinned_msg_id == bobs_copy.id

    await alice.unpin_message(bob_in, sent.id)
    unpinned = await next_update(seen, types.UpdatePinnedMessages)
    assert not unpinned.pinned and unpinned.messages == [bobs_copy.id]
    assert not (await only_message(bob, alice_in_bob)).pinned
    assert (
        await bob.get_messages(alice_in_bob, filter=types.InputMessagesFilterPinned(), limit=10)
        == []
    )
    full = await bob(functions.users.GetFullUserRequest(alice_in_bob))
    assert full.full_user.pinned_msg_id is None
    assert diffs[0] == 0


async def test_a_pin_for_one_side_and_unpin_all(make_client: ClientFactory) -> None:
    alice, bob, alice_id, bob_id, bob_in, alice_in_bob = await pair(make_client)
    first = await alice.send_message(bob_in, "one")
    second = await alice.send_message(bob_in, "two")
    # Collected from before the pins: the push of the second one may come after Bob's
    # own read below, and must not be taken for the unpin's.
    seen = collect(bob, types.UpdatePinnedMessages)
    await alice.pin_message(bob_in, first.id, pm_oneside=True)
    await alice.pin_message(bob_in, second.id)
    mine = await alice.get_messages(bob_in, filter=types.InputMessagesFilterPinned(), limit=10)
    assert [m.id for m in mine] == [second.id, first.id]
    theirs = await bob.get_messages(
        alice_in_bob, filter=types.InputMessagesFilterPinned(), limit=10
    )
    assert [m.message for m in theirs] == ["two"]
    shared = await next_update(seen, types.UpdatePinnedMessages)  # the one-sided pin: none
    assert shared.pinned and shared.messages == [theirs[0].id]

    await alice.unpin_message(bob_in)  # every pinned message of the chat
    gone = await next_update(seen, types.UpdatePinnedMessages)
    assert not gone.pinned and gone.messages == [theirs[0].id]
    assert (
        await alice.get_messages(bob_in, filter=types.InputMessagesFilterPinned(), limit=10) == []
    )
    assert (
        await bob.get_messages(alice_in_bob, filter=types.InputMessagesFilterPinned(), limit=10)
        == []
    )


async def test_bob_finds_alice_by_a_prefix_of_her_name(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    await alice(
        functions.account.UpdateProfileRequest(first_name="Alicia", last_name="Quillfeather")
    )
    alice_id = (await alice.get_me()).id
    bob = await sign_in(make_client, updates=False)
    # A stranger is not found by name until findable: a public username (or a chat).
    hidden = await bob(functions.contacts.SearchRequest(q="quillf", limit=10))
    assert hidden.my_results == [] and hidden.results == []
    await alice(functions.account.UpdateUsernameRequest(f"aq{alice_id}"))

    found = await bob(functions.contacts.SearchRequest(q="quillf", limit=10))
    assert found.my_results == [] and found.results == [types.PeerUser(alice_id)]
    [user] = found.users
    assert user.first_name == "Alicia" and user.phone is None  # the projection's view
    assert not user.contact


async def test_accept_contact_shares_the_phone(make_client: ClientFactory) -> None:
    alice, bob, alice_id, bob_id, bob_in, alice_in_bob = await pair(make_client)
    [before] = await bob(functions.users.GetUsersRequest([alice_in_bob]))
    assert before.phone is None
    settings = await alice(functions.messages.GetPeerSettingsRequest(bob_in))
    assert settings.settings.add_contact  # Bob, a stranger, wrote first

    answer = await alice(functions.contacts.AcceptContactRequest(bob_in))
    [update] = answer.updates
    assert isinstance(update, types.UpdatePeerSettings) and not update.settings.add_contact

    [after] = await bob(functions.users.GetUsersRequest([alice_in_bob]))
    assert after.phone == (await alice.get_me()).phone
    settings = await alice(functions.messages.GetPeerSettingsRequest(bob_in))
    assert not settings.settings.add_contact
