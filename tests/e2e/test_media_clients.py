"""Media as a new Telethon user meets it: every common kind sent with send_file and
downloaded by the recipient, the shared-media filters, caption edits pushed live,
deletes revoking access, and protected media that cannot be sent on by id."""

from __future__ import annotations

import asyncio
import io
import os
from typing import Any

import pytest
from PIL import Image
from telethon import errors, events, functions, types

from .conftest import ClientFactory
from .test_messages import peer_of, sign_in, waiter


def _named(data: bytes, name: str) -> io.BytesIO:
    f = io.BytesIO(data)
    f.name = name
    return f


def _png(w: int, h: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGBA", (w, h), (200, 10, 10, 128)).save(out, "PNG")
    return out.getvalue()


def _gif() -> bytes:
    out = io.BytesIO()
    frames = [Image.new("P", (32, 24), i) for i in range(3)]
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:], loop=0)
    return out.getvalue()


def _location(m: Any) -> Any:
    if m.document is not None:
        d = m.document
        return types.InputDocumentFileLocation(
            id=d.id, access_hash=d.access_hash, file_reference=d.file_reference, thumb_size=""
        )
    p = m.photo
    return types.InputPhotoFileLocation(
        id=p.id,
        access_hash=p.access_hash,
        file_reference=p.file_reference,
        thumb_size=p.sizes[-1].type,
    )


