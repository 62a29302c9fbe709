"""A Pyrogram-family client (kurigram, layer 229) against a real gateway: sign-in, a message
each way with a Telethon peer, history and dialogs, catching up after being offline.

kurigram is the ``pyrogram`` package. It takes the server's address from its session storage
(pinned here) and its RSA keys from ``pyrogram.crypto.rsa.server_public_keys``.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from telethon import events, functions, types

from telesrv.mtproto.rsa import rsa_fingerprint

from .conftest import ClientFactory, RunningServer
from .test_media_files import _jpeg

pyrogram = pytest.importorskip("pyrogram")
from pyrogram import Client, enums, filters, handlers  # noqa: E402
from pyrogram.crypto import rsa as pyrogram_rsa  # noqa: E402
from pyrogram.enums import MessagesFilter  # noqa: E402
from pyrogram.storage import SQLiteStorage  # noqa: E402

CODE = "12345"
API_ID = 1
API_HASH = "0" * 32
_phones = itertools.count(15552000)


def new_phone() -> str:
    return f"+{next(_phones)}"


class PinnedStorage(SQLiteStorage):
    """Session storage whose DC address is always the test server (kurigram writes Telegram's
    own addresses into a new session): in memory, or a file under ``workdir``."""

    def __init__(self, name: str, host: str, port: int, workdir: Path | None = None):
        super().__init__(name, workdir=workdir or Path("."), in_memory=workdir is None)
        self._host = host
        self._port = port

    async def server_address(self, value: Any = object) -> Any:
        return self._host if value is object else None

    async def port(self, value: Any = object) -> Any:
        return self._port if value is object else None


@pytest.fixture(scope="module", autouse=True)
def server_key_known(server: RunningServer) -> Iterator[None]:
    key = server.resources.server_key
    fingerprint = rsa_fingerprint(key.n, key.e)
    pyrogram_rsa.server_public_keys[fingerprint] = pyrogram_rsa.PublicKey(key.n, key.e)
    yield
    pyrogram_rsa.server_public_keys.pop(fingerprint, None)


PyroFactory = Callable[..., Client]


@pytest.fixture
async def make_pyro(server: RunningServer) -> AsyncIterator[PyroFactory]:
    """``make_pyro(phone, name=None, workdir=None, skip_updates=True)``: a client to
    ``start()``; those still connected are stopped after the test."""
    clients: list[Client] = []

    def build(
        phone: str, name: str | None = None, workdir: Path | None = None, skip_updates: bool = True
    ) -> Client:
        name = name or f"k{len(clients)}"
        client = Client(
            name,
            api_id=API_ID,
            api_hash=API_HASH,
            phone_number=phone,
            phone_code=CODE,
            storage_engine=PinnedStorage(name, server.host, server.port, workdir),
            skip_updates=skip_updates,
            sleep_threshold=0,
            max_concurrent_transmissions=1,
            no_updates=False,
        )
        clients.append(client)
        return client

    yield build
    for client in clients:
        if client.is_connected:
            await client.stop()


@pytest.fixture(autouse=True)
def no_client_warnings(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The gateway issue: Pyrogram-family clients connect without errors in their logs."""
    caplog.set_level(logging.WARNING)
    yield
    bad = [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.split(".")[0] in ("pyrogram", "telesrv")
    ]
    assert not bad, bad


def first_message(client: Client) -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def on_message(_: Client, message: Any) -> None:
        if not future.done():
            future.set_result(message)

    client.add_handler(handlers.MessageHandler(on_message, filters.incoming))
    return future


async def test_sign_in_and_get_me(make_pyro: PyroFactory) -> None:
    phone = new_phone()
    client = make_pyro(phone)
    await client.start()  # send_code + sign_in: auto_register creates the account
    me = await client.get_me()
    assert me.is_self and not me.is_bot
    assert me.phone_number == phone.lstrip("+")
    assert client.me is not None and me.id == client.me.id
    # users.getUsers with a resolved InputPeerSelf, as Pyrogram sends it
    same = await client.get_users("me")
    assert same is not None and same.id == me.id


