"""Profile photos: made square in the sizes lists and profiles show, each user's list kept
in order and bounded, the avatar a viewer sees chosen as personal > profile > fallback
> none, every change told to the devices whose view changed (state log) and forgotten by
the projection cache."""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import MakeServer
from PIL import Image

from telesrv.parts import AccountServices, Parts
from telesrv.server import Server
from telesrv.services.accounts import Origin
from telesrv.services.errors import (
    ContactIdInvalid,
    FileIdInvalid,
    FileReferenceEmpty,
    FileReferenceExpired,
    FloodWait,
    ImageProcessFailed,
    LocationInvalid,
    PhotoIdInvalid,
    PhotoInvalidDimensions,
)
from telesrv.services.files import MAX_PHOTO_FILE, FileLocation, MediaFiles
from telesrv.services.privacy import PrivacyKey, Rule, RuleKind
from telesrv.services.profile_photos import MAX_PROFILE_PHOTOS, ProfilePhotos
from telesrv.services.update_log import EventType
from telesrv.services.uploads import KIB, MAX_PART_SIZE, UploadedFile, Uploads
from telesrv.store import files as file_store
from telesrv.store import profile_photos as photo_store
from telesrv.store import state_log
from telesrv.store.db import Db
from telesrv.store.files import DC_ID, PhotoRow

SECRET = b"profile-photos-test-secret-0123"
NOW = 1_800_000_000
ORIGIN = Origin(auth_key_id=5, session_id=6)
_phones = itertools.count(15551700000)
_file_ids = itertools.count(1)
_photo_ids = itertools.count(9_100_000_000)


@dataclass
class World:
    svc: AccountServices
    media: MediaFiles
    uploads: Uploads
    photos: ProfilePhotos


def world_of(server: Server) -> World:
    assert server.accounts is not None and server.parts is not None
    parts = server.parts
    return World(server.accounts, parts.media_files, parts.uploads, parts.profile_photos)


@pytest.fixture
def world(wired: Server) -> World:
    return world_of(wired)


async def new_user(w: World, name: str = "User") -> int:
    return (await w.svc.users.create(f"+{next(_phones)}", name)).user_id


def jpeg(
    width: int = 800, height: int = 600, colour: tuple[int, int, int] = (200, 30, 40)
) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "JPEG")
    return out.getvalue()


async def upload(w: World, user: int, data: bytes, *, big: bool = False) -> UploadedFile:
    file_id = next(_file_ids)
    parts = [data[i : i + MAX_PART_SIZE] for i in range(0, len(data), MAX_PART_SIZE)]
    for index, part in enumerate(parts):
        await w.uploads.save_part(
            user, file_id, index, part, total_parts=len(parts) if big else None
        )
    return UploadedFile(file_id, len(parts), "p.jpg", big=big)


async def set_photo(w: World, user: int, *, fallback: bool = False, data: bytes = b"") -> PhotoRow:
    file = await upload(w, user, data or jpeg())
    return await w.photos.upload(user, file, fallback=fallback, now=NOW, origin=ORIGIN)


async def test_a_profile_photo_is_square_in_the_sizes_lists_and_profiles_show(
    world: World,
) -> None:
    alice = await new_user(world, "Alice")
    photo = await set_photo(world, alice, data=jpeg(1000, 700))
    sizes = {s.type: (s.w, s.h) for s in photo.size_rows()}
    assert sizes == {"a": (160, 160), "c": (640, 640)}
    assert photo.stripped and photo.stripped[0] == 1  # the stripped preview's header
    assert photo.dc_id == DC_ID
    # A small image is not enlarged: its one size serves as both.
    small = await set_photo(world, alice, data=jpeg(120, 90))
    assert [(s.type, s.w, s.h) for s in small.size_rows()] == [("a", 90, 90)]


