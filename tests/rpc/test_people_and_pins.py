"""contacts.search, contacts.acceptContact and the pin methods through the dispatcher the
server builds, on real PostgreSQL and Redis: word and username prefixes, contacts
apart, users through the projection, every bound at its limit and past it, the phone
shared by acceptContact and its action bar closed, and the TL answers of pins."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MakeSettings

from rpc.test_app_screens import CODE, Device, Env, input_peer_of
from telesrv.app import open_resources
from telesrv.services.people_search import (
    DEFAULT_SEARCH_LIMIT,
    MAX_QUERY_LENGTH,
    MAX_SEARCH_LIMIT,
    MIN_QUERY_LENGTH,
)
from telesrv.tl import functions, types
from telesrv.wiring import build_server

SEARCH_RATE = 40
_names = itertools.count(1)
_random_ids = itertools.count(1)


@pytest.fixture
async def env(make_settings: MakeSettings, tmp_path: Path) -> AsyncIterator[Env]:
    settings = make_settings(
        tmp_path,
        dev_login_code=CODE,
        auto_register=True,
        send_rate_limit=0,
        people_search_rate_limit=SEARCH_RATE,
    )
    async with open_resources(settings, warm=False) as resources:
        yield Env(build_server(settings, resources))


async def named(env: Env, first: str, last: str = "", username: str | None = None) -> Any:
    """A user with this name and a public username (by default one no search here
    matches), so that strangers may find them by name."""
    device, phone = await env.user()
    await device(functions.account.UpdateProfile(first_name=first, last_name=last))
    await device(functions.account.UpdateUsername(username=username or f"z{device.user_id}"))
    return device, phone


def user_ids(peers: list[types.TypePeer]) -> list[int]:
    ids = []
    for peer in peers:
        assert isinstance(peer, types.PeerUser)
        ids.append(peer.user_id)
    return ids


async def search(device: Device, q: str, limit: int = 10) -> tuple[list[int], list[int], Any]:
    found = await device(functions.contacts.Search(q=q, limit=limit))
    assert isinstance(found, types.contacts.Found)
    mine, others = user_ids(found.my_results), user_ids(found.results)
    assert {u.id for u in found.users} == set(mine) | set(others)
    return mine, others, found


def tag() -> str:
    """A word no other test's users have, so each test finds only its own users."""
    return "Zq" + "".join("abcdefghij"[int(d)] for d in str(next(_names)))


async def test_people_are_found_by_a_word_prefix_of_the_name_or_the_username(
    env: Env,
) -> None:
    word = tag()
    alice, _ = await named(env, word + "alice", "Wonder" + word, username=f"u{word}alice")
    bob, _ = await named(env, "Bob")
    assert alice.user_id is not None

    for q in (word + "ali", word.upper() + "ALI", "wonder" + word.lower(), f"@u{word}al"):
        mine, others, found = await search(bob, q)
        assert (mine, others) == ([], [alice.user_id]), q
        [user] = found.users
        # Through the projection: Alice has not got Bob in her contacts.
        assert user.phone is None and user.first_name == word + "alice"
    # Not a word's prefix, and not Bob himself.
    assert (await search(bob, word[2:] + "alice"))[:2] == ([], [])
    assert (await search(bob, "bob"))[1].count(bob.user_id) == 0


async def test_contacts_come_apart_and_match_by_the_saved_name(env: Env) -> None:
    word = tag()
    alice, alice_phone = await named(env, word + "alice")
    carol, _ = await named(env, word + "carol")
    bob, _ = await named(env, "Bob")
    await bob(
        functions.contacts.ImportContacts(
            contacts=[
                types.InputPhoneContact(
                    client_id=1, phone=alice_phone, first_name="Saved" + word, last_name=""
                )
            ]
        )
    )
    mine, others, _ = await search(bob, word)
    assert (mine, others) == ([alice.user_id], [carol.user_id])
    assert (await search(bob, "saved" + word))[:2] == ([alice.user_id], [])