async def test_messages_both_ways_with_a_telethon_peer(
    make_pyro: PyroFactory, make_client: ClientFactory
) -> None:
    pyro = make_pyro(new_phone())
    incoming = first_message(pyro)
    await pyro.start()
    assert pyro.me is not None
    tele = make_client(receive_updates=True)
    await tele.start(phone=new_phone(), code_callback=lambda: CODE)
    tele_me = await tele.get_me()
    await tele(functions.account.UpdateUsernameRequest(f"t{tele_me.id}"))

    # Resolving a username then users.getUsers with the InputPeerUser it gave.
    peer = await pyro.get_users(f"t{tele_me.id}")
    assert peer is not None and peer.id == tele_me.id

    tele_got: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def on_tele(event: Any) -> None:
        if not tele_got.done():
            tele_got.set_result(event)

    tele.add_event_handler(on_tele, events.NewMessage(incoming=True))
    sent = await pyro.send_message(peer.id, "hello from pyrogram")
    assert sent is not None and sent.chat is not None
    assert sent.outgoing and sent.text == "hello from pyrogram" and sent.chat.id == tele_me.id
    got = await asyncio.wait_for(tele_got, 10)
    assert got.message.text == "hello from pyrogram" and got.message.sender_id == pyro.me.id

    await tele.get_dialogs()  # caches the sender's access hash for the reply
    await tele.send_message(pyro.me.id, "hello from telethon")
    received = await asyncio.wait_for(incoming, 10)
    assert received.text == "hello from telethon"
    assert received.from_user.id == tele_me.id and received.chat.id == tele_me.id
    assert not received.outgoing

    history = [m async for m in pyro.get_chat_history(tele_me.id)]
    assert [m.text for m in history] == ["hello from telethon", "hello from pyrogram"]
    assert [m.id for m in history] == [received.id, sent.id]
    dialogs = [d async for d in pyro.get_dialogs()]
    assert [(d.chat.id, d.top_message.id, d.unread_messages_count) for d in dialogs] == [
        (tele_me.id, received.id, 1)
    ]
    assert await pyro.read_chat_history(tele_me.id)


async def test_catches_up_after_being_offline(
    make_pyro: PyroFactory, make_client: ClientFactory, tmp_path: Path
) -> None:
    phone = new_phone()
    # A file session: it keeps the update state (pts) between runs, as a real bot's does.
    pyro = make_pyro(phone, name="offline", workdir=tmp_path, skip_updates=False)
    await pyro.start()
    assert pyro.me is not None
    pyro_id = pyro.me.id
    await pyro.set_username(f"k{pyro_id}")
    await pyro.stop()

    tele = make_client()
    await tele.start(phone=new_phone(), code_callback=lambda: CODE)
    await tele.send_message(f"k{pyro_id}", "while you were away")

    again = make_pyro(phone, name="offline", workdir=tmp_path, skip_updates=False)
    missed = first_message(again)
    await again.start()  # updates.getDifference from the pts saved by the first run
    message = await asyncio.wait_for(missed, 10)
    assert message.text == "while you were away" and message.chat.id == (await tele.get_me()).id


# -- photos and documents ------------------------------------------------------------


async def _telethon_with_username(make_client: ClientFactory) -> tuple[Any, Any]:
    tele = make_client(receive_updates=True)
    await tele.start(phone=new_phone(), code_callback=lambda: CODE)
    me = await tele.get_me()
    await tele(functions.account.UpdateUsernameRequest(f"t{me.id}"))
    return tele, me


