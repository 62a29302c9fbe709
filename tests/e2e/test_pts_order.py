"""A user's pts events reach their other devices in pts order when the outbox workers
are slow: a write pushes its own events right after its commit, so a read is pushed
before the message sent just after it, and the device sees no gap (Telethon asks for
the difference when a gap lasts half a second)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from telethon import functions, types

from telesrv.store import outbox as outbox_store

from .conftest import ClientFactory
from .test_chat_list import setup
from .test_state_updates import collect, count_get_difference

# Longer than Telethon waits for a gap to fill before it asks for the difference.
WORKER_DELAY = 1.0


def late_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every outbox worker claims a second late from now on."""
    claim = outbox_store.claim_batch_txn

    async def late(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(WORKER_DELAY)
        return await claim(*args, **kwargs)

    monkeypatch.setattr(outbox_store, "claim_batch_txn", late)


async def test_a_read_reaches_the_other_device_before_the_message_sent_after_it(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, tablet, (bob, _, dave), (bob_in, _, dave_in) = await setup(make_client)
    diffs = count_get_difference(tablet)
    seen = collect(tablet, types.UpdateReadHistoryInbox, types.UpdateNewMessage)
    late_workers(monkeypatch)
    await alice(functions.messages.ReadHistoryRequest(peer=dave_in, max_id=0))
    await alice.send_message(bob_in, "right after the read")
    read = await asyncio.wait_for(seen.get(), 10)
    sent = await asyncio.wait_for(seen.get(), 10)
    assert isinstance(read, types.UpdateReadHistoryInbox) and read.peer == types.PeerUser(dave)
    assert isinstance(sent, types.UpdateNewMessage)
    assert sent.message.message == "right after the read" and sent.message.peer_id.user_id == bob
    assert sent.pts == read.pts + 1
    # Past Telethon's gap timeout, and past the workers' delay: nothing looked like a gap.
    await asyncio.sleep(WORKER_DELAY + 0.5)
    assert diffs[0] == 0
    assert seen.empty()


async def test_a_reply_reaches_the_other_device_before_the_message_sent_after_it(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reply is not pushed from what the send has in hand (its box in the
    recipient's ids is looked up inside the send): its rows are held, and its events
    read back after its commit."""
    alice, tablet, (bob, _, _), (bob_in, _, _) = await setup(make_client)
    diffs = count_get_difference(tablet)
    seen = collect(tablet, types.UpdateNewMessage)
    first = await alice.send_message(bob_in, "to be answered")
    shown = await asyncio.wait_for(seen.get(), 10)
    assert shown.message.message == "to be answered"
    late_workers(monkeypatch)

    await alice.send_message(bob_in, "the reply", reply_to=first.id)
    await alice.send_message(bob_in, "and one more")
    reply = await asyncio.wait_for(seen.get(), 10)
    after = await asyncio.wait_for(seen.get(), 10)
    assert reply.message.message == "the reply" and reply.message.reply_to.reply_to_msg_id
    assert after.message.message == "and one more" and after.pts == reply.pts + 1
    await asyncio.sleep(WORKER_DELAY + 0.5)
    assert diffs[0] == 0
    assert seen.empty()


PTS_KINDS = (
    types.UpdateNewMessage,
    types.UpdateEditMessage,
    types.UpdateDeleteMessages,
    types.UpdatePinnedMessages,
    types.UpdateFolderPeers,
)


@pytest.mark.parametrize("write", ["edit", "delete", "pin", "archive"])
async def test_each_write_reaches_the_other_device_before_the_message_sent_after_it(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    alice, tablet, _, (bob_in, _, dave_in) = await setup(make_client)
    diffs = count_get_difference(tablet)
    seen = collect(tablet, *PTS_KINDS)
    first = await alice.send_message(bob_in, "written to")
    shown = await asyncio.wait_for(seen.get(), 10)
    late_workers(monkeypatch)

    writes = {
        "edit": lambda: alice.edit_message(bob_in, first.id, "edited"),
        "delete": lambda: alice.delete_messages(bob_in, [first.id]),
        "pin": lambda: alice.pin_message(bob_in, first.id, notify=False),
        "archive": lambda: alice(
            functions.folders.EditPeerFoldersRequest([types.InputFolderPeer(dave_in, 1)])
        ),
    }
    await writes[write]()
    await alice.send_message(bob_in, "sent after it")
    got: list[Any] = []
    while not (got and isinstance(got[-1], types.UpdateNewMessage)):
        got.append(await asyncio.wait_for(seen.get(), 10))
    # Every update in pts order, each right after the one before: no gap.
    pts = shown.pts
    for update in got:
        assert update.pts == pts + update.pts_count, (write, got)
        pts = update.pts
    assert got[-1].message.message == "sent after it"
    assert len(got) >= 2, got
    await asyncio.sleep(WORKER_DELAY + 0.5)
    assert diffs[0] == 0