async def test_the_query_length_at_its_bounds_and_past(env: Env) -> None:
    bob, _ = await named(env, "Bob")
    assert await bob.error(functions.contacts.Search(q="", limit=10)) == "SEARCH_QUERY_EMPTY"
    assert await bob.error(functions.contacts.Search(q=" @ ", limit=10)) == "SEARCH_QUERY_EMPTY"
    short = "x" * (MIN_QUERY_LENGTH - 1)
    assert await bob.error(functions.contacts.Search(q=short, limit=10)) == "QUERY_TOO_SHORT"
    assert await bob.error(functions.contacts.Search(q="@" + short, limit=10)) == (
        "QUERY_TOO_SHORT"
    )
    word = tag()
    three, _ = await named(env, word)
    assert (await search(bob, word[:MIN_QUERY_LENGTH]))[1].count(three.user_id) == 1

    # The longest name the server keeps is found by all of it; one character more
    # matches nothing.
    first, last = word + "f" * (64 - len(word)), "l" * 64
    longest, _ = await named(env, first, last)
    full = f"{first} {last}"
    assert len(full) == MAX_QUERY_LENGTH
    assert (await search(bob, full))[1] == [longest.user_id]
    assert (await search(bob, full + "l"))[:2] == ([], [])


async def test_the_limit_at_its_bounds_and_past(env: Env) -> None:
    word = tag()
    users = [(await named(env, f"{word} {i}"))[0].user_id for i in range(MAX_SEARCH_LIMIT + 1)]
    bob, _ = await named(env, "Bob")
    at_limit = (await search(bob, word, MAX_SEARCH_LIMIT))[1]
    assert len(at_limit) == MAX_SEARCH_LIMIT and set(at_limit) <= set(users)
    assert len((await search(bob, word, MAX_SEARCH_LIMIT + 1))[1]) == MAX_SEARCH_LIMIT
    assert len((await search(bob, word, 0))[1]) == DEFAULT_SEARCH_LIMIT
    assert len((await search(bob, word, 3))[1]) == 3


async def test_searches_are_rate_limited_per_user(env: Env) -> None:
    bob, _ = await named(env, "Bob")
    carol, _ = await named(env, "Carol")
    for _ in range(SEARCH_RATE):
        await search(bob, "nobody by this name")
    refused = await bob.error(functions.contacts.Search(q="nobody by this name", limit=10))
    assert refused.startswith("FLOOD_WAIT_")
    await search(carol, "nobody by this name")  # another user's own budget


async def test_accept_contact_shares_the_phone_and_closes_the_bar(env: Env) -> None:
    alice, alice_phone = await named(env, "Alice")
    bob, _ = await named(env, "Bob", "Builder")
    assert alice.user_id is not None and bob.user_id is not None
    # Bob finds Alice by her username and writes first: Alice sees the action bar.
    await alice(functions.account.UpdateUsername(username=f"alice{alice.user_id}"))
    resolved = await bob(functions.contacts.ResolveUsername(username=f"alice{alice.user_id}"))
    [alice_user] = resolved.users
    alice_in_bob = types.InputPeerUser(user_id=alice.user_id, access_hash=alice_user.access_hash)
    await bob(
        functions.messages.SendMessage(
            peer=alice_in_bob, message="hi, it's Bob", random_id=next(_random_ids)
        )
    )
    found = await alice(functions.contacts.Search(q="bob buil", limit=5))
    [bob_user] = found.users
    assert bob_user.phone is None
    bob_in_alice = types.InputUser(user_id=bob.user_id, access_hash=bob_user.access_hash)
    bar = await alice(
        functions.messages.GetPeerSettings(
            peer=types.InputPeerUser(user_id=bob.user_id, access_hash=bob_user.access_hash)
        )
    )
    assert bar.settings.add_contact

    # Alice shares her phone with Bob.
    answer = await alice(functions.contacts.AcceptContact(id=bob_in_alice))
    [update] = answer.updates
    assert isinstance(update, types.UpdatePeerSettings)
    assert update.peer == types.PeerUser(user_id=bob.user_id)
    assert update.settings == types.PeerSettings()
    [shown] = answer.users
    assert shown.contact and shown.first_name == "Bob" and shown.last_name == "Builder"
    bar = await alice(
        functions.messages.GetPeerSettings(
            peer=types.InputPeerUser(user_id=bob.user_id, access_hash=bob_user.access_hash)
        )
    )
    assert not bar.settings.add_contact and not bar.settings.report_spam

    [alice_for_bob] = await bob(
        functions.users.GetUsers(
            id=[types.InputUser(user_id=alice.user_id, access_hash=alice_user.access_hash)]
        )
    )
    assert alice_for_bob.phone == alice_phone
    # Bob's number stays his own to share.
    [bob_for_alice] = await alice(functions.users.GetUsers(id=[bob_in_alice]))
    assert bob_for_alice.phone is None
    contacts = await alice(functions.contacts.GetContacts(hash=0))
    assert [c.user_id for c in contacts.contacts] == [bob.user_id]

    # Again: nothing changes and the answer is the same.
    again = await alice(functions.contacts.AcceptContact(id=bob_in_alice))
    assert again.updates == [update]