async def test_kurigram_photo_to_telethon_and_a_document_back(
    make_pyro: PyroFactory, make_client: ClientFactory
) -> None:
    pyro = make_pyro(new_phone())
    incoming = first_message(pyro)
    await pyro.start()
    assert pyro.me is not None
    tele, tele_me = await _telethon_with_username(make_client)
    peer = await pyro.get_users(f"t{tele_me.id}")
    assert peer is not None

    got: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def on_tele(event: Any) -> None:
        if not got.done():
            got.set_result(event.message)

    tele.add_event_handler(on_tele, events.NewMessage(incoming=True))
    photo = io.BytesIO(_jpeg(900, 600))
    photo.name = "view.jpg"
    sent = await pyro.send_photo(peer.id, photo, caption="from kurigram")
    assert sent is not None and sent.photo is not None and sent.caption == "from kurigram"
    message = await asyncio.wait_for(got, 10)
    assert message.photo is not None and message.text == "from kurigram"
    data = await tele.download_media(message, bytes)
    assert data[:2] == b"\xff\xd8"  # a JPEG
    assert (message.photo.sizes[-1].w, message.photo.sizes[-1].h) == (900, 600)

    await tele.get_dialogs()  # caches kurigram's access hash
    content = os.urandom(1_500_000)
    document = io.BytesIO(content)
    document.name = "notes.bin"
    await tele.send_file(pyro.me.id, document, force_document=True)
    received = await asyncio.wait_for(incoming, 10)
    assert received.document is not None and received.document.file_name == "notes.bin"
    downloaded = await pyro.download_media(received, in_memory=True)
    assert isinstance(downloaded, io.BytesIO)
    assert bytes(downloaded.getbuffer()) == content


# -- people and pins ---------------------------------------------------------------------


async def test_kurigram_pins_for_both_sides_and_finds_people(
    make_pyro: PyroFactory, make_client: ClientFactory
) -> None:
    pyro = make_pyro(new_phone())
    await pyro.start()
    assert pyro.me is not None
    tele, tele_me = await _telethon_with_username(make_client)
    await tele(functions.account.UpdateProfileRequest(first_name="Tomasz", last_name="Pinsker"))
    peer = await pyro.get_users(f"t{tele_me.id}")
    assert peer is not None
    sent = await pyro.send_message(peer.id, "pin this")
    assert sent is not None
    await tele.get_dialogs()
    pins: asyncio.Queue[Any] = asyncio.Queue()

    async def on_pin(update: Any) -> None:
        pins.put_nowait(update)

    tele.add_event_handler(on_pin, events.Raw(types.UpdatePinnedMessages))

    await pyro.pin_chat_message(peer.id, sent.id, both_sides=True)

    live = await asyncio.wait_for(pins.get(), 10)
    assert live.pinned and live.peer == types.PeerUser(pyro.me.id)
    [theirs] = await tele.get_messages(pyro.me.id, limit=1)
    assert theirs.pinned and live.messages == [theirs.id]
    pinned = [m async for m in pyro.search_messages(peer.id, filter=MessagesFilter.PINNED)]
    assert [m.id for m in pinned] == [sent.id]

    found = await pyro.search_contacts("pinsk")
    assert [c.id for c in found.global_results or []] == [tele_me.id]
    assert not found.my_results


# -- privacy and live status ----------------------------------------------------------


async def test_kurigram_sees_status_live_then_as_telethon_alice_hides_it(
    make_pyro: PyroFactory, make_client: ClientFactory
) -> None:
    alice, alice_me = await _telethon_with_username(make_client)
    bob = make_pyro(new_phone())
    statuses: asyncio.Queue[Any] = asyncio.Queue()

    async def on_status(_: Client, user: Any) -> None:
        statuses.put_nowait(user)

    bob.add_handler(handlers.UserStatusHandler(on_status))
    await bob.start()
    assert await bob.add_contact(f"t{alice_me.id}", "Alice")

    await alice(functions.account.UpdateStatusRequest(offline=False))
    online = await asyncio.wait_for(statuses.get(), 10)
    assert online.id == alice_me.id and online.status is enums.UserStatus.ONLINE

    for key in (types.InputPrivacyKeyStatusTimestamp(), types.InputPrivacyKeyPhoneNumber()):
        await alice(
            functions.account.SetPrivacyRequest(
                key=key, rules=[types.InputPrivacyValueDisallowAll()]
            )
        )
    seen = await bob.get_users(alice_me.id)
    assert seen.status is enums.UserStatus.RECENTLY and seen.phone_number is None
