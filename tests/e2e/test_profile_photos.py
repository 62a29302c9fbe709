"""Profile photos with unmodified Telethon: Alice's photo reaches Bob in dialogs, history
and getFullUser and downloads in both sizes; a personal photo Bob sets for Alice is his
alone; deleting her photo shows her fallback; the change reaches her other devices (live
and through getDifference) and Bob's online sessions."""

from __future__ import annotations

import asyncio
import io
import itertools
from typing import Any

from PIL import Image
from telethon import TelegramClient, events, functions, types

from .conftest import ClientFactory
from .test_send_limits import error_of

CODE = "12345"
_phones = itertools.count(15558400)
THIS_DC = 2  # what help.getConfig answers as this_dc


async def sign_in(
    make_client: ClientFactory, phone: str | None = None, *, updates: bool = True
) -> TelegramClient:
    client = make_client(receive_updates=updates)
    await client.start(phone=phone or f"+{next(_phones)}", code_callback=lambda: CODE)
    return client


def jpeg(width: int, height: int, colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "JPEG")
    return out.getvalue()


def collect(client: TelegramClient, kind: type) -> asyncio.Queue[Any]:
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def handler(update: Any) -> None:
        queue.put_nowait(update)

    client.add_event_handler(handler, events.Raw(kind))
    return queue


async def upload_photo(client: TelegramClient, data: bytes, *, fallback: bool = False) -> Any:
    file = await client.upload_file(data, file_name="me.jpg")
    return await client(functions.photos.UploadProfilePhotoRequest(file=file, fallback=fallback))


async def befriend(alice: TelegramClient, bob: TelegramClient) -> tuple[Any, Any]:
    """Alice and Bob in each other's dialogs (one message); each one's entity of the other."""
    bob_me = await bob.get_me()
    await bob(functions.account.UpdateUsernameRequest(f"u{bob_me.id}"))
    bob_entity = await alice.get_input_entity(f"u{bob_me.id}")
    await alice.send_message(bob_entity, "hello")
    alice_id = (await alice.get_me()).id
    dialogs = await bob.get_dialogs()
    alice_entity = next(d.entity for d in dialogs if d.entity.id == alice_id)
    return bob_entity, alice_entity