async def test_accept_contact_of_oneself_is_refused(env: Env) -> None:
    alice, _ = await named(env, "Alice")
    refused = await alice.error(functions.contacts.AcceptContact(id=types.InputUserSelf()))
    assert refused == "CONTACT_ID_INVALID"


async def test_pins_answer_and_render_as_telegram_does(env: Env) -> None:
    alice, _ = await named(env, "Alice")
    bob, bob_phone = await named(env, "Bob")
    assert alice.user_id is not None and bob.user_id is not None
    bob_in = await input_peer_of(alice, bob_phone)
    state = await bob(functions.updates.GetState())
    sent = await alice(
        functions.messages.SendMessage(peer=bob_in, message="pin me", random_id=next(_random_ids))
    )
    [mine] = [u.id for u in sent.updates if isinstance(u, types.UpdateMessageID)]

    answer = await alice(functions.messages.UpdatePinnedMessage(peer=bob_in, id=mine))
    [pinned] = answer.updates
    assert isinstance(pinned, types.UpdatePinnedMessages)
    assert pinned.pinned and pinned.messages == [mine] and pinned.pts_count == 1
    assert pinned.peer == types.PeerUser(user_id=bob.user_id)
    assert [u.id for u in answer.users] == [bob.user_id]
    # Nothing changes the second time: no update, no pts.
    again = await alice(functions.messages.UpdatePinnedMessage(peer=bob_in, id=mine))
    assert again.updates == []
    missing = functions.messages.UpdatePinnedMessage(peer=bob_in, id=mine + 100)
    assert await alice.error(missing) == "MESSAGE_ID_INVALID"

    # Bob's offline device learns it from getDifference, with the message shown pinned.
    diff = await bob(functions.updates.GetDifference(pts=state.pts, date=state.date, qts=0))
    [theirs] = [u for u in diff.other_updates if isinstance(u, types.UpdatePinnedMessages)]
    assert theirs.pinned and theirs.peer == types.PeerUser(user_id=alice.user_id)
    [message] = diff.new_messages
    assert message.pinned and theirs.messages == [message.id]
    [alice_user] = [u for u in diff.users if u.id == alice.user_id]
    full = await bob(
        functions.users.GetFullUser(
            id=types.InputUser(user_id=alice.user_id, access_hash=alice_user.access_hash)
        )
    )
    assert full.full_user.pinned_msg_id == message.id and full.full_user.can_pin_message

    history = await alice(
        functions.messages.GetHistory(
            peer=bob_in,
            offset_id=0,
            offset_date=0,
            add_offset=0,
            limit=5,
            max_id=0,
            min_id=0,
            hash=0,
        )
    )
    assert [m.pinned for m in history.messages] == [True]
    found = await alice(
        functions.messages.Search(
            peer=bob_in,
            q="",
            filter=types.InputMessagesFilterPinned(),
            min_date=0,
            max_date=0,
            offset_id=0,
            add_offset=0,
            limit=10,
            max_id=0,
            min_id=0,
            hash=0,
        )
    )
    assert [m.id for m in found.messages] == [mine]
    [counter] = await alice(
        functions.messages.GetSearchCounters(
            peer=bob_in, filters=[types.InputMessagesFilterPinned()]
        )
    )
    assert counter.count == 1

    affected = await alice(functions.messages.UnpinAllMessages(peer=bob_in))
    assert affected.pts_count == 1 and affected.offset == 0
    unchanged = await alice(functions.messages.UnpinAllMessages(peer=bob_in))
    assert unchanged.pts_count == 0 and unchanged.pts == affected.pts
    in_topic = await alice(functions.messages.UnpinAllMessages(peer=bob_in, top_msg_id=1))
    assert in_topic.pts_count == 0