async def test_every_viewer_sees_the_photo_and_the_owners_devices_are_told(
    world: World, db: Db
) -> None:
    alice, bob = await new_user(world, "Alice"), await new_user(world, "Bob")
    before = await state_log.head(db.pool, alice)
    assert (await world.svc.projection.view(bob, alice, NOW)).photo is None  # type: ignore[union-attr]
    photo = await set_photo(world, alice)
    # The cached (empty) projection was dropped with the change.
    seen = await world.svc.projection.view(bob, alice, NOW)
    assert seen is not None and seen.photo is not None
    assert (seen.photo.photo_id, seen.photo.stripped, seen.photo.personal) == (
        photo.id,
        photo.stripped,
        False,
    )
    assert seen.photo.dc_id == DC_ID
    events = await state_log.events_after(db.pool, alice, before, 10)
    assert [(e.event_type, e.peer_user_id) for _, e in events] == [(EventType.USER_PHOTO, alice)]


async def test_personal_over_profile_over_fallback_over_none(world: World, db: Db) -> None:
    alice, bob, carol = [await new_user(world, n) for n in ("Alice", "Bob", "Carol")]
    fallback = await set_photo(world, alice, fallback=True)
    assert (await world.svc.projection.view(bob, alice, NOW)).photo.photo_id == fallback.id  # type: ignore[union-attr]
    main = await set_photo(world, alice)
    assert (await world.svc.projection.view(bob, alice, NOW)).photo.photo_id == main.id  # type: ignore[union-attr]

    # A personal photo needs a contact.
    with pytest.raises(ContactIdInvalid):
        await world.photos.set_personal(
            bob, alice, await upload(world, bob, jpeg()), now=NOW, origin=ORIGIN
        )
    await world.svc.contacts.add_contact(bob, alice, "Al", "")
    bob_head = await state_log.head(db.pool, bob)
    personal = await world.photos.set_personal(
        bob, alice, await upload(world, bob, jpeg(300, 300)), now=NOW, origin=ORIGIN
    )
    assert personal is not None
    by_bob = await world.svc.projection.view(bob, alice, NOW)
    assert by_bob is not None and by_bob.photo is not None
    assert (by_bob.photo.photo_id, by_bob.photo.personal) == (personal.id, True)
    events = await state_log.events_after(db.pool, bob, bob_head, 10)
    assert [(e.event_type, e.peer_user_id) for _, e in events] == [(EventType.USER_PHOTO, alice)]
    # Only Bob sees it: Alice and Carol see her own photo.
    assert (await world.svc.projection.view(alice, alice, NOW)).photo.photo_id == main.id  # type: ignore[union-attr]
    assert (await world.svc.projection.view(carol, alice, NOW)).photo.photo_id == main.id  # type: ignore[union-attr]
    full = await world.photos.full(bob, alice)
    assert (full.profile, full.personal, full.fallback) == (main, personal, fallback)
    assert (await world.photos.full(carol, alice)).personal is None

    # Deleting the profile photo shows the fallback; removing the personal one too.
    assert await world.photos.delete(alice, [(main.id, main.access_hash)], ORIGIN) == [main.id]
    assert (await world.svc.projection.view(carol, alice, NOW)).photo.photo_id == fallback.id  # type: ignore[union-attr]
    assert await world.photos.set_personal(bob, alice, None, now=NOW, origin=ORIGIN) is None
    assert (await world.svc.projection.view(bob, alice, NOW)).photo.photo_id == fallback.id  # type: ignore[union-attr]
    await world.photos.set_current(alice, None, fallback=True, origin=ORIGIN)
    assert (await world.svc.projection.view(bob, alice, NOW)).photo is None  # type: ignore[union-attr]


