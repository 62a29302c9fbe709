"""Per-user limits through Telethon, on a server with small ones: every forwarded copy
counts against the send rate; contacts.importContacts and contacts.resolvePhone
(phone-number enumeration) are limited in calls per minute (FLOOD_WAIT_X) and in
distinct numbers per day (importContacts hands the rest back in retry_contacts); every
album item counts before any is sent; uploads made into media (uploadMedia, sendMedia
with an upload) are limited per minute before their file is read. Other users are not
affected."""

from __future__ import annotations

import io
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from telethon import functions, types
from telethon.crypto import rsa as telethon_rsa

from telesrv.app import open_resources
from telesrv.wiring import build_server

from .conftest import ClientFactory, RunningServer, e2e_settings
from .test_media_files import _jpeg
from .test_messages import peer_of, sign_in
from .test_send_limits import error_of, send

PER_MINUTE = 4
MEDIA_PER_MINUTE = 3
PER_DAY = 5
SENDS_PER_MINUTE = 5
_numbers = itertools.count(19990000001)


@pytest.fixture(scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, redis: Any
) -> AsyncIterator[RunningServer]:
    settings = e2e_settings(
        tmp_path_factory.mktemp("telesrv-lookups"),
        database_url,
        redis_url,
        send_rate_limit=SENDS_PER_MINUTE,
        phone_lookup_rate_limit=PER_MINUTE,
        phone_lookup_daily_limit=PER_DAY,
        media_rate_limit=MEDIA_PER_MINUTE,
    )
    async with open_resources(settings) as resources:
        built = build_server(settings, resources)
        host, port = await built.start(settings.listen_host, settings.listen_port)
        running = RunningServer(settings, resources, built, host, port)
        telethon_rsa.add_key(resources.server_key.public_pem, old=False)
        try:
            yield running
        finally:
            await running.server.stop()


def contacts(numbers: list[str]) -> Any:
    return functions.contacts.ImportContactsRequest(
        contacts=[
            types.InputPhoneContact(client_id=i, phone=n, first_name="x", last_name="")
            for i, n in enumerate(numbers, start=1)
        ]
    )


async def test_resolve_phone_calls_per_minute(make_client: ClientFactory) -> None:
    prober = await sign_in(make_client, updates=False)
    prober.flood_sleep_threshold = 0  # report FLOOD_WAIT instead of sleeping it off
    target = await sign_in(make_client, updates=False)
    phone = (await target.get_me()).phone
    for _ in range(PER_MINUTE):  # the same number again and again: one distinct lookup
        resolved = await prober(functions.contacts.ResolvePhoneRequest(phone=phone))
        assert resolved.users[0].id == (await target.get_me()).id
    assert await error_of(prober(functions.contacts.ResolvePhoneRequest(phone=phone))) == (
        "FLOOD_WAIT"
    )
    # Importing shares the window; another user has their own.
    assert await error_of(prober(contacts(["+15550000001"]))) == "FLOOD_WAIT"
    other = await sign_in(make_client, updates=False)
    await other(functions.contacts.ResolvePhoneRequest(phone=phone))


async def test_distinct_numbers_per_day(make_client: ClientFactory) -> None:
    prober = await sign_in(make_client, updates=False)
    prober.flood_sleep_threshold = 0
    known = await sign_in(make_client, updates=False)
    known_phone = (await known.get_me()).phone
    unknown = [str(next(_numbers)) for _ in range(PER_DAY)]

    # One call with PER_DAY + 1 numbers: the one past the cap comes back to retry.
    answer = await prober(contacts([*unknown[: PER_DAY - 1], known_phone, unknown[-1]]))
    assert [c.user_id for c in answer.imported] == [(await known.get_me()).id]
    assert answer.retry_contacts == [PER_DAY + 1]
    # Numbers already counted today stay free; any new one is refused.
    again = await prober(contacts([known_phone, unknown[0]]))
    assert again.retry_contacts == [] and len(again.imported) == 1
    assert (
        await error_of(prober(functions.contacts.ResolvePhoneRequest(phone=unknown[-1])))
        == "FLOOD_WAIT"
    )
    assert (
        await error_of(prober(functions.contacts.ResolvePhoneRequest(phone=unknown[0])))
        == "PHONE_NOT_OCCUPIED"
    )


async def test_every_forwarded_copy_counts_against_the_send_rate(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client, updates=False)
    alice.flood_sleep_threshold = 0
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    ids = [(await send(alice, peer, f"m{i}")).updates[0].id for i in range(2)]

    def forward(ids: list[int]) -> Any:
        return alice(
            functions.messages.ForwardMessagesRequest(
                from_peer=peer, id=ids, to_peer=types.InputPeerSelf()
            )
        )

    await forward([*ids, ids[0] + 100])  # the missing id is no copy: 2 + 2 = 4
    await forward(ids[:1])  # 5: at the limit
    assert await error_of(forward(ids[:1])) == "FLOOD_WAIT"  # one past
    assert await error_of(send(alice, peer, "x")) == "FLOOD_WAIT"
    await send(bob, await peer_of(bob, alice), "others still send")


def _upload_media(client: Any, peer: Any, uploaded: Any) -> Any:
    return client(
        functions.messages.UploadMediaRequest(
            peer=peer, media=types.InputMediaUploadedPhoto(file=uploaded)
        )
    )


async def test_uploads_made_into_media_per_minute(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    alice.flood_sleep_threshold = 0
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    for i in range(MEDIA_PER_MINUTE):  # at the limit
        await _upload_media(
            alice, peer, await alice.upload_file(_jpeg(20 + i, 20), file_name="p.jpg")
        )
    uploaded = await alice.upload_file(_jpeg(30, 20), file_name="p.jpg")
    assert await error_of(_upload_media(alice, peer, uploaded)) == "FLOOD_WAIT"  # one past
    # sendMedia with an upload shares the window; a photo sent before may still go.
    send_upload = functions.messages.SendMediaRequest(
        peer=peer, media=types.InputMediaUploadedPhoto(file=uploaded), message="", random_id=7
    )
    assert await error_of(alice(send_upload)) == "FLOOD_WAIT"
    # Another user has their own window, and the refused upload was not used up.
    mine = await bob.upload_file(_jpeg(30, 20), file_name="p.jpg")
    await _upload_media(bob, await peer_of(bob, alice), mine)


async def test_every_album_item_counts_before_any_is_sent(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    alice.flood_sleep_threshold = 0
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    image = io.BytesIO(_jpeg(20, 20))
    image.name = "p.jpg"
    photo = (await alice.send_file(peer, image)).photo  # one send
    reuse = types.InputMediaPhoto(
        id=types.InputPhoto(
            id=photo.id, access_hash=photo.access_hash, file_reference=photo.file_reference
        )
    )

    def album(n: int, first: int) -> Any:
        items = [
            types.InputSingleMedia(media=reuse, message="", random_id=first + i) for i in range(n)
        ]
        return alice(functions.messages.SendMultiMediaRequest(peer=peer, multi_media=items))

    await send(alice, peer, "two")
    # 2 + 4 is one past the limit: nothing of the album is sent.
    assert await error_of(album(SENDS_PER_MINUTE - 1, 100)) == "FLOOD_WAIT"
    assert len(await bob.get_messages(await peer_of(bob, alice), limit=10)) == 2
    # 2 + 3 is at it: the album goes whole.
    sent = await album(SENDS_PER_MINUTE - 2, 200)
    assert len([u for u in sent.updates if isinstance(u, types.UpdateNewMessage)]) == 3
    assert len(await bob.get_messages(await peer_of(bob, alice), limit=10)) == 5
