"""Profile photos between kurigram (layer 229) and Telethon: each sets one, each sees and
downloads the other's in both sizes, by the peer as avatars are drawn."""

from __future__ import annotations

import io
import itertools
from typing import Any

import pytest
from PIL import Image
from telethon import functions, types

from .conftest import ClientFactory
from .test_profile_photos import decoded_size, jpeg, upload_photo

pytest.importorskip("pyrogram")
from pyrogram import types as pyro_types  # noqa: E402

from .test_pyrogram import (  # noqa: E402
    CODE,
    PyroFactory,
    make_pyro,
    no_client_warnings,
    server_key_known,
)

# Fixtures used here by name, and those that apply to every test (no warnings logged).
__all__ = ["make_pyro", "no_client_warnings", "server_key_known"]

_phones = itertools.count(15558600)


def new_phone() -> str:
    return f"+{next(_phones)}"


async def test_kurigram_and_telethon_see_and_download_each_others_photos(
    make_pyro: PyroFactory, make_client: ClientFactory
) -> None:
    pyro = make_pyro(new_phone())
    await pyro.start()
    assert pyro.me is not None
    tele = make_client()
    await tele.start(phone=new_phone(), code_callback=lambda: CODE)
    tele_me = await tele.get_me()
    await tele(functions.account.UpdateUsernameRequest(f"t{tele_me.id}"))
    tele_photo = await upload_photo(tele, jpeg(700, 700, (0, 0, 255)))

    # kurigram sets its own photo (photos.uploadProfilePhoto) and lists it.
    photo = io.BytesIO(jpeg(800, 800, (255, 0, 0)))
    photo.name = "me.jpg"
    assert await pyro.set_profile_photo(photo=pyro_types.InputChatPhotoStatic(photo))
    public = io.BytesIO(jpeg(300, 300, (9, 9, 9)))
    public.name = "public.jpg"
    assert await pyro.set_profile_photo(
        photo=pyro_types.InputChatPhotoStatic(public), is_public=True
    )
    own = [p async for p in pyro.get_chat_photos("me")]
    assert len(own) == 1  # the public (fallback) photo is not listed

    # kurigram sees Telethon's photo and downloads both sizes by the peer.
    peer = await pyro.get_users(f"t{tele_me.id}")
    assert peer is not None and peer.photo is not None
    for file_id, side in ((peer.photo.big_file_id, 640), (peer.photo.small_file_id, 160)):
        data = await pyro.download_media(file_id, in_memory=True)
        assert isinstance(data, io.BytesIO)
        with Image.open(data) as image:
            assert image.size == (side, side)
    listed = [p async for p in pyro.get_chat_photos(tele_me.id)]
    assert len(listed) == 1

    # Telethon sees kurigram's photo once it has met the user (a message) and downloads it.
    await pyro.send_message(tele_me.id, "hi")
    dialogs = await tele.get_dialogs()
    kuri: Any = next(d.entity for d in dialogs if d.entity.id == pyro.me.id)
    assert isinstance(kuri.photo, types.UserProfilePhoto) and kuri.photo.dc_id == 2
    assert decoded_size(await tele.download_profile_photo(kuri, bytes)) == (640, 640)
    assert tele_photo.photo.id != kuri.photo.photo_id