async def test_the_profile_photo_rules_show_the_fallback_to_those_refused(
    world: World, parts: Parts
) -> None:
    alice, bob, carol = [await new_user(world, n) for n in ("Alice", "Bob", "Carol")]
    fallback = await set_photo(world, alice, fallback=True)
    main = await set_photo(world, alice)
    await world.svc.contacts.add_contact(alice, bob, "Bob", "")  # Bob is Alice's contact
    rules = [Rule(RuleKind.ALLOW_CONTACTS)]
    await parts.privacy.set_rules(alice, PrivacyKey.PROFILE_PHOTO, rules, ORIGIN, NOW)

    async def seen_by(viewer: int) -> int | None:
        view = await world.svc.projection.view(viewer, alice, NOW)
        assert view is not None
        return view.photo.photo_id if view.photo is not None else None

    assert await seen_by(bob) == main.id
    assert await seen_by(carol) == fallback.id  # refused: the public photo
    assert await seen_by(alice) == main.id
    # Downloads follow the same decision.
    access = world.media.photo_access
    assert access is not None
    assert await access(bob, main.id)
    assert not await access(carol, main.id)
    assert await access(carol, fallback.id)


async def test_choosing_listing_and_deleting_keep_the_order(world: World) -> None:
    alice, bob = await new_user(world, "Alice"), await new_user(world, "Bob")
    first, second, third = [await set_photo(world, alice) for _ in range(3)]

    async def listed(viewer: int = bob, **page: int) -> tuple[int, list[int]]:
        args = {"offset": 0, "max_id": 0, "limit": 100} | page
        total, rows = await world.photos.photos(viewer, alice, **args)
        return total, [r.id for r in rows]

    assert await listed() == (3, [third.id, second.id, first.id])
    assert await listed(limit=1) == (3, [third.id])
    assert await listed(offset=1, limit=1) == (3, [second.id])
    assert await listed(max_id=third.id) == (3, [second.id, first.id])
    assert await listed(max_id=second.id, limit=5) == (3, [first.id])
    assert await listed(max_id=12345) == (3, [])  # not one of hers: nothing after it

    # An earlier photo chosen again becomes current and first.
    await world.photos.set_current(
        alice, (first.id, first.access_hash), fallback=False, origin=ORIGIN
    )
    assert (await world.svc.projection.view(bob, alice, NOW)).photo.photo_id == first.id  # type: ignore[union-attr]
    assert await listed() == (3, [first.id, third.id, second.id])
    # Not one of hers, or a wrong access hash: refused.
    other = await set_photo(world, bob)
    with pytest.raises(PhotoIdInvalid):
        await world.photos.set_current(
            alice, (other.id, other.access_hash), fallback=False, origin=ORIGIN
        )
    with pytest.raises(FileIdInvalid):
        await world.photos.set_current(
            alice, (first.id, first.access_hash ^ 1), fallback=False, origin=ORIGIN
        )
    mine_elsewhere = await world.media.photo_from_upload(
        alice, await upload(world, alice, jpeg()), NOW
    )
    with pytest.raises(PhotoIdInvalid):
        await world.photos.set_current(
            alice, (mine_elsewhere.id, mine_elsewhere.access_hash), fallback=False, origin=ORIGIN
        )
    # Removing the current one (none shown), then deleting: the list stays.
    await world.photos.set_current(alice, None, fallback=False, origin=ORIGIN)
    assert (await world.svc.projection.view(bob, alice, NOW)).photo is None  # type: ignore[union-attr]
    await world.photos.set_current(
        alice, (third.id, third.access_hash), fallback=False, origin=ORIGIN
    )
    # Deleting the current photo shows the next; a wrong hash deletes nothing.
    assert await world.photos.delete(alice, [(third.id, third.access_hash + 1)], ORIGIN) == []
    assert await world.photos.delete(alice, [(third.id, third.access_hash)], ORIGIN) == [third.id]
    assert (await world.svc.projection.view(bob, alice, NOW)).photo.photo_id == first.id  # type: ignore[union-attr]
    assert await listed() == (2, [first.id, second.id])
    # Bob cannot delete Alice's photos.
    assert await world.photos.delete(bob, [(first.id, first.access_hash)], ORIGIN) == []


