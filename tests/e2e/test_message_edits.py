"""Editing and deleting private messages between unmodified Telethon clients: live on the
peer and the author's other devices (in each receiver's own ids), caught up by an offline
device, deleteHistory in batches, and the RPC errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from services.test_message_edits import bulk_chat
from telethon import errors, events, functions, types

from .conftest import ClientFactory, RunningServer
from .test_messages import peer_of, second_device, sign_in, waiter


async def test_edit_and_delete_reach_the_peer_and_other_devices_live(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    alice_laptop = await second_device(make_client, "+" + (await alice.get_me()).phone)
    bob_peer = await peer_of(alice, bob)
    await bob.send_message("me", "a note")  # bob's ids now run ahead of alice's

    incoming = waiter(bob, events.NewMessage(incoming=True))
    sent = await alice.send_message(bob_peer, "original")
    bob_id = (await asyncio.wait_for(incoming, 10)).message.id
    assert bob_id != sent.id

    edited_at_bob = waiter(bob, events.MessageEdited())
    edited_at_laptop = waiter(alice_laptop, events.MessageEdited())
    answer = await alice.edit_message(bob_peer, sent.id, "edited")
    assert answer.text == "edited" and answer.edit_date is not None
    got = await asyncio.wait_for(edited_at_bob, 10)
    assert (got.message.id, got.message.text, got.message.out) == (bob_id, "edited", False)
    mirror = await asyncio.wait_for(edited_at_laptop, 10)
    assert (mirror.message.id, mirror.message.text) == (sent.id, "edited")

    deleted_at_bob = waiter(bob, events.MessageDeleted())
    deleted_at_laptop = waiter(alice_laptop, events.MessageDeleted())
    [affected] = await alice.delete_messages(bob_peer, [sent.id], revoke=True)
    assert affected.pts_count == 1
    assert (await asyncio.wait_for(deleted_at_bob, 10)).deleted_ids == [bob_id]
    assert (await asyncio.wait_for(deleted_at_laptop, 10)).deleted_ids == [sent.id]


async def test_an_offline_device_sees_edits_and_deletes_applied(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    alice_peer = await peer_of(bob, alice)
    await bob.send_message("me", "a note")  # bob's ids run ahead of alice's
    keep = await alice.send_message(bob_peer, "keep me")
    drop = await alice.send_message(bob_peer, "drop me")
    [drop_at_bob, keep_at_bob] = await bob.get_messages(alice_peer, limit=2)
    assert (keep_at_bob.text, drop_at_bob.text) == ("keep me", "drop me")
    assert keep_at_bob.id != keep.id
    before = await bob(functions.updates.GetStateRequest())
    await bob.disconnect()

    await alice.edit_message(bob_peer, keep.id, "kept, edited")
    await alice.delete_messages(bob_peer, [drop.id], revoke=True)

    await bob.connect()
    # What the device asks for on reconnecting, in the device's own ids. (Telethon 1.x
    # then drops pts-carrying other_updates of an account difference instead of
    # dispatching them, so no MessageEdited/MessageDeleted handler would run here.)
    diff = await bob(
        functions.updates.GetDifferenceRequest(pts=before.pts, date=before.date, qts=0)
    )
    assert isinstance(diff, types.updates.Difference) and diff.new_messages == []
    [edit, delete] = diff.other_updates
    assert isinstance(edit, types.UpdateEditMessage) and edit.pts_count == 1
    assert (edit.message.id, edit.message.message) == (keep_at_bob.id, "kept, edited")
    assert isinstance(delete, types.UpdateDeleteMessages)
    assert (delete.messages, delete.pts_count) == ([drop_at_bob.id], 1)
    assert diff.state.pts == before.pts + 2 == delete.pts
    now = await bob.get_messages(alice_peer, ids=[keep_at_bob.id, drop_at_bob.id])
    [now_kept] = [m for m in now if m is not None]
    assert now_kept.id == keep_at_bob.id and now_kept.text == "kept, edited"
    assert now_kept.edit_date is not None


async def test_clearing_2500_messages_takes_three_calls_and_reaches_the_peer(
    server: RunningServer, make_client: ClientFactory
) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    bob_peer = await peer_of(alice, bob)
    alice_id, bob_id = (await alice.get_me()).id, (await bob.get_me()).id
    # Written straight to the tables: sending 2,500 through the protocol only costs time.
    await bulk_chat(server.resources.db, alice_id, bob_id, 2500)
    bob_live = await second_device(make_client, "+" + (await bob.get_me()).phone)
    seen: set[int] = set()
    everything = asyncio.get_running_loop().create_future()

    async def on_delete(e: Any) -> None:
        seen.update(e.deleted_ids)
        if len(seen) >= 2500 and not everything.done():
            everything.set_result(None)

    bob_live.add_event_handler(on_delete, events.MessageDeleted())

    answers = []
    while True:
        answer = await alice(
            functions.messages.DeleteHistoryRequest(peer=bob_peer, max_id=0, revoke=True)
        )
        answers.append(answer)
        if answer.offset == 0:
            break
    assert [(a.pts_count, a.offset > 0) for a in answers] == [
        (1000, True),
        (1000, True),
        (500, False),
    ]
    await asyncio.wait_for(everything, 30)
    assert seen == set(range(1, 2501))  # bob's own ids of the 2,500
    assert not [d async for d in bob.iter_dialogs() if d.id == alice_id]
    assert await alice.get_messages(bob_peer, limit=1) == []


def error_name(e: errors.RPCError) -> str:
    """The RPC error name (Telethon turns the names it knows into classes)."""
    known = [name for name, cls in errors.rpc_errors_dict.items() if type(e) is cls]
    return known[0] if known else str(e.message)


async def test_errors(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    bob_peer = await peer_of(alice, bob)
    alice_peer = await peer_of(bob, alice)
    sent = await alice.send_message(bob_peer, "text")
    [at_bob] = await bob.get_messages(alice_peer, limit=1)

    def edit(**kw: Any) -> Any:
        kw.setdefault("id", sent.id)
        kw.setdefault("message", "new")
        return functions.messages.EditMessageRequest(peer=bob_peer, **kw)

    cases: list[tuple[Any, Any, str]] = [
        (alice, edit(message="text"), "MESSAGE_NOT_MODIFIED"),
        (alice, edit(id=sent.id + 100), "MESSAGE_ID_INVALID"),
        (alice, edit(schedule_date=2_000_000_000), "SCHEDULE_DATE_INVALID"),
        (alice, edit(quick_reply_shortcut_id=1), "SHORTCUT_INVALID"),
        (
            alice,
            edit(reply_markup=types.ReplyKeyboardHide()),
            "REPLY_MARKUP_INVALID",
        ),
        (
            alice,
            edit(media=types.InputMediaGeoPoint(types.InputGeoPointEmpty())),
            "MEDIA_INVALID",
        ),
        (
            bob,
            functions.messages.EditMessageRequest(peer=alice_peer, id=at_bob.id, message="x"),
            "MESSAGE_AUTHOR_REQUIRED",
        ),
        (alice, functions.messages.DeleteMessagesRequest(id=list(range(1, 1002))), "LIMIT_INVALID"),
    ]
    for client, request, name in cases:
        with pytest.raises(errors.RPCError) as caught:
            await client(request)
        assert error_name(caught.value) == name, request

    # a web page preview is still a text edit
    await alice(edit(message="with a link", media=types.InputMediaWebPage(url="https://x.y")))
    [changed] = await bob.get_messages(alice_peer, ids=[at_bob.id])
    assert changed.text == "with a link"

    await bob(functions.contacts.BlockRequest(id=alice_peer))
    for request, name in (
        (edit(message="blocked"), "EDIT_MESSAGES_FORBIDDEN"),
        (
            functions.messages.DeleteMessagesRequest(id=[sent.id], revoke=True),
            "DELETE_MESSAGES_FORBIDDEN",
        ),
    ):
        with pytest.raises(errors.RPCError) as caught:
            await alice(request)
        assert error_name(caught.value) == name
    # deleting only one's own copy needs nobody's permission
    affected = await alice(functions.messages.DeleteMessagesRequest(id=[sent.id, 0, -3]))
    assert affected.pts_count == 1
    again = await alice(functions.messages.DeleteMessagesRequest(id=[sent.id]))
    assert (again.pts_count, again.pts) == (0, affected.pts)
