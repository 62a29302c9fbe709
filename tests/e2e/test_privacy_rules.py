"""Privacy rules and live profile pushes through unmodified Telethon: account.setPrivacy
hides the phone and last seen, the about text and forward links; the owner's other
device hears of it; status and name changes reach the other user live."""

from __future__ import annotations

import asyncio
from typing import Any

from telethon import TelegramClient, functions, types

from .conftest import ClientFactory
from .test_messages import peer_of, sign_in
from .test_send_limits import error_of, send
from .test_state_updates import collect


async def contacts_both_ways(a: TelegramClient, b: TelegramClient) -> tuple[Any, Any]:
    """``a`` saves ``b`` by number, ``b`` saves ``a`` found by username (so ``b`` learns
    ``a``'s number only as ``a``'s rules allow); the input users each has of the other."""
    b_me = await b.get_me()
    await a(
        functions.contacts.ImportContactsRequest(
            [types.InputPhoneContact(client_id=1, phone=b_me.phone, first_name="", last_name="")]
        )
    )
    a_for_b = await peer_of(b, a)
    await b(
        functions.contacts.AddContactRequest(id=a_for_b, first_name="A", last_name="", phone="")
    )
    b_for_a = await a.get_input_entity(b_me.id)
    return (
        types.InputUser(b_for_a.user_id, b_for_a.access_hash),
        types.InputUser(a_for_b.user_id, a_for_b.access_hash),
    )


def set_privacy(key: Any, *rules: Any) -> functions.account.SetPrivacyRequest:
    return functions.account.SetPrivacyRequest(key=key, rules=list(rules))


