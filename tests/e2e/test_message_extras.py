"""Forwards, content reads, outbox read dates and search between unmodified Telethon
clients: headers, protected messages, live pushes to other devices, offline catch-up."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from telethon import errors, events, functions, types
from telethon.errors import RPCError

from .conftest import ClientFactory, RunningServer
from .test_messages import peer_of, second_device, sign_in, waiter


async def test_forwarded_messages_carry_the_original_header(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    carol = await sign_in(make_client)
    alice_id, bob_id = (await alice.get_me()).id, (await bob.get_me()).id
    alice_laptop = await second_device(make_client, "+" + (await alice.get_me()).phone)
    bob_in_alice = await peer_of(alice, bob)
    carol_in_alice = await peer_of(alice, carol)
    alice_in_bob = await peer_of(bob, alice)

    from_bob = await bob.send_message(alice_in_bob, "bob wrote this")
    await asyncio.sleep(0.2)
    [received] = await alice.get_messages(bob_in_alice, limit=1)
    mine = await alice.send_message(bob_in_alice, "alice wrote this")

    def forwarded(e: Any) -> bool:
        return e.message.fwd_from is not None

    incoming = waiter(carol, events.NewMessage(incoming=True, func=forwarded))
    mirrored = waiter(alice_laptop, events.NewMessage(outgoing=True, func=forwarded))
    copies = await alice.forward_messages(carol_in_alice, [received.id, mine.id], bob_in_alice)
    assert [c.text for c in copies] == ["bob wrote this", "alice wrote this"]
    assert copies[0].id < copies[1].id  # source order kept
    assert copies[0].fwd_from.from_id == types.PeerUser(bob_id)
    assert copies[0].fwd_from.date == from_bob.date
    assert copies[1].fwd_from.from_id == types.PeerUser(alice_id)

    got = await asyncio.wait_for(incoming, 10)
    assert got.message.text == "bob wrote this" and got.message.fwd_from is not None
    assert got.message.fwd_from.from_id == types.PeerUser(bob_id)
    assert got.message.sender_id == alice_id
    copy = await asyncio.wait_for(mirrored, 10)
    assert copy.message.id in {c.id for c in copies} and copy.message.fwd_from is not None

    # Forwarding a forward names the first author; drop_author names nobody.
    alice_in_carol = await peer_of(carol, alice)
    bob_in_carol = await peer_of(carol, bob)
    [last] = await carol.get_messages(alice_in_carol, limit=1)
    [again] = await carol.forward_messages(bob_in_carol, [last.id], alice_in_carol)
    assert again.fwd_from.from_id == types.PeerUser(alice_id)
    [anonymous] = await carol.forward_messages(
        bob_in_carol, [last.id], alice_in_carol, drop_author=True
    )
    assert anonymous.fwd_from is None and anonymous.text == "alice wrote this"


async def test_a_protected_message_cannot_be_forwarded(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    carol = await sign_in(make_client, updates=False)
    bob_in_alice = await peer_of(alice, bob)
    alice_in_bob = await peer_of(bob, alice)
    carol_in_bob = await peer_of(bob, carol)
    await alice(
        functions.messages.SendMessageRequest(
            peer=bob_in_alice, message="for your eyes only", random_id=4242, noforwards=True
        )
    )
    [protected] = await bob.get_messages(alice_in_bob, limit=1)
    assert protected.noforwards
    with pytest.raises(errors.ChatForwardsRestrictedError):
        await bob.forward_messages(carol_in_bob, [protected.id], alice_in_bob)
    assert await carol.get_dialogs() == []
    # Options this server does not implement get explicit errors.
    with pytest.raises(errors.ScheduleDateInvalidError):
        await bob(
            functions.messages.ForwardMessagesRequest(
                from_peer=alice_in_bob,
                id=[protected.id],
                random_id=[1],
                to_peer=carol_in_bob,
                schedule_date=2_000_000_000,
            )
        )
    with pytest.raises(errors.RandomIdInvalidError):
        await bob(
            functions.messages.ForwardMessagesRequest(
                from_peer=alice_in_bob, id=[protected.id, 1], random_id=[1], to_peer=carol_in_bob
            )
        )


async def test_an_offline_device_receives_forwards(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client)
    bob_in_alice = await peer_of(alice, bob)
    originals = [await alice.send_message("me", f"note {i}") for i in range(3)]
    seen: list[Any] = []
    done = asyncio.get_running_loop().create_future()

    async def collect(e: Any) -> None:
        if e.message.fwd_from is not None:
            seen.append(e.message)
        if len(seen) >= 3 and not done.done():
            done.set_result(None)

    bob.add_event_handler(collect, events.NewMessage(incoming=True))
    await bob.disconnect()
    await alice.forward_messages(bob_in_alice, [m.id for m in originals], "me")
    await bob.connect()
    await bob.catch_up()
    await asyncio.wait_for(done, 15)
    assert [m.text for m in seen] == ["note 0", "note 1", "note 2"]


async def test_read_contents_reach_the_readers_other_devices(
    server: RunningServer, make_client: ClientFactory
) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client)
    bob_phone = (await bob.get_me()).phone
    bob_phone_two = await second_device(make_client, "+" + bob_phone)
    bob_in_alice = await peer_of(alice, bob)
    alice_in_bob = await peer_of(bob, alice)
    await alice.send_message(bob_in_alice, "a voice note, pretend")
    await asyncio.sleep(0.2)
    [message] = await bob.get_messages(alice_in_bob, limit=1)
    # Only text exists here, so nothing sets media_unread yet: set it as a media send would.
    await server.resources.db.pool.execute(
        "UPDATE message_boxes SET media_unread = true WHERE owner_user_id = $1 AND box_id = $2",
        (await bob.get_me()).id,
        message.id,
    )
    read = waiter(bob_phone_two, events.MessageRead(inbox=True))
    affected = await bob(functions.messages.ReadMessageContentsRequest(id=[message.id]))
    assert affected.pts_count == 1
    event = await asyncio.wait_for(read, 10)
    assert event.contents and event.message_ids == [message.id]
    again = await bob(functions.messages.ReadMessageContentsRequest(id=[message.id]))
    assert (again.pts, again.pts_count) == (affected.pts, 0)


async def test_outbox_read_date(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    bob_in_alice = await peer_of(alice, bob)
    alice_in_bob = await peer_of(bob, alice)
    sent = await alice.send_message(bob_in_alice, "did you read this?")
    with pytest.raises(RPCError) as caught:
        await alice(functions.messages.GetOutboxReadDateRequest(peer=bob_in_alice, msg_id=sent.id))
    assert caught.value.message == "MESSAGE_NOT_READ_YET"
    await bob.send_read_acknowledge(alice_in_bob, max_id=10**6)
    answer = await alice(
        functions.messages.GetOutboxReadDateRequest(peer=bob_in_alice, msg_id=sent.id)
    )
    assert isinstance(answer, types.OutboxReadDate) and answer.date >= sent.date
    with pytest.raises(errors.MessageIdInvalidError):
        await alice(
            functions.messages.GetOutboxReadDateRequest(peer=bob_in_alice, msg_id=sent.id + 99)
        )


async def test_search_one_chat_and_every_chat(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    carol = await sign_in(make_client, updates=False)
    bob_in_alice = await peer_of(alice, bob)
    carol_in_alice = await peer_of(alice, carol)
    alice_in_bob = await peer_of(bob, alice)
    for i in range(30):
        await alice.send_message(bob_in_alice, f"Pineapple number {i}")
    await bob.send_message(alice_in_bob, "pineapples from bob")
    await alice.send_message(carol_in_alice, "a pineapple for carol")
    await alice.send_message(carol_in_alice, "nothing to see")

    in_chat = [m.text async for m in alice.iter_messages(bob_in_alice, search="pine", wait_time=0)]
    assert in_chat[0] == "pineapples from bob" and len(in_chat) == 31
    assert in_chat[1:] == [f"Pineapple number {i}" for i in range(29, -1, -1)]
    everywhere = [m.text async for m in alice.iter_messages(None, search="pineap", wait_time=0)]
    assert everywhere[0] == "a pineapple for carol" and len(everywhere) == 32
    assert "nothing to see" not in everywhere

    def search(peer: Any, q: str, **kw: Any) -> Any:
        return functions.messages.SearchRequest(
            peer=peer,
            q=q,
            filter=types.InputMessagesFilterEmpty(),
            min_date=0,
            max_date=0,
            offset_id=0,
            add_offset=0,
            limit=10,
            max_id=0,
            min_id=0,
            hash=0,
            **kw,
        )

    page = await alice(search(bob_in_alice, "pineapple"))
    assert isinstance(page, types.messages.MessagesSlice) and page.count == 31
    # Every chat, one author, no text (inputPeerEmpty + from_id).
    by_bob = await alice(search(types.InputPeerEmpty(), "", from_id=bob_in_alice))
    assert [m.message for m in by_bob.messages] == ["pineapples from bob"]
    # Bob's view: his own ids, and none of alice's chat with carol.
    bob_view = [m.text async for m in bob.iter_messages(None, search="pineapple", wait_time=0)]
    assert len(bob_view) == 31 and "a pineapple for carol" not in bob_view
    with pytest.raises(errors.SearchQueryEmptyError):
        await alice(
            functions.messages.SearchGlobalRequest(
                q="",
                filter=types.InputMessagesFilterEmpty(),
                min_date=0,
                max_date=0,
                offset_rate=0,
                offset_peer=types.InputPeerEmpty(),
                offset_id=0,
                limit=10,
            )
        )