async def _insert_photo(db: Db, owner: int) -> int:
    photo_id = next(_photo_ids)
    row = PhotoRow(photo_id, 1, b"r" * 16, owner, NOW, DC_ID, False, None, [])
    await file_store.insert_photo(db.pool, row)
    return photo_id


async def test_a_user_keeps_at_most_the_bound_of_photos(world: World, db: Db) -> None:
    alice = await new_user(world, "Alice")
    ids = [await _insert_photo(db, alice) for _ in range(MAX_PROFILE_PHOTOS + 1)]

    async def add(photo_id: int) -> list[int]:
        async def txn(conn: Any) -> list[int]:
            return await photo_store.add_photo_txn(
                conn, alice, photo_id, fallback=False, keep=MAX_PROFILE_PHOTOS
            )

        return await db.run_txn("add_profile_photo", txn)

    for photo_id in ids[:MAX_PROFILE_PHOTOS]:
        assert await add(photo_id) == []
    assert await photo_store.count_photos(db.pool, alice) == MAX_PROFILE_PHOTOS  # at the bound
    # One past it: the oldest falls off the list (and no longer counts as hers).
    assert await add(ids[-1]) == [ids[0]]
    assert await photo_store.count_photos(db.pool, alice) == MAX_PROFILE_PHOTOS
    assert await photo_store.profile_photo_user(db.pool, ids[0]) is None
    assert await photo_store.profile_photo_user(db.pool, ids[-1]) == (alice, False)


async def test_photo_bytes_at_and_past_the_bound(world: World) -> None:
    alice = await new_user(world, "Alice")
    image = jpeg(64, 64)
    # Bytes after a JPEG's end are ignored by decoders: the file is exactly the bound.
    at_bound = image + b"\0" * (MAX_PHOTO_FILE - len(image))
    photo = await set_photo(world, alice, data=at_bound)
    assert photo.size_rows()
    past = await upload(world, alice, at_bound + b"\0", big=True)
    with pytest.raises(ImageProcessFailed):
        await world.photos.upload(alice, past, fallback=False, now=NOW, origin=ORIGIN)


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (1, 2, 3)).save(out, "PNG")
    return out.getvalue()


async def test_dimensions_at_and_past_the_bound(world: World) -> None:
    alice = await new_user(world, "Alice")
    photo = await set_photo(world, alice, data=png(9000, 1000))  # width + height = 10,000
    assert [(s.w, s.h) for s in photo.size_rows()] == [(160, 160), (640, 640)]
    with pytest.raises(PhotoInvalidDimensions):
        await set_photo(world, alice, data=png(9001, 1000))
    await set_photo(world, alice, data=png(2000, 100))  # 20:1
    with pytest.raises(PhotoInvalidDimensions):
        await set_photo(world, alice, data=png(2001, 100))


