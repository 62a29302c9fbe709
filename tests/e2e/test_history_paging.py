"""History, search and dialogs as unmodified Telethon pages through them: messages sent in
one burst (so many share a second), Telegram's offset window, a cleared chat, and pages
cut to the answer byte budget."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from telethon import TelegramClient, functions, types

from telesrv.services.history import MAX_ANSWER_BYTES
from telesrv.store.messages import MESSAGE_OVERHEAD_BYTES

from .conftest import ClientFactory
from .test_messages import peer_of, sign_in

_phones = itertools.count(15557000)


async def burst(client: TelegramClient, peer: Any, texts: list[str]) -> list[int]:
    """Send every text at once (in chunks of 50 in flight); the sender's ids, ascending."""
    ids: list[int] = []
    for start in range(0, len(texts), 50):
        sent = await asyncio.gather(
            *(client.send_message(peer, t) for t in texts[start : start + 50])
        )
        ids += [m.id for m in sent]
    assert len(set(ids)) == len(texts)
    return sorted(ids)


def history(peer: Any, **kw: Any) -> Any:
    args: dict[str, Any] = dict(
        peer=peer, offset_id=0, offset_date=None, add_offset=0, limit=20, max_id=0, min_id=0
    )
    args.update(kw)
    return functions.messages.GetHistoryRequest(hash=0, **args)


async def test_a_burst_of_250_pages_back_completely_both_ways(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client, f"+{next(_phones)}")
    bob = await sign_in(make_client, f"+{next(_phones)}")
    bob_peer = await peer_of(alice, bob)
    sent = await burst(alice, bob_peer, [f"burst {i}" for i in range(250)])
    dates = [m.date async for m in alice.iter_messages(bob_peer, limit=250, wait_time=0)]
    assert len(set(dates)) < len(dates)  # messages share seconds, page boundaries too

    newest_first = await alice.get_messages(bob_peer, limit=None, wait_time=0)
    assert [m.id for m in newest_first] == sent[::-1]
    assert newest_first.total == 250
    assert [m.id for m in await alice.get_messages(bob_peer, limit=200, wait_time=0)] == (
        sent[::-1][:200]
    )
    oldest_first = [m.id async for m in alice.iter_messages(bob_peer, reverse=True, wait_time=0)]
    assert oldest_first == sent
    # The recipient's ids are its own; its history is as complete.
    alice_peer = await peer_of(bob, alice)
    received = [m.id async for m in bob.iter_messages(alice_peer, wait_time=0)]
    assert len(received) == len(set(received)) == 250
    assert [m.id async for m in bob.iter_messages(alice_peer, reverse=True)] == received[::-1]
    # Search pages by id the same way.
    found = [m.id async for m in alice.iter_messages(bob_peer, search="burst", wait_time=0)]
    assert found == sent[::-1]
    everywhere = [m.id async for m in alice.iter_messages(None, search="burst", wait_time=0)]
    assert everywhere == sent[::-1]
    reverse_search = [
        m.id async for m in alice.iter_messages(bob_peer, search="burst", reverse=True)
    ]
    assert reverse_search == sent


async def test_negative_add_offset_from_the_top_is_the_newest_page(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client, f"+{next(_phones)}")
    bob = await sign_in(make_client, f"+{next(_phones)}")
    bob_peer = await peer_of(alice, bob)
    sent = await burst(alice, bob_peer, [f"m{i}" for i in range(40)])

    page = await alice(history(bob_peer, add_offset=-5, limit=20))
    assert [m.id for m in page.messages] == sent[::-1][:15]  # the window [-5, 15)
    assert page.count == 40
    around = await alice(history(bob_peer, offset_id=sent[20], add_offset=-3, limit=6))
    assert [m.id for m in around.messages] == sent[17:23][::-1]


async def test_a_cleared_chat_stays_in_the_dialogs(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, f"+{next(_phones)}")
    bob = await sign_in(make_client, f"+{next(_phones)}")
    carol = await sign_in(make_client, f"+{next(_phones)}")
    bob_peer = await peer_of(alice, bob)
    carol_peer = await peer_of(alice, carol)
    await alice.send_message(bob_peer, "to be cleared")
    await alice.send_message(carol_peer, "stays")

    done = await alice(
        functions.messages.DeleteHistoryRequest(peer=bob_peer, max_id=0, just_clear=True)
    )
    assert done.offset == 0
    assert await alice.get_messages(bob_peer, limit=10) == []
    dialogs = await alice.get_dialogs()
    by_id = {d.id: d for d in dialogs}
    bob_id, carol_id = (await bob.get_me()).id, (await carol.get_me()).id
    assert set(by_id) == {bob_id, carol_id}
    assert by_id[bob_id].message is None and by_id[bob_id].dialog.top_message == 0
    assert by_id[carol_id].message.message == "stays"
    # A full delete, by contrast, removes it.
    await alice(functions.messages.DeleteHistoryRequest(peer=carol_peer, max_id=0))
    assert [d.id for d in await alice.get_dialogs()] == [bob_id]
    # A new message brings the cleared chat its top message again.
    await bob.send_message(await peer_of(bob, alice), "back")
    dialogs = await alice.get_dialogs()
    assert [d.message.message for d in dialogs] == ["back"]


async def test_pages_stop_at_the_answer_byte_budget(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, f"+{next(_phones)}")
    bob = await sign_in(make_client, f"+{next(_phones)}")
    bob_peer = await peer_of(alice, bob)
    # 4096 code points of 4 bytes each: the longest text a message may have, by bytes.
    text = "\U0001f600" * 4089 + " needle"
    size = len(text.encode()) + MESSAGE_OVERHEAD_BYTES
    fits = MAX_ANSWER_BYTES // size
    assert 30 < fits < 100
    # Telethon stops paging newest first once a page's newest id is <= the limit (it
    # takes ids as starting at 1 in every chat): alice's ids here start above that.
    await burst(alice, "me", ["note"] * 101)
    sent = await burst(alice, bob_peer, [text] * 100)

    page = await alice(history(bob_peer, limit=100))
    assert isinstance(page, types.messages.MessagesSlice)
    assert [m.id for m in page.messages] == sent[::-1][:fits]  # at the budget, not past it
    assert page.count == 100
    # The budget is reached again from where the page stopped; the rest is short.
    rest = await alice(history(bob_peer, offset_id=page.messages[-1].id, limit=100))
    assert [m.id for m in rest.messages] == sent[::-1][fits : 2 * fits]
    # Telethon pages on through the slices.
    assert [m.id for m in await alice.get_messages(bob_peer, limit=None)] == sent[::-1]
    assert [m.id async for m in alice.iter_messages(bob_peer, reverse=True)] == sent

    found = await alice(
        functions.messages.SearchRequest(
            peer=bob_peer,
            q="needle",
            filter=types.InputMessagesFilterEmpty(),
            min_date=None,
            max_date=None,
            offset_id=0,
            add_offset=0,
            limit=100,
            max_id=0,
            min_id=0,
            hash=0,
        )
    )
    assert isinstance(found, types.messages.MessagesSlice)
    assert len(found.messages) == fits and found.count == 100
    assert len([m async for m in alice.iter_messages(bob_peer, search="needle")]) == 100
    # Only text messages here: every listed dialog still comes, its top message too.
    dialogs = await alice.get_dialogs()
    assert [d.message.id for d in dialogs] == [sent[-1], 101]