async def test_alice_hides_phone_and_last_seen_from_bob(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    alice_me = await alice.get_me()
    tablet = await sign_in(make_client, "+" + alice_me.phone)  # Alice's other device
    privacy_pushed = collect(tablet, types.UpdatePrivacy)
    bob_for_alice, alice_for_bob = await contacts_both_ways(alice, bob)
    await alice(functions.account.UpdateStatusRequest(offline=False))
    [before] = await bob(functions.users.GetUsersRequest(id=[alice_for_bob]))
    assert before.phone == alice_me.phone and isinstance(before.status, types.UserStatusOnline)

    # Defaults as Telegram's: the phone to contacts, last seen to everybody.
    answer = await alice(functions.account.GetPrivacyRequest(types.InputPrivacyKeyPhoneNumber()))
    assert answer.rules == [types.PrivacyValueAllowContacts()]
    answer = await alice(
        functions.account.GetPrivacyRequest(types.InputPrivacyKeyStatusTimestamp())
    )
    assert answer.rules == [types.PrivacyValueAllowAll()]

    answer = await alice(
        set_privacy(
            types.InputPrivacyKeyPhoneNumber(),
            types.InputPrivacyValueDisallowUsers(users=[bob_for_alice]),
            types.InputPrivacyValueAllowContacts(),
        )
    )
    bob_id = bob_for_alice.user_id
    assert answer.rules[0] == types.PrivacyValueDisallowUsers(users=[bob_id])
    assert [u.id for u in answer.users] == [bob_id]
    await alice(
        set_privacy(
            types.InputPrivacyKeyStatusTimestamp(),
            types.InputPrivacyValueDisallowUsers(users=[bob_for_alice]),
            types.InputPrivacyValueAllowAll(),
        )
    )
    [after] = await bob(functions.users.GetUsersRequest(id=[alice_for_bob]))
    assert after.phone is None and isinstance(after.status, types.UserStatusRecently)
    [dialog_user] = (await bob(functions.contacts.GetContactsRequest(hash=0))).users
    assert dialog_user.phone is None and isinstance(dialog_user.status, types.UserStatusRecently)
    # Alice still sees all of her own.
    me_again = await alice.get_me()
    assert me_again.phone == alice_me.phone

    # Her other device is told of both changes.
    first = await asyncio.wait_for(privacy_pushed.get(), 10)
    second = await asyncio.wait_for(privacy_pushed.get(), 10)
    assert isinstance(first.key, types.PrivacyKeyPhoneNumber)
    assert isinstance(second.key, types.PrivacyKeyStatusTimestamp)
    assert second.rules[0] == types.PrivacyValueDisallowUsers(users=[bob_id])
    fetched = await tablet(
        functions.account.GetPrivacyRequest(types.InputPrivacyKeyStatusTimestamp())
    )
    assert fetched.rules == second.rules and [u.id for u in fetched.users] == [bob_id]


async def test_an_offline_device_learns_the_rules_from_get_difference(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    bob_for_alice, _ = await contacts_both_ways(alice, bob)
    tablet = await sign_in(make_client, "+" + (await alice.get_me()).phone, updates=False)
    before = await tablet(functions.updates.GetStateRequest())
    await tablet.disconnect()

    await alice(
        set_privacy(
            types.InputPrivacyKeyProfilePhoto(),
            types.InputPrivacyValueAllowUsers(users=[bob_for_alice]),
            types.InputPrivacyValueDisallowAll(),
        )
    )

    await tablet.connect()
    diff = await tablet(
        functions.updates.GetDifferenceRequest(pts=before.pts, date=before.date, qts=0)
    )
    assert isinstance(diff, types.updates.Difference)
    [update] = [u for u in diff.other_updates if isinstance(u, types.UpdatePrivacy)]
    assert isinstance(update.key, types.PrivacyKeyProfilePhoto)
    assert update.rules == [
        types.PrivacyValueAllowUsers(users=[bob_for_alice.user_id]),
        types.PrivacyValueDisallowAll(),
    ]
    assert bob_for_alice.user_id in {u.id for u in diff.users}
    assert diff.state.pts == before.pts  # no pts taken


async def test_refusals_and_bounds(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    key = types.InputPrivacyKeyAbout()
    for refused in (
        types.InputPrivacyValueAllowCloseFriends(),
        types.InputPrivacyValueAllowPremium(),
        types.InputPrivacyValueAllowBots(),
        types.InputPrivacyValueAllowChatParticipants(chats=[1]),
    ):
        assert await error_of(alice(set_privacy(key, refused))) == "PRIVACY_VALUE_INVALID"
    gifts = types.InputPrivacyKeyStarGiftsAutoSave()
    assert await error_of(alice(functions.account.GetPrivacyRequest(gifts))) == (
        "PRIVACY_KEY_INVALID"
    )
    everybody = types.InputPrivacyValueAllowAll()
    assert len((await alice(set_privacy(key, *[everybody] * 10))).rules) == 10
    assert await error_of(alice(set_privacy(key, *[everybody] * 11))) == "PRIVACY_TOO_LONG"
    me = types.InputUserSelf()
    at_limit = types.InputPrivacyValueAllowUsers(users=[me] * 1000)
    answer = await alice(set_privacy(key, at_limit, everybody))
    assert answer.rules[0] == types.PrivacyValueAllowUsers(users=[(await alice.get_me()).id])
    past = types.InputPrivacyValueDisallowUsers(users=[me])
    assert await error_of(alice(set_privacy(key, at_limit, past))) == "PRIVACY_TOO_LONG"


async def test_about_and_forward_links_follow_the_rules(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    carol = await sign_in(make_client, updates=False)
    await alice(functions.account.UpdateProfileRequest(first_name="Alice", about="my bio"))
    alice_for_bob = await peer_of(bob, alice)
    alice_user = types.InputUser(alice_for_bob.user_id, alice_for_bob.access_hash)
    full = await bob(functions.users.GetFullUserRequest(alice_user))
    assert full.full_user.about == "my bio"

    nobody = types.InputPrivacyValueDisallowAll()
    await alice(set_privacy(types.InputPrivacyKeyAbout(), nobody))
    await alice(set_privacy(types.InputPrivacyKeyForwards(), nobody))
    full = await bob(functions.users.GetFullUserRequest(alice_user))
    assert full.full_user.about is None

    await send(alice, await peer_of(alice, bob), "forward me")
    [message] = await bob.get_messages(alice_for_bob, limit=1)
    await bob(
        functions.messages.ForwardMessagesRequest(
            from_peer=alice_for_bob, id=[message.id], to_peer=await peer_of(bob, carol)
        )
    )
    [copy] = await carol.get_messages(await peer_of(carol, bob), limit=1)
    assert copy.text == "forward me"
    assert copy.fwd_from is not None and copy.fwd_from.from_id is None
    assert copy.fwd_from.from_name == "Alice"
    # Bob's own messages keep linking to him.
    await send(bob, types.InputPeerSelf(), "mine")
    [mine] = await bob.get_messages("me", limit=1)
    await bob(
        functions.messages.ForwardMessagesRequest(
            from_peer=types.InputPeerSelf(), id=[mine.id], to_peer=await peer_of(bob, carol)
        )
    )
    [copy] = await carol.get_messages(await peer_of(carol, bob), limit=1)
    assert copy.fwd_from is not None
    assert copy.fwd_from.from_id == types.PeerUser((await bob.get_me()).id)


async def test_status_and_name_changes_reach_bob_live(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client)
    statuses = collect(bob, types.UpdateUserStatus)
    names = collect(bob, types.UpdateUserName)
    alice_id = (await alice.get_me()).id
    _, alice_for_bob = await contacts_both_ways(alice, bob)
    await bob(
        functions.contacts.AddContactRequest(
            id=alice_for_bob, first_name="Ally", last_name="", phone=""
        )
    )

    await alice(functions.account.UpdateStatusRequest(offline=False))
    online = await asyncio.wait_for(statuses.get(), 10)
    assert online.user_id == alice_id and isinstance(online.status, types.UserStatusOnline)
    await alice(functions.account.UpdateStatusRequest(offline=True))
    offline = await asyncio.wait_for(statuses.get(), 10)
    assert offline.user_id == alice_id and isinstance(offline.status, types.UserStatusOffline)

    # Bob saved her as "Ally": the update still carries her own new name.
    await alice(functions.account.UpdateProfileRequest(first_name="Alicia", last_name="B"))
    renamed = await asyncio.wait_for(names.get(), 10)
    assert (renamed.user_id, renamed.first_name, renamed.last_name) == (alice_id, "Alicia", "B")
    await alice(functions.account.UpdateUsernameRequest(f"alicia{alice_id}"))
    username = await asyncio.wait_for(names.get(), 10)
    assert [u.username for u in username.usernames] == [f"alicia{alice_id}"]