def decoded_size(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as image:
        return image.size


async def test_alices_photo_reaches_bob_everywhere_and_downloads_in_both_sizes(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    alice_me = await alice.get_me()
    laptop = await sign_in(make_client, "+" + alice_me.phone)
    _, alice_at_bob = await befriend(alice, bob)
    assert isinstance(alice_at_bob.photo, types.UserProfilePhotoEmpty)
    bob_hears = collect(bob, types.UpdateUser)
    laptop_hears = collect(laptop, types.UpdateUser)

    answer = await upload_photo(alice, jpeg(900, 700, (250, 20, 20)))
    photo = answer.photo
    by_type = {s.type: s for s in photo.sizes}
    assert isinstance(by_type["i"], types.PhotoStrippedSize)
    assert (by_type["a"].w, by_type["a"].h, by_type["c"].w, by_type["c"].h) == (160, 160, 640, 640)
    assert photo.dc_id == THIS_DC
    assert answer.users[0].id == alice_me.id and answer.users[0].photo.photo_id == photo.id

    # Live: Bob (who has her in his dialogs) and her other device.
    for queue in (bob_hears, laptop_hears):
        update = await asyncio.wait_for(queue.get(), 10)
        assert update.user_id == alice_me.id

    def check(user: Any) -> None:
        assert isinstance(user.photo, types.UserProfilePhoto)
        assert user.photo.photo_id == photo.id and user.photo.dc_id == THIS_DC
        assert user.photo.stripped_thumb == by_type["i"].bytes
        assert not user.photo.has_video and not user.photo.personal

    dialogs = await bob(
        functions.messages.GetDialogsRequest(
            offset_date=None, offset_id=0, offset_peer=types.InputPeerEmpty(), limit=10, hash=0
        )
    )
    check(next(u for u in dialogs.users if u.id == alice_me.id))
    history = await bob(
        functions.messages.GetHistoryRequest(
            peer=alice_at_bob,
            offset_id=0,
            offset_date=None,
            add_offset=0,
            limit=10,
            max_id=0,
            min_id=0,
            hash=0,
        )
    )
    check(next(u for u in history.users if u.id == alice_me.id))
    full = await bob(functions.users.GetFullUserRequest(alice_at_bob))
    check(full.users[0])
    assert full.full_user.profile_photo.id == photo.id
    assert full.full_user.personal_photo is None and full.full_user.fallback_photo is None

    # Both sizes, by the peer (as apps draw avatars) and by the photo (as in a profile).
    fresh = await bob.get_entity(alice_at_bob)
    big = await bob.download_profile_photo(fresh, bytes, download_big=True)
    small = await bob.download_profile_photo(fresh, bytes, download_big=False)
    assert decoded_size(big) == (640, 640)
    assert decoded_size(small) == (160, 160)
    listed = await bob(
        functions.photos.GetUserPhotosRequest(alice_at_bob, offset=0, max_id=0, limit=10)
    )
    assert isinstance(listed, types.photos.Photos) and [p.id for p in listed.photos] == [photo.id]
    assert decoded_size(await bob.download_media(listed.photos[0], bytes)) == (640, 640)


async def test_an_offline_device_learns_of_the_new_photo_from_get_difference(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client, updates=False)
    alice_me = await alice.get_me()
    tablet = await sign_in(make_client, "+" + alice_me.phone, updates=False)
    before = await tablet(functions.updates.GetStateRequest())
    await tablet.disconnect()
    answer = await upload_photo(alice, jpeg(300, 300, (0, 90, 200)))
    await tablet.connect()
    diff = await tablet(
        functions.updates.GetDifferenceRequest(pts=before.pts, date=before.date, qts=0)
    )
    assert isinstance(diff, types.updates.Difference)
    assert [type(u) for u in diff.other_updates] == [types.UpdateUser]
    assert diff.other_updates[0].user_id == alice_me.id
    me = next(u for u in diff.users if u.id == alice_me.id)
    assert me.photo.photo_id == answer.photo.id
    assert diff.state.pts == before.pts  # no pts taken


async def test_bobs_personal_photo_for_alice_is_his_alone(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    alice_me = await alice.get_me()
    _, alice_at_bob = await befriend(alice, bob)
    own = await upload_photo(alice, jpeg(200, 200, (10, 200, 10)))
    file = await bob.upload_file(jpeg(200, 200, (1, 2, 250)), file_name="al.jpg")

    # Only for a contact.
    refused = bob(functions.photos.UploadContactProfilePhotoRequest(alice_at_bob, file=file))
    assert await error_of(refused) == "CONTACT_ID_INVALID"
    await bob(
        functions.contacts.AddContactRequest(
            alice_at_bob, first_name="Al", last_name="", phone="", add_phone_privacy_exception=False
        )
    )
    file = await bob.upload_file(jpeg(200, 200, (1, 2, 250)), file_name="al.jpg")
    set_ = await bob(functions.photos.UploadContactProfilePhotoRequest(alice_at_bob, file=file))
    personal = set_.photo
    assert set_.users[0].photo.photo_id == personal.id and set_.users[0].photo.personal

    seen_by_bob = (await bob(functions.users.GetUsersRequest([alice_at_bob])))[0]
    assert seen_by_bob.photo.photo_id == personal.id and seen_by_bob.photo.personal
    full = await bob(functions.users.GetFullUserRequest(alice_at_bob))
    assert full.full_user.personal_photo.id == personal.id
    assert full.full_user.profile_photo.id == own.photo.id
    small = await bob.download_profile_photo(seen_by_bob, bytes, download_big=False)
    assert decoded_size(small) == (160, 160)

    seen_by_alice = (await alice(functions.users.GetUsersRequest([types.InputUserSelf()])))[0]
    assert seen_by_alice.photo.photo_id == own.photo.id and not seen_by_alice.photo.personal
    # Alice can neither download it by her own id nor by the photo.
    location = types.InputPeerPhotoFileLocation(
        peer=types.InputPeerSelf(), photo_id=personal.id, big=True
    )
    refused = alice(functions.upload.GetFileRequest(location, offset=0, limit=4096))
    assert await error_of(refused) == "LOCATION_INVALID"
    by_photo = types.InputPhotoFileLocation(
        id=personal.id,
        access_hash=personal.access_hash,
        file_reference=personal.file_reference,
        thumb_size="a",
    )
    refused = alice(functions.upload.GetFileRequest(by_photo, offset=0, limit=4096))
    assert await error_of(refused) == "FILE_ID_INVALID"

    # ``save`` without a file takes it away again; ``suggest`` is refused.
    removed = await bob(functions.photos.UploadContactProfilePhotoRequest(alice_at_bob, save=True))
    assert isinstance(removed.photo, types.PhotoEmpty)
    assert removed.users[0].photo.photo_id == own.photo.id
    file = await bob.upload_file(jpeg(200, 200, (1, 2, 250)), file_name="al.jpg")
    suggested = bob(
        functions.photos.UploadContactProfilePhotoRequest(alice_at_bob, suggest=True, file=file)
    )
    assert await error_of(suggested) == "PHOTO_SUGGEST_UNSUPPORTED"
    assert alice_me.id == seen_by_alice.id


async def test_deleting_the_photo_shows_the_fallback(make_client: ClientFactory) -> None:
    # With updates: Telethon reads a Vector<long> answer (deletePhotos) wrongly when it
    # wraps the request in invokeWithoutUpdates.
    alice = await sign_in(make_client)
    bob = await sign_in(make_client, updates=False)
    alice_me = await alice.get_me()
    _, alice_at_bob = await befriend(alice, bob)
    fallback = await upload_photo(alice, jpeg(200, 200, (90, 90, 90)), fallback=True)
    main = await upload_photo(alice, jpeg(200, 200, (200, 0, 200)))
    seen = (await bob(functions.users.GetUsersRequest([alice_at_bob])))[0]
    assert seen.photo.photo_id == main.photo.id

    input_photo = types.InputPhoto(
        id=main.photo.id,
        access_hash=main.photo.access_hash,
        file_reference=main.photo.file_reference,
    )
    assert await alice(functions.photos.DeletePhotosRequest([input_photo])) == [main.photo.id]
    seen = (await bob(functions.users.GetUsersRequest([alice_at_bob])))[0]
    assert seen.photo.photo_id == fallback.photo.id
    full = await bob(functions.users.GetFullUserRequest(alice_at_bob))
    assert full.full_user.profile_photo is None
    assert full.full_user.fallback_photo.id == fallback.photo.id
    assert decoded_size(await bob.download_profile_photo(seen, bytes, download_big=True)) == (
        200,
        200,
    )
    # Choosing none again: her own view shows the fallback too.
    await alice(functions.photos.UpdateProfilePhotoRequest(id=types.InputPhotoEmpty()))
    mine = (await alice(functions.users.GetUsersRequest([types.InputUserSelf()])))[0]
    assert mine.id == alice_me.id and mine.photo.photo_id == fallback.photo.id


async def test_refusals_are_clear(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    video = await alice.upload_file(b"\0" * 2048, file_name="v.mp4")
    refused = alice(functions.photos.UploadProfilePhotoRequest(video=video))
    assert await error_of(refused) == "VIDEO_PROFILE_PHOTO_UNSUPPORTED"
    assert await error_of(alice(functions.photos.UploadProfilePhotoRequest())) == (
        "PHOTO_FILE_MISSING"
    )
    not_image = await alice.upload_file(b"not an image" * 100, file_name="x.jpg")
    refused = alice(functions.photos.UploadProfilePhotoRequest(file=not_image))
    assert await error_of(refused) == "IMAGE_PROCESS_FAILED"
    stranger = types.InputPhoto(id=12345, access_hash=1, file_reference=b"x")
    refused = alice(functions.photos.UpdateProfilePhotoRequest(id=stranger))
    assert await error_of(refused) == "FILE_ID_INVALID"
    pages = alice(
        functions.photos.GetUserPhotosRequest(types.InputUserSelf(), offset=0, max_id=0, limit=101)
    )
    assert await error_of(pages) == "LIMIT_INVALID"
    many = [types.InputPhoto(id=i, access_hash=0, file_reference=b"") for i in range(101)]
    assert await error_of(alice(functions.photos.DeletePhotosRequest(many))) == "LIMIT_INVALID"
    assert await alice(functions.photos.DeletePhotosRequest(many[:100])) == []