async def test_downloads_follow_who_may_see_the_photo(world: World) -> None:
    alice, bob = await new_user(world, "Alice"), await new_user(world, "Bob")
    main = await set_photo(world, alice, data=jpeg(1000, 1000))
    for big, size in ((True, "c"), (False, "a")):
        location = await world.photos.peer_photo_location(bob, alice, main.id, big)
        assert location.thumb_size == size
        chunk = await world.media.read(bob, location, 0, 512 * KIB, False)
        assert chunk.jpeg and chunk.data.startswith(b"\xff\xd8")
    # Named by the photo itself too (as getUserPhotos and getFullUser give it).
    named = FileLocation("photo", main.id, main.access_hash, main.file_reference, "a")
    assert (await world.media.read(bob, named, 0, 4 * KIB, False)).data
    # File references are checked as for a message's photo.
    for reference, refusal in ((b"", FileReferenceEmpty), (b"x" * 16, FileReferenceExpired)):
        stale = FileLocation("photo", main.id, main.access_hash, reference, "a")
        with pytest.raises(refusal):
            await world.media.read(bob, stale, 0, 4 * KIB, False)
    # A photo of Bob's named as Alice's is no location.
    bobs = await set_photo(world, bob)
    with pytest.raises(LocationInvalid):
        await world.photos.peer_photo_location(alice, alice, bobs.id, True)
    # Bob's personal photo for Alice: his to download, not hers.
    await world.svc.contacts.add_contact(bob, alice, "Al", "")
    personal = await world.photos.set_personal(
        bob, alice, await upload(world, bob, jpeg()), now=NOW, origin=ORIGIN
    )
    assert personal is not None
    await world.photos.peer_photo_location(bob, alice, personal.id, True)
    with pytest.raises(LocationInvalid):
        await world.photos.peer_photo_location(alice, alice, personal.id, True)
    hidden = FileLocation("photo", personal.id, personal.access_hash, personal.file_reference, "a")
    with pytest.raises(FileIdInvalid):
        await world.media.read(alice, hidden, 0, 4 * KIB, False)
    # A deleted photo is no longer anyone's to see.
    await world.photos.delete(alice, [(main.id, main.access_hash)], ORIGIN)
    with pytest.raises(FileIdInvalid):
        await world.media.read(bob, named, 0, 4 * KIB, False)


async def test_the_unsent_media_collector_keeps_profile_and_personal_photos(
    world: World, db: Db
) -> None:
    alice, bob = await new_user(world, "Alice"), await new_user(world, "Bob")
    main = await set_photo(world, alice)
    await world.svc.contacts.add_contact(bob, alice, "Al", "")
    personal = await world.photos.set_personal(
        bob, alice, await upload(world, bob, jpeg()), now=NOW, origin=ORIGIN
    )
    assert personal is not None
    await db.run_txn("gc", file_store.delete_unsent_media_txn, NOW + 10 * 86_400, 10_000)
    assert await file_store.get_photo(db.pool, main.id) is not None
    assert await file_store.get_photo(db.pool, personal.id) is not None


async def test_changes_count_against_the_media_rate(make_server: MakeServer) -> None:
    w = world_of(make_server(media_rate_limit=3))
    svc = w.svc
    alice = await new_user(w, "Alice")
    photo = await set_photo(w, alice)  # 1
    await w.photos.set_current(alice, None, fallback=False, origin=ORIGIN)  # 2
    chosen = (photo.id, photo.access_hash)
    await w.photos.set_current(alice, chosen, fallback=False, origin=ORIGIN)  # 3: at the rate
    with pytest.raises(FloodWait):  # one past it
        await w.photos.set_current(alice, None, fallback=False, origin=ORIGIN)
    with pytest.raises(FloodWait):
        await w.photos.delete(alice, [chosen], ORIGIN)
    seen = await svc.projection.view(alice, alice, NOW)
    assert seen is not None and seen.photo is not None and seen.photo.photo_id == photo.id


async def test_a_user_who_blocked_the_viewer_shows_only_the_fallback_photo(
    world: World, parts: Parts
) -> None:
    alice, bob = await new_user(world, "Alice"), await new_user(world, "Bob")
    fallback = await set_photo(world, alice, fallback=True)
    main = await set_photo(world, alice)
    await world.svc.contacts.block(alice, bob, NOW)
    seen = await world.svc.projection.view(bob, alice, NOW)
    assert seen is not None and seen.photo is not None and seen.photo.photo_id == fallback.id
    access = world.media.photo_access
    assert access is not None and not await access(bob, main.id)
    assert not await parts.privacy.shows(bob, alice, PrivacyKey.ABOUT)
    # Bob blocking Alice hides nothing of hers from him.
    await world.svc.contacts.unblock(alice, bob)
    await world.svc.contacts.block(bob, alice, NOW)
    seen = await world.svc.projection.view(bob, alice, NOW)
    assert seen is not None and seen.photo is not None and seen.photo.photo_id == main.id