async def test_every_common_kind_arrives_and_downloads(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    alice_peer = await peer_of(bob, alice)
    png = await alice.send_file(bob_peer, _named(_png(300, 200), "a.png"))
    gif = _gif()
    await alice.send_file(bob_peer, _named(gif, "a.gif"))
    mp4 = b"\0\0\0\x18ftypmp42" + os.urandom(3000)
    await alice.send_file(bob_peer, _named(mp4, "v.mp4"))
    ogg = b"OggS" + os.urandom(900)
    await alice.send_file(bob_peer, _named(ogg, "n.ogg"), voice_note=True)
    raw = _png(30, 20)
    await alice.send_file(bob_peer, _named(raw, "raw.png"), force_document=True)
    await alice.send_file(
        bob_peer, _named(_png(40, 30), "c.png"), caption="**bold** cap", parse_mode="md"
    )
    await alice.send_file(bob_peer, _named(_png(50, 30), "r.png"), reply_to=png.id)

    got = list(reversed(await bob.get_messages(alice_peer, limit=10)))
    assert len(got) == 7
    kinds = [(type(m.media).__name__, m.file.name, m.file.mime_type) for m in got]
    assert kinds == [
        ("MessageMediaPhoto", None, "image/jpeg"),
        ("MessageMediaDocument", "a.gif", "image/gif"),
        ("MessageMediaDocument", "v.mp4", "video/mp4"),
        ("MessageMediaDocument", "n.ogg", "audio/ogg"),
        ("MessageMediaDocument", "raw.png", "image/png"),
        ("MessageMediaPhoto", None, "image/jpeg"),
        ("MessageMediaPhoto", None, "image/jpeg"),
    ]
    assert got[2].video is not None and got[3].voice is not None and got[3].media_unread
    assert got[5].raw_text == "bold cap" and isinstance(got[5].entities[0], types.MessageEntityBold)
    assert got[6].reply_to.reply_to_msg_id == got[0].id
    downloads = [await bob.download_media(m, bytes) for m in got]
    assert downloads[1:5] == [gif, mp4, ogg, raw]
    assert [m.file.size for m in got[1:5]] == [len(gif), len(mp4), len(ogg), len(raw)]
    for i in (0, 5, 6):
        m, data = got[i], downloads[i]
        image = Image.open(io.BytesIO(data))
        assert image.format == "JPEG" and image.size == (m.photo.sizes[-1].w, m.photo.sizes[-1].h)

    async def ids(f: Any) -> list[int]:
        return [m.id for m in await bob.get_messages(alice_peer, limit=20, filter=f)]

    assert await ids(types.InputMessagesFilterPhotos) == [got[6].id, got[5].id, got[0].id]
    assert await ids(types.InputMessagesFilterVideo) == [got[2].id]
    assert await ids(types.InputMessagesFilterVoice) == [got[3].id]
    assert await ids(types.InputMessagesFilterDocument) == [got[4].id, got[1].id]

    # A caption edit reaches bob live with the photo kept.
    edited = waiter(bob, events.MessageEdited())
    await alice.edit_message(bob_peer, got[5].id, "new caption")
    event = await asyncio.wait_for(edited, 10)
    assert event.message.text == "new caption" and event.message.photo.id == got[5].photo.id

    # Alice deletes two of them for both: bob may no longer download either.
    await alice.delete_messages(bob_peer, [got[6].id, got[4].id], revoke=True)
    for m in (got[6], got[4]):
        with pytest.raises(errors.FileIdInvalidError):
            await bob(functions.upload.GetFileRequest(location=_location(m), offset=0, limit=4096))
    # what he still holds stays downloadable
    assert (await bob(functions.upload.GetFileRequest(_location(got[1]), 0, 4096))).bytes == gif


async def test_protected_media_is_downloadable_but_not_sent_on_by_id(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    carol = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    uploaded = await alice.upload_file(_png(60, 40), file_name="p.png")
    await alice(
        functions.messages.SendMediaRequest(
            peer=bob_peer,
            media=types.InputMediaUploadedPhoto(file=uploaded),
            message="protected",
            noforwards=True,
        )
    )
    [at_bob] = await bob.get_messages(await peer_of(bob, alice), limit=1)
    assert at_bob.noforwards and await bob.download_media(at_bob, bytes)
    photo = at_bob.photo
    reuse = types.InputMediaPhoto(
        id=types.InputPhoto(
            id=photo.id, access_hash=photo.access_hash, file_reference=photo.file_reference
        )
    )
    carol_peer = await peer_of(bob, carol)
    with pytest.raises(errors.ChatForwardsRestrictedError):
        await bob.forward_messages(carol_peer, [at_bob.id], await peer_of(bob, alice))
    # Sending the same photo by id is a forward by other means: refused as well.
    with pytest.raises(errors.ChatForwardsRestrictedError):
        await bob(functions.messages.SendMediaRequest(peer=carol_peer, media=reuse, message=""))
    with pytest.raises(errors.ChatForwardsRestrictedError):
        await bob(
            functions.messages.SendMultiMediaRequest(
                peer=carol_peer,
                multi_media=[
                    types.InputSingleMedia(media=reuse, message="", random_id=i) for i in (1, 2)
                ],
            )
        )
    assert await carol.get_messages(await peer_of(carol, bob), limit=5) == []
    # Alice uploaded it: she may send it again as she likes.
    again = await alice.send_file(await peer_of(alice, carol), reuse)
    assert again.photo.id == photo.id
    # Once bob holds an unprotected copy too, he may send it on.
    await alice.send_file(bob_peer, reuse)
    sent_on = await bob.send_file(carol_peer, reuse)
    assert sent_on.photo.id == photo.id


async def test_a_sticker_claim_holds_only_for_a_sticker_sized_file(
    make_client: ClientFactory,
) -> None:
    """Clients download stickers and custom emoji unasked: a document claiming to be
    one is shown as one only when it is a sticker format within its size."""
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)

    async def send(size: int, mime: str, attribute: Any) -> Any:
        uploaded = await alice.upload_file(os.urandom(size), file_name="s")
        await alice(
            functions.messages.SendMediaRequest(
                peer=bob_peer,
                media=types.InputMediaUploadedDocument(
                    file=uploaded, mime_type=mime, attributes=[attribute]
                ),
                message="",
            )
        )
        [got] = await bob.get_messages(await peer_of(bob, alice), limit=1)
        return got

    sticker = types.DocumentAttributeSticker(alt="x", stickerset=types.InputStickerSetEmpty())
    emoji = types.DocumentAttributeCustomEmoji(alt="x", stickerset=types.InputStickerSetEmpty())
    at_limit = await send(256 * 1024, "video/webm", sticker)
    assert at_limit.sticker is not None
    past = await send(256 * 1024 + 1, "video/webm", sticker)
    assert past.sticker is None and past.document.size == 256 * 1024 + 1
    assert not any(isinstance(a, types.DocumentAttributeSticker) for a in past.document.attributes)
    not_a_sticker_format = await send(1000, "application/pdf", emoji)
    assert not any(
        isinstance(a, types.DocumentAttributeCustomEmoji)
        for a in not_a_sticker_format.document.attributes
    )
    tgs = await send(64 * 1024, "application/x-tgsticker", emoji)
    assert isinstance(tgs.document.attributes[0], types.DocumentAttributeCustomEmoji)
    # Sent again by id, the dropped claim stays dropped.
    doc = past.document
    again = await bob.send_file(
        await peer_of(bob, alice),
        types.InputMediaDocument(
            id=types.InputDocument(
                id=doc.id, access_hash=doc.access_hash, file_reference=doc.file_reference
            )
        ),
    )
    assert again.sticker is None and again.document.id == doc.id


async def test_spoilers_reach_the_recipient_and_file_ids_are_checked(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    uploaded = await alice.upload_file(_png(60, 40), file_name="p.png")
    await alice(
        functions.messages.SendMediaRequest(
            peer=bob_peer,
            media=types.InputMediaUploadedPhoto(file=uploaded, spoiler=True),
            message="",
        )
    )
    document = await alice.send_file(bob_peer, _named(b"%PDF" + os.urandom(100), "a.pdf"))
    doc = document.document
    await alice(
        functions.messages.SendMediaRequest(
            peer=bob_peer,
            media=types.InputMediaDocument(
                id=types.InputDocument(
                    id=doc.id, access_hash=doc.access_hash, file_reference=doc.file_reference
                ),
                spoiler=True,
            ),
            message="",
        )
    )
    hidden_doc, plain_doc, hidden_photo = await bob.get_messages(await peer_of(bob, alice), limit=3)
    assert hidden_photo.media.spoiler and hidden_photo.photo is not None
    assert hidden_doc.media.spoiler and not plain_doc.media.spoiler
    # A photo named as a document (and the other way round) is no file at all.
    photo = hidden_photo.photo
    crossed = [
        types.InputDocumentFileLocation(
            id=photo.id,
            access_hash=photo.access_hash,
            file_reference=photo.file_reference,
            thumb_size="",
        ),
        types.InputPhotoFileLocation(
            id=doc.id,
            access_hash=doc.access_hash,
            file_reference=doc.file_reference,
            thumb_size="m",
        ),
    ]
    for location in crossed:
        with pytest.raises(errors.FileIdInvalidError):
            await bob(functions.upload.GetFileRequest(location=location, offset=0, limit=4096))
    # Without its file reference, a file the caller may see is refused as Telegram does.
    empty = types.InputPhotoFileLocation(
        id=photo.id, access_hash=photo.access_hash, file_reference=b"", thumb_size="m"
    )
    with pytest.raises(errors.FileReferenceEmptyError):
        await bob(functions.upload.GetFileRequest(location=empty, offset=0, limit=4096))
    with pytest.raises(errors.FileReferenceEmptyError):
        await bob(
            functions.messages.SendMediaRequest(
                peer=await peer_of(bob, alice),
                media=types.InputMediaDocument(
                    id=types.InputDocument(
                        id=doc.id, access_hash=doc.access_hash, file_reference=b""
                    )
                ),
                message="",
            )
        )
