"""Private text messages between unmodified Telethon clients: pushes, other devices,
read receipts, dialogs, history, catching up offline, and a restart."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from telethon import TelegramClient, events, functions, types

from .conftest import ClientFactory, RunningServer

CODE = "12345"
_phones = itertools.count(15551000)


async def sign_in(
    make_client: ClientFactory, phone: str | None = None, *, updates: bool = True
) -> TelegramClient:
    client = make_client(receive_updates=updates)
    await client.start(phone=phone or f"+{next(_phones)}", code_callback=lambda: CODE)
    return client


async def second_device(
    make_client: ClientFactory, phone: str, *, updates: bool = True
) -> TelegramClient:
    return await sign_in(make_client, phone, updates=updates)


async def peer_of(client: TelegramClient, other: TelegramClient) -> Any:
    """``other`` as ``client`` may address it: via a username lookup (shows its access hash)."""
    me = await other.get_me()
    username = f"u{me.id}"
    if me.username != username:
        await other(functions.account.UpdateUsernameRequest(username))
    return await client.get_input_entity(username)


def waiter(client: TelegramClient, event: Any) -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def handler(e: Any) -> None:
        if not future.done():
            future.set_result(e)

    client.add_event_handler(handler, event)
    return future


async def test_live_push_and_the_senders_other_device(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    alice_phone = (await alice.get_me()).phone
    alice_laptop = await second_device(make_client, "+" + alice_phone)
    bob_peer = await peer_of(alice, bob)

    incoming = waiter(bob, events.NewMessage(incoming=True))
    mirrored = waiter(alice_laptop, events.NewMessage(outgoing=True))
    sent = await alice.send_message(bob_peer, "hello bob")
    assert sent.out and sent.text == "hello bob"

    got = await asyncio.wait_for(incoming, 10)
    assert got.message.text == "hello bob" and not got.message.out
    assert got.message.sender_id == (await alice.get_me()).id
    copy = await asyncio.wait_for(mirrored, 10)
    assert copy.message.text == "hello bob" and copy.message.id == sent.id


async def test_read_receipts_reach_the_sender(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    alice_peer = await peer_of(bob, alice)
    first = await alice.send_message(bob_peer, "one")
    await alice.send_message(bob_peer, "two")
    read = waiter(alice, events.MessageRead(inbox=False))
    alice_id = (await alice.get_me()).id
    dialogs = await bob.get_dialogs()
    chat = next(d for d in dialogs if d.id == alice_id)
    assert chat.unread_count == 2 and chat.message.text == "two"
    await bob.send_read_acknowledge(alice_peer, max_id=first.id + 5)
    event = await asyncio.wait_for(read, 10)
    assert event.max_id >= first.id + 1
    dialogs = await bob.get_dialogs()
    assert next(d for d in dialogs if d.id == alice_id).unread_count == 0


async def test_history_pages(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    bob_peer = await peer_of(alice, bob)
    for i in range(25):
        await alice(
            functions.messages.SendMessageRequest(
                peer=bob_peer, message=f"m{i}", random_id=1000 + i
            )
        )
    texts = [m.text async for m in alice.iter_messages(bob_peer, limit=None, wait_time=0)]
    assert texts == [f"m{i}" for i in range(24, -1, -1)]
    page = await alice(
        functions.messages.GetHistoryRequest(
            peer=bob_peer,
            offset_id=0,
            offset_date=0,
            add_offset=0,
            limit=10,
            max_id=0,
            min_id=0,
            hash=0,
        )
    )
    assert isinstance(page, types.messages.MessagesSlice) and page.count == 25
    oldest = [
        m.text async for m in alice.iter_messages(bob_peer, limit=5, reverse=True, wait_time=0)
    ]
    assert oldest == ["m0", "m1", "m2", "m3", "m4"]


async def test_an_offline_device_catches_up_over_several_slices(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    seen: list[str] = []
    done = asyncio.get_running_loop().create_future()

    async def collect(e: Any) -> None:
        seen.append(e.message.text)
        if len(seen) >= 230 and not done.done():
            done.set_result(None)

    bob.add_event_handler(collect, events.NewMessage(incoming=True))
    await bob.disconnect()  # the client keeps its pts; the server sees the device go away

    for i in range(230):  # more than two getDifference slices of 100
        await alice(
            functions.messages.SendMessageRequest(
                peer=bob_peer, message=f"n{i}", random_id=5000 + i
            )
        )

    await bob.connect()
    await bob.catch_up()
    await asyncio.wait_for(done, 30)
    assert seen == [f"n{i}" for i in range(230)]


async def test_saved_messages(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    await alice.send_message("me", "note to self")
    [message] = await alice.get_messages("me", limit=1)
    assert message.text == "note to self" and message.out


async def test_everything_survives_a_restart(
    server: RunningServer, make_client: ClientFactory
) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    bob_peer = await peer_of(alice, bob)
    await alice.send_message(bob_peer, "before restart")
    saved = alice.session.save()
    await alice.disconnect()

    await server.restart()

    again = make_client(session=saved)
    again.session.set_dc(2, server.host, server.port)
    await again.connect()
    assert await again.is_user_authorized()
    [last] = await again.get_messages(bob_peer, limit=1)
    assert last.text == "before restart"


async def test_get_messages_by_id_and_by_reply(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    bob_peer = await peer_of(alice, bob)
    question = await alice.send_message(bob_peer, "question")
    answer = await alice.send_message(bob_peer, "follow-up", reply_to=question.id)
    got = await alice(
        functions.messages.GetMessagesRequest(
            id=[
                types.InputMessageID(answer.id),
                types.InputMessageReplyTo(answer.id),
                types.InputMessageID(10**6),  # not ours: messageEmpty in its place
            ]
        )
    )
    assert [getattr(m, "message", None) for m in got.messages] == ["follow-up", "question", None]
    assert isinstance(got.messages[2], types.MessageEmpty) and got.messages[2].id == 10**6
    assert got.messages[0].reply_to.reply_to_msg_id == question.id


async def test_typing_reaches_the_peer_live(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    typing = waiter(bob, events.UserUpdate())
    await alice(functions.messages.SetTypingRequest(bob_peer, types.SendMessageTypingAction()))
    event = await asyncio.wait_for(typing, 10)
    assert event.typing and event.user_id == (await alice.get_me()).id


async def test_a_reply_reaches_the_peer_live_in_its_own_ids(make_client: ClientFactory) -> None:
    """The recipient's copy of a reply names the replied-to message by the recipient's
    id for it, live as in history."""
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    await alice.send_message("me", "a note")  # so that the two sides' ids differ
    got: asyncio.Queue[Any] = asyncio.Queue()
    bob.add_event_handler(got.put, events.NewMessage(incoming=True))
    question = await alice.send_message(bob_peer, "question")
    bobs_question = (await asyncio.wait_for(got.get(), 10)).message
    assert bobs_question.text == "question" and bobs_question.id != question.id
    reply = await bob.send_message(await peer_of(bob, alice), "answer", reply_to=bobs_question.id)
    assert reply.reply_to.reply_to_msg_id == bobs_question.id
    [alices_copy] = await alice.get_messages(bob_peer, limit=1)
    assert alices_copy.reply_to.reply_to_msg_id == question.id
    alice_live: asyncio.Queue[Any] = asyncio.Queue()
    alice2 = make_client(session=alice.session.save(), receive_updates=True)
    await alice2.connect()
    await alice2.catch_up()
    alice2.add_event_handler(alice_live.put, events.NewMessage(incoming=True))
    await alice2.get_dialogs()
    again = await bob.send_message(await peer_of(bob, alice), "again", reply_to=bobs_question.id)
    assert again.reply_to.reply_to_msg_id == bobs_question.id
    live = (await asyncio.wait_for(alice_live.get(), 10)).message
    assert live.text == "again" and live.reply_to is not None
    assert live.reply_to.reply_to_msg_id == question.id
