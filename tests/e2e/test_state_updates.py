"""Updates that have no pts (contacts reset, blocks) between two devices of one account,
with unmodified Telethon: pushed live without opening a pts gap, caught up offline
through updates.getDifference; and device activity on a machine booted seconds ago."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest
from telethon import TelegramClient, events, functions, types

from .conftest import ClientFactory, RunningServer

CODE = "12345"
_phones = itertools.count(15557000)


async def sign_in(
    make_client: ClientFactory, phone: str | None = None, *, updates: bool = True
) -> TelegramClient:
    client = make_client(receive_updates=updates)
    await client.start(phone=phone or f"+{next(_phones)}", code_callback=lambda: CODE)
    return client


def count_get_difference(client: TelegramClient) -> list[int]:
    """Counts the account getDifference calls the client makes (its update loop
    included), by wrapping the call every request goes through."""
    calls = [0]
    real = client._call

    async def counted(sender: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(request, functions.updates.GetDifferenceRequest):
            calls[0] += 1
        return await real(sender, request, *args, **kwargs)

    client._call = counted
    return calls


def collect(client: TelegramClient, *kinds: type) -> asyncio.Queue[Any]:
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def handler(update: Any) -> None:
        queue.put_nowait(update)

    client.add_event_handler(handler, events.Raw(list(kinds)))
    return queue


async def test_contact_and_block_changes_reach_the_other_device_without_a_gap(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    alice_me, bob_me = await alice.get_me(), await bob.get_me()
    tablet = await sign_in(make_client, "+" + alice_me.phone)
    diffs = count_get_difference(tablet)
    seen = collect(tablet, types.UpdateContactsReset, types.UpdatePeerBlocked)

    imported = await alice(
        functions.contacts.ImportContactsRequest(
            [
                types.InputPhoneContact(
                    client_id=1, phone=bob_me.phone, first_name="Bob", last_name=""
                )
            ]
        )
    )
    assert [u.id for u in imported.users] == [bob_me.id]
    assert isinstance(await asyncio.wait_for(seen.get(), 10), types.UpdateContactsReset)
    bob_input = types.InputPeerUser(user_id=bob_me.id, access_hash=imported.users[0].access_hash)
    await alice(functions.contacts.BlockRequest(id=bob_input))
    blocked = await asyncio.wait_for(seen.get(), 10)
    assert isinstance(blocked, types.UpdatePeerBlocked) and blocked.blocked
    assert blocked.peer_id == types.PeerUser(bob_me.id)
    await alice(functions.contacts.UnblockRequest(id=bob_input))
    unblocked = await asyncio.wait_for(seen.get(), 10)
    assert isinstance(unblocked, types.UpdatePeerBlocked) and not unblocked.blocked

    # The next message still arrives live, in order, and no catch-up was needed.
    incoming = asyncio.get_running_loop().create_future()

    async def on_message(event: Any) -> None:
        if not incoming.done():
            incoming.set_result(event)

    tablet.add_event_handler(on_message, events.NewMessage(incoming=True))
    await alice(functions.account.UpdateUsernameRequest(f"u{alice_me.id}"))
    await bob.send_message(await bob.get_input_entity(f"u{alice_me.id}"), "after the blocks")
    got = await asyncio.wait_for(incoming, 10)
    assert got.message.text == "after the blocks"
    assert diffs[0] == 0


async def test_an_offline_device_catches_up_on_state_updates(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    alice_me, bob_me = await alice.get_me(), await bob.get_me()
    tablet = await sign_in(make_client, "+" + alice_me.phone, updates=False)
    before = await tablet(functions.updates.GetStateRequest())
    await tablet.disconnect()

    imported = await alice(
        functions.contacts.ImportContactsRequest(
            [
                types.InputPhoneContact(
                    client_id=1, phone=bob_me.phone, first_name="Bob", last_name=""
                )
            ]
        )
    )
    bob_input = types.InputPeerUser(user_id=bob_me.id, access_hash=imported.users[0].access_hash)
    await alice(functions.contacts.BlockRequest(id=bob_input))

    await tablet.connect()
    diff = await tablet(
        functions.updates.GetDifferenceRequest(pts=before.pts, date=before.date, qts=0)
    )
    assert isinstance(diff, types.updates.Difference) and diff.new_messages == []
    reset, block = diff.other_updates
    assert isinstance(reset, types.UpdateContactsReset)
    assert isinstance(block, types.UpdatePeerBlocked) and block.blocked
    assert block.peer_id == types.PeerUser(bob_me.id)
    assert bob_me.id in {u.id for u in diff.users}
    assert diff.state.pts == before.pts  # no pts was taken for them
    # Given once: the next call has nothing more.
    again = await tablet(
        functions.updates.GetDifferenceRequest(pts=diff.state.pts, date=diff.state.date, qts=0)
    )
    assert isinstance(again, types.updates.DifferenceEmpty)


async def test_authorizations_show_the_device_active_on_a_freshly_booted_machine(
    server: RunningServer, make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from telesrv.services import accounts as accounts_module

    class FreshMachineClock:
        """time as on a machine booted seconds ago: monotonic() is small."""

        value = 3.0

        def monotonic(self) -> float:
            self.value += 0.001
            return self.value

        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

    monkeypatch.setattr(accounts_module, "time", FreshMachineClock())
    client = await sign_in(make_client, updates=False)
    me = await client.get_me()
    await server.resources.db.pool.execute(
        "UPDATE authorizations SET active_at = now() - interval '1 day' WHERE user_id = $1", me.id
    )
    await client.disconnect()
    await server.restart()  # a fresh process: nothing cached about the key
    await client.connect()
    listing = await client(functions.account.GetAuthorizationsRequest())
    [current] = [a for a in listing.authorizations if a.current]
    assert current.date_active.timestamp() >= time.time() - 300
