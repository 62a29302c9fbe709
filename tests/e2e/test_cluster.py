"""Two server processes on different ports sharing one PostgreSQL and Redis.

Process 1 runs in the test's event loop (the module's ``server``); process 2 is a real
``telesrv serve`` subprocess on the same database, Redis and data directory (the
server key), so it can be killed. Server salts differ per process: a client moving
from one to the other gets one bad_server_salt, which Telethon handles.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from serve_process import dev_flags, serve_args, serving
from telethon import TelegramClient, events, functions, types
from telethon.errors import AuthKeyUnregisteredError
from telethon.network import ConnectionTcpFull
from telethon.sessions import StringSession

from telesrv.store import cluster as cluster_store

from .conftest import API_HASH, API_ID, ClientFactory, RunningServer

CODE = "12345"
GUARD = 30.0  # only against a hang
_phones = itertools.count(15559100)


def second_args(server: RunningServer) -> list[str]:
    """`telesrv serve` joining ``server``: same database, Redis and server key."""
    settings = server.settings
    assert settings.database_url is not None and settings.redis_url is not None
    return serve_args(
        settings.data_dir,
        *dev_flags(CODE),
        database_url=settings.database_url,
        redis_url=settings.redis_url,
    )


@pytest.fixture
async def second(
    server: RunningServer, tmp_path: Path
) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    async with serving(second_args(server), tmp_path / "second.log") as serve:
        # Process 1 knows process 2 before the test starts pushing.
        async with asyncio.timeout(GUARD):
            while not server.server.cluster.peers:
                await asyncio.sleep(0.01)
        yield serve.process, serve.port


@pytest.fixture
async def clients() -> AsyncIterator[list[TelegramClient]]:
    made: list[TelegramClient] = []
    yield made
    for client in made:
        await client.disconnect()


def client_on(
    made: list[TelegramClient], port: int, *, updates: bool = True, session: str | None = None
) -> TelegramClient:
    client = TelegramClient(
        StringSession(session), API_ID, API_HASH, connection=ConnectionTcpFull,
        receive_updates=updates, request_retries=2, connection_retries=5, retry_delay=0,
        timeout=10,
    )  # fmt: skip
    client.session.set_dc(2, "127.0.0.1", port)
    made.append(client)
    return client


async def sign_in(client: TelegramClient, phone: str) -> TelegramClient:
    await client.start(phone=phone, code_callback=lambda: CODE)
    return client


async def peer_of(client: TelegramClient, other: TelegramClient) -> Any:
    me = await other.get_me()
    username = f"c{me.id}"
    if me.username != username:
        await other(functions.account.UpdateUsernameRequest(username))
    return await client.get_input_entity(username)


async def registered(server: RunningServer, user_id: int, holders: int) -> None:
    """Wait until ``holders`` processes have registered sessions of the user."""
    redis = server.resources.redis
    async with asyncio.timeout(GUARD):
        while await redis.zcard(cluster_store.holders_key(user_id)) < holders:
            await asyncio.sleep(0.01)


def waiter(client: TelegramClient, event: Any) -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def handler(e: Any) -> None:
        if not future.done():
            future.set_result(e)

    client.add_event_handler(handler, event)
    return future


async def test_a_message_through_one_process_reaches_devices_on_the_other(
    server: RunningServer,
    second: tuple[asyncio.subprocess.Process, int],
    clients: list[TelegramClient],
    make_client: ClientFactory,
) -> None:
    _, port2 = second
    alice_phone, bob_phone = f"+{next(_phones)}", f"+{next(_phones)}"
    alice = await sign_in(client_on(clients, server.port), alice_phone)
    bob = await sign_in(client_on(clients, port2), bob_phone)
    alice_laptop = await sign_in(client_on(clients, port2), alice_phone)
    bob_peer = await peer_of(alice, bob)
    await alice_laptop.get_dialogs()  # a request with updates: the laptop wants pushes
    await bob.get_dialogs()
    alice_id = (await alice.get_me()).id
    bob_id = (await bob.get_me()).id
    await registered(server, bob_id, 1)
    await registered(server, alice_id, 2)

    incoming = waiter(bob, events.NewMessage(incoming=True))
    mirrored = waiter(alice_laptop, events.NewMessage(outgoing=True))
    sent = await alice.send_message(bob_peer, "across processes")

    got = await asyncio.wait_for(incoming, GUARD)
    assert got.message.text == "across processes" and got.message.sender_id == alice_id
    copy = await asyncio.wait_for(mirrored, GUARD)
    assert copy.message.text == "across processes" and copy.message.id == sent.id


async def test_a_device_reset_through_one_process_fails_on_the_other(
    server: RunningServer,
    second: tuple[asyncio.subprocess.Process, int],
    clients: list[TelegramClient],
    make_client: ClientFactory,
) -> None:
    _, port2 = second
    phone = f"+{next(_phones)}"
    phone_device = await sign_in(client_on(clients, server.port, updates=False), phone)
    tablet = await sign_in(client_on(clients, port2, updates=False), phone)
    state = await tablet(functions.updates.GetStateRequest())  # works, and caches the login
    assert isinstance(state, types.updates.State)

    found = await phone_device(functions.account.GetAuthorizationsRequest())
    others = [a for a in found.authorizations if not a.current]
    assert len(others) == 1
    assert await phone_device(functions.account.ResetAuthorizationRequest(hash=others[0].hash))

    async with asyncio.timeout(GUARD):
        while True:
            try:
                await tablet(functions.updates.GetStateRequest())
            except AuthKeyUnregisteredError:
                break
            except ConnectionError:
                pass  # process 2 closed the reset key's connection; Telethon reconnects
            await asyncio.sleep(0.02)
    # The phone itself goes on, on either process.
    assert await phone_device(functions.updates.GetStateRequest())


async def test_killing_the_second_process_mid_stream_loses_no_message(
    server: RunningServer,
    second: tuple[asyncio.subprocess.Process, int],
    clients: list[TelegramClient],
    make_client: ClientFactory,
) -> None:
    process2, port2 = second
    alice = await sign_in(client_on(clients, server.port, updates=False), f"+{next(_phones)}")
    bob = await sign_in(client_on(clients, port2), f"+{next(_phones)}")
    bob_peer = await peer_of(alice, bob)
    await bob.get_dialogs()
    await registered(server, (await bob.get_me()).id, 1)

    total, kill_after = 30, 8
    seen: list[str] = []
    some = asyncio.get_running_loop().create_future()
    everything = asyncio.get_running_loop().create_future()

    async def collect(e: Any) -> None:
        seen.append(e.message.text)
        if len(set(seen)) >= kill_after and not some.done():
            some.set_result(None)
        if len(set(seen)) >= total and not everything.done():
            everything.set_result(None)

    bob.add_event_handler(collect, events.NewMessage(incoming=True))

    async def stream() -> None:
        for i in range(total):
            await alice(
                functions.messages.SendMessageRequest(
                    peer=bob_peer, message=f"k{i}", random_id=7000 + i
                )
            )
            if i == kill_after:
                await asyncio.wait_for(some, GUARD)  # bob is receiving live from process 2

    sending = asyncio.ensure_future(stream())
    await asyncio.wait_for(some, GUARD)
    process2.kill()  # no cleanup: its registrations and in-memory sessions just vanish
    await process2.wait()
    await bob.disconnect()
    await sending

    bob.session.set_dc(2, "127.0.0.1", server.port)
    await bob.connect()
    await bob.catch_up()
    await asyncio.wait_for(everything, GUARD)
    assert sorted(set(seen)) == sorted(f"k{i}" for i in range(total))
    history = await bob.get_messages(await peer_of(bob, alice), limit=100)
    assert sorted(m.message for m in history) == sorted(f"k{i}" for i in range(total))


async def test_a_profile_change_on_one_process_is_seen_through_the_other(
    server: RunningServer,
    second: tuple[asyncio.subprocess.Process, int],
    clients: list[TelegramClient],
    make_client: ClientFactory,
) -> None:
    _, port2 = second
    alice = await sign_in(client_on(clients, server.port, updates=False), f"+{next(_phones)}")
    bob = await sign_in(client_on(clients, port2, updates=False), f"+{next(_phones)}")
    bob_peer = await peer_of(alice, bob)
    bob_user = types.InputUser(bob_peer.user_id, bob_peer.access_hash)

    async def name_seen_by_alice() -> str:
        [user] = await alice(functions.users.GetUsersRequest([bob_user]))
        return str(user.first_name)

    first = await name_seen_by_alice()  # now cached in process 1
    assert first == await name_seen_by_alice()
    await bob(functions.account.UpdateProfileRequest(first_name="Robert"))
    async with asyncio.timeout(GUARD):
        while await name_seen_by_alice() != "Robert":
            await asyncio.sleep(0.02)


async def test_typing_through_one_process_reaches_the_peer_on_the_other(
    server: RunningServer,
    second: tuple[asyncio.subprocess.Process, int],
    clients: list[TelegramClient],
    make_client: ClientFactory,
) -> None:
    _, port2 = second
    alice = await sign_in(client_on(clients, server.port, updates=False), f"+{next(_phones)}")
    bob = await sign_in(client_on(clients, port2), f"+{next(_phones)}")
    bob_peer = await peer_of(alice, bob)
    await bob.get_dialogs()
    await registered(server, (await bob.get_me()).id, 1)
    typing = waiter(bob, events.UserUpdate())
    await alice(functions.messages.SetTypingRequest(bob_peer, types.SendMessageTypingAction()))
    event = await asyncio.wait_for(typing, GUARD)
    assert event.typing and event.user_id == (await alice.get_me()).id


async def test_a_photo_set_through_one_process_is_seen_and_pushed_through_the_other(
    server: RunningServer,
    second: tuple[asyncio.subprocess.Process, int],
    clients: list[TelegramClient],
    make_client: ClientFactory,
) -> None:
    from .test_profile_photos import jpeg, upload_photo

    _, port2 = second
    alice = await sign_in(client_on(clients, server.port), f"+{next(_phones)}")
    bob = await sign_in(client_on(clients, port2), f"+{next(_phones)}")
    bob_peer = await peer_of(alice, bob)
    await alice.send_message(bob_peer, "hi")  # Bob has Alice in his dialogs
    bob_user = types.InputUser(bob_peer.user_id, bob_peer.access_hash)
    await alice.get_dialogs()
    await registered(server, (await alice.get_me()).id, 1)

    async def photo_seen_by_alice() -> Any:
        [user] = await alice(functions.users.GetUsersRequest([bob_user]))
        return user.photo

    assert isinstance(await photo_seen_by_alice(), types.UserProfilePhotoEmpty)  # cached
    pushed = waiter(alice, events.Raw(types.UpdateUser))
    answer = await upload_photo(bob, jpeg(300, 300, (5, 5, 5)))
    update = await asyncio.wait_for(pushed, GUARD)
    assert update.user_id == bob_peer.user_id
    # Her process forgets its cached view (the bus may bring that after the push).
    async with asyncio.timeout(GUARD):
        while getattr(await photo_seen_by_alice(), "photo_id", None) != answer.photo.id:
            await asyncio.sleep(0.02)


async def test_status_and_privacy_across_processes(
    server: RunningServer,
    second: tuple[asyncio.subprocess.Process, int],
    clients: list[TelegramClient],
    make_client: ClientFactory,
) -> None:
    _, port2 = second
    alice = await sign_in(client_on(clients, server.port, updates=False), f"+{next(_phones)}")
    bob = await sign_in(client_on(clients, port2), f"+{next(_phones)}")
    alice_peer = await peer_of(bob, alice)
    await bob(functions.contacts.AddContactRequest(alice_peer, "Alice", "", ""))
    await registered(server, (await bob.get_me()).id, 1)
    status = waiter(bob, events.Raw(types.UpdateUserStatus))
    # Alice's status, changed through process 1, reaches Bob on process 2 live.
    await alice(functions.account.UpdateStatusRequest(offline=False))
    pushed = await asyncio.wait_for(status, GUARD)
    assert pushed.user_id == alice_peer.user_id
    assert isinstance(pushed.status, types.UserStatusOnline)

    # Bob hides his last seen through process 2: process 1 forgets what it had cached.
    await bob(functions.account.UpdateStatusRequest(offline=False))
    bob_peer = await peer_of(alice, bob)
    bob_user = types.InputUser(bob_peer.user_id, bob_peer.access_hash)
    [seen] = await alice(functions.users.GetUsersRequest([bob_user]))
    assert isinstance(seen.status, types.UserStatusOnline)
    await bob(
        functions.account.SetPrivacyRequest(
            key=types.InputPrivacyKeyStatusTimestamp(),
            rules=[types.InputPrivacyValueDisallowAll()],
        )
    )
    async with asyncio.timeout(GUARD):
        while True:
            [seen] = await alice(functions.users.GetUsersRequest([bob_user]))
            if isinstance(seen.status, types.UserStatusRecently):
                break
            await asyncio.sleep(0.02)
