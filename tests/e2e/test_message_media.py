"""Photos, documents and albums in private chats between unmodified Telethon clients:
sent with send_file, received live and on catch-up, downloaded by the recipient through
the message, kept by caption edits and forwards; forged access hashes are refused."""

from __future__ import annotations

import asyncio
import io
import os
from typing import Any

import pytest
from PIL import Image
from telethon import errors, events, functions, types

from .conftest import ClientFactory
from .test_media_files import _jpeg
from .test_messages import peer_of, sign_in, waiter


def _photo_file(width: int, height: int, name: str = "photo.jpg") -> io.BytesIO:
    data = io.BytesIO(_jpeg(width, height))
    data.name = name
    return data


async def test_a_photo_arrives_with_sizes_and_the_recipient_downloads_it(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    incoming = waiter(bob, events.NewMessage(incoming=True))
    sent = await alice.send_file(bob_peer, _photo_file(1600, 1200), caption="a view")
    assert isinstance(sent.media, types.MessageMediaPhoto) and sent.text == "a view"

    got = (await asyncio.wait_for(incoming, 10)).message
    assert isinstance(got.media, types.MessageMediaPhoto) and got.text == "a view"
    photo = got.media.photo
    by_type = {s.type: s for s in photo.sizes}
    assert isinstance(by_type["i"], types.PhotoStrippedSize)  # the inline thumbnail
    assert (by_type["y"].w, by_type["y"].h) == (1280, 960)  # the full size
    assert photo.id == sent.media.photo.id

    # Bob did not upload it: the message he holds lets him download it.
    data = await bob.download_media(got, bytes)
    image = Image.open(io.BytesIO(data))
    assert image.format == "JPEG" and image.size == (1280, 960)
    thumb = await bob.download_media(got, bytes, thumb=by_type["m"])
    assert Image.open(io.BytesIO(thumb)).size == (320, 240)

    # history, getMessages and the chat list render the same media
    [in_history] = await bob.get_messages(await peer_of(bob, alice), limit=1)
    assert in_history.media.photo.id == photo.id
    [by_id] = await bob.get_messages(await peer_of(bob, alice), ids=[got.id])
    assert by_id.media.photo.id == photo.id
    [dialog] = await bob.get_dialogs()
    assert dialog.message.media.photo.id == photo.id

    # A forged access hash, a stale file reference, a stranger: refused.
    carol = await sign_in(make_client)
    location = types.InputPhotoFileLocation(
        id=photo.id,
        access_hash=photo.access_hash,
        file_reference=photo.file_reference,
        thumb_size="y",
    )
    forged = types.InputPhotoFileLocation(
        id=photo.id,
        access_hash=photo.access_hash ^ 1,
        file_reference=photo.file_reference,
        thumb_size="y",
    )
    stale = types.InputPhotoFileLocation(
        id=photo.id, access_hash=photo.access_hash, file_reference=b"stale", thumb_size="y"
    )
    for client, loc in ((bob, forged), (carol, location)):
        with pytest.raises(errors.FileIdInvalidError):
            await client(functions.upload.GetFileRequest(location=loc, offset=0, limit=4096))
    with pytest.raises(errors.FileReferenceExpiredError):
        await bob(functions.upload.GetFileRequest(location=stale, offset=0, limit=4096))

    # Once bob deletes his message, the photo is no longer his to download.
    await bob.delete_messages(await peer_of(bob, alice), [got.id], revoke=False)
    with pytest.raises(errors.FileIdInvalidError):
        await bob(functions.upload.GetFileRequest(location=location, offset=0, limit=4096))


async def test_a_big_document_forwarded_stays_downloadable(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    carol = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    content = os.urandom(12 * 1024 * 1024 + 777)  # big-file parts
    named = io.BytesIO(content)
    named.name = "report.bin"
    sent = await alice.send_file(bob_peer, named, force_document=True)
    assert isinstance(sent.media, types.MessageMediaDocument)
    [at_bob] = await bob.get_messages(await peer_of(bob, alice), limit=1)
    assert at_bob.file.name == "report.bin" and at_bob.file.size == len(content)
    assert await bob.download_media(at_bob, bytes) == content

    # Bob forwards it to carol: the copy names the same document, carol may download it.
    carol_peer = await peer_of(bob, carol)
    [forwarded] = await bob.forward_messages(carol_peer, [at_bob.id], await peer_of(bob, alice))
    assert forwarded.media.document.id == sent.media.document.id
    [at_carol] = await carol.get_messages(await peer_of(carol, bob), limit=1)
    assert at_carol.fwd_from is not None and at_carol.file.name == "report.bin"
    head = await carol(
        functions.upload.GetFileRequest(
            location=types.InputDocumentFileLocation(
                id=at_carol.media.document.id,
                access_hash=at_carol.media.document.access_hash,
                file_reference=at_carol.media.document.file_reference,
                thumb_size="",
            ),
            offset=0,
            limit=1024 * 1024,
        )
    )
    assert head.bytes == content[: 1024 * 1024]


async def test_an_album_arrives_grouped_in_order_and_a_caption_edit_keeps_the_photo(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    files = [_photo_file(64 + 16 * i, 48, f"p{i}.jpg") for i in range(3)]
    sent = await alice.send_file(bob_peer, files, caption=["one", "two", "three"])
    assert [m.text for m in sent] == ["one", "two", "three"]
    grouped = {m.grouped_id for m in sent}
    assert len(grouped) == 1 and None not in grouped
    history = list(reversed(await bob.get_messages(await peer_of(bob, alice), limit=3)))
    assert [m.text for m in history] == ["one", "two", "three"]
    assert [m.photo.sizes[-1].w for m in history] == [64, 80, 96]
    assert len({m.grouped_id for m in history}) == 1 and history[0].grouped_id is not None
    assert [m.id for m in history] == sorted(m.id for m in history)

    edited = await alice.edit_message(bob_peer, sent[0].id, "first, edited")
    assert isinstance(edited.media, types.MessageMediaPhoto)
    assert edited.media.photo.id == sent[0].media.photo.id
    [again] = await bob.get_messages(await peer_of(bob, alice), ids=[history[0].id])
    assert again.text == "first, edited" and again.photo.id == history[0].photo.id
    # The caption of a media message may be emptied; a new media is refused.
    emptied = await alice.edit_message(bob_peer, sent[1].id, "")
    assert emptied.text == "" and emptied.photo is not None
    with pytest.raises(errors.MediaInvalidError):
        await alice(
            functions.messages.EditMessageRequest(
                peer=bob_peer,
                id=sent[2].id,
                media=types.InputMediaPhoto(
                    id=types.InputPhoto(
                        id=sent[0].photo.id,
                        access_hash=sent[0].photo.access_hash,
                        file_reference=sent[0].photo.file_reference,
                    )
                ),
            )
        )


async def test_an_offline_device_gets_media_on_catch_up(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client, updates=False)
    bob_peer = await peer_of(alice, bob)
    before = await bob(functions.updates.GetStateRequest())
    await bob.disconnect()
    await alice.send_file(bob_peer, _photo_file(200, 100), caption="while away")
    await bob.connect()
    diff = await bob(
        functions.updates.GetDifferenceRequest(pts=before.pts, date=before.date, qts=0)
    )
    assert isinstance(diff, types.updates.Difference)
    [message] = diff.new_messages
    assert isinstance(message.media, types.MessageMediaPhoto) and message.message == "while away"
    assert await bob.download_media(message, bytes)


async def test_voice_notes_stay_unread_until_their_contents_are_read(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    sent = await alice.send_file(
        bob_peer,
        b"OggS" + os.urandom(2000),
        voice_note=True,
        attributes=[types.DocumentAttributeAudio(duration=2, voice=True)],
    )
    assert sent.media.voice
    [at_bob] = await bob.get_messages(await peer_of(bob, alice), limit=1)
    assert at_bob.media_unread and at_bob.media.voice
    await bob(functions.messages.ReadMessageContentsRequest(id=[at_bob.id]))
    [read] = await bob.get_messages(await peer_of(bob, alice), limit=1)
    assert not read.media_unread


async def test_a_retried_upload_send_answers_the_first_message(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    uploaded = await alice.upload_file(_jpeg(50, 40), file_name="p.jpg")
    request = functions.messages.SendMediaRequest(
        peer=bob_peer,
        media=types.InputMediaUploadedPhoto(file=uploaded),
        message="once",
        random_id=4242,
    )
    first = await alice(request)
    again = await alice(request)  # the upload is used up: answered from the first send
    [m1] = [u.message for u in first.updates if isinstance(u, types.UpdateNewMessage)]
    [m2] = [u.message for u in again.updates if isinstance(u, types.UpdateNewMessage)]
    assert (m2.id, m2.media.photo.id) == (m1.id, m1.media.photo.id)
    assert len(await bob.get_messages(await peer_of(bob, alice), limit=5)) == 1


async def test_send_media_refusals(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    photo = (await alice.send_file(bob_peer, _photo_file(40, 30))).photo
    reuse = types.InputMediaPhoto(
        id=types.InputPhoto(
            id=photo.id, access_hash=photo.access_hash, file_reference=photo.file_reference
        )
    )
    # At the caption limit and past it.
    at_limit = await alice.send_file(bob_peer, reuse, caption="c" * 1024)
    assert len(at_limit.text) == 1024 and at_limit.photo.id == photo.id
    with pytest.raises(errors.MediaCaptionTooLongError):
        await alice.send_file(bob_peer, reuse, caption="c" * 1025)
    with pytest.raises(errors.MediaEmptyError):
        await alice(
            functions.messages.SendMediaRequest(
                peer=bob_peer, media=types.InputMediaEmpty(), message=""
            )
        )
    with pytest.raises(errors.MediaInvalidError):
        await alice(
            functions.messages.SendMediaRequest(
                peer=bob_peer,
                media=types.InputMediaGeoPoint(types.InputGeoPoint(lat=1.0, long=2.0)),
                message="",
            )
        )
    forged = types.InputMediaPhoto(
        id=types.InputPhoto(
            id=photo.id, access_hash=photo.access_hash ^ 1, file_reference=photo.file_reference
        )
    )
    with pytest.raises(errors.FileIdInvalidError):
        await alice(functions.messages.SendMediaRequest(peer=bob_peer, media=forged, message=""))
    # Someone who never saw the photo cannot send it on.
    carol = await sign_in(make_client)
    with pytest.raises(errors.FileIdInvalidError):
        await carol(
            functions.messages.SendMediaRequest(
                peer=await peer_of(carol, alice), media=reuse, message=""
            )
        )
    # The recipient may: the photo is in a message bob holds.
    again = await bob.send_file(await peer_of(bob, alice), reuse)
    assert again.photo.id == photo.id


async def test_albums_at_and_past_their_limits(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    photo = (await alice.send_file(bob_peer, _photo_file(40, 30))).photo
    reuse = types.InputMediaPhoto(
        id=types.InputPhoto(
            id=photo.id, access_hash=photo.access_hash, file_reference=photo.file_reference
        )
    )

    def items(n: int, first: int = 1) -> list[types.InputSingleMedia]:
        return [
            types.InputSingleMedia(media=reuse, message=f"#{i}", random_id=first + i)
            for i in range(n)
        ]

    ten = await alice(
        functions.messages.SendMultiMediaRequest(peer=bob_peer, multi_media=items(10))
    )
    new = [u.message for u in ten.updates if isinstance(u, types.UpdateNewMessage)]
    assert [m.message for m in new] == [f"#{i}" for i in range(10)]
    assert len({m.grouped_id for m in new}) == 1
    with pytest.raises(errors.MultiMediaTooLongError):
        await alice(
            functions.messages.SendMultiMediaRequest(peer=bob_peer, multi_media=items(11, 100))
        )
    # One item is an album of one, as Telegram sends it.
    one = await alice(
        functions.messages.SendMultiMediaRequest(peer=bob_peer, multi_media=items(1, 200))
    )
    [single] = [u.message for u in one.updates if isinstance(u, types.UpdateNewMessage)]
    assert single.grouped_id is not None
    # A retry of the album answers the same messages.
    retry = await alice(
        functions.messages.SendMultiMediaRequest(peer=bob_peer, multi_media=items(10))
    )
    again = [u.message for u in retry.updates if isinstance(u, types.UpdateNewMessage)]
    assert [m.id for m in again] == [m.id for m in new]
    # An item refused after others were checked leaves the whole album unsent.
    forged = types.InputMediaPhoto(
        id=types.InputPhoto(
            id=photo.id, access_hash=photo.access_hash ^ 1, file_reference=photo.file_reference
        )
    )
    bad_last = [*items(3, 400), types.InputSingleMedia(media=forged, message="", random_id=499)]
    with pytest.raises(errors.FileIdInvalidError):
        await alice(functions.messages.SendMultiMediaRequest(peer=bob_peer, multi_media=bad_last))
    history = await bob.get_messages(await peer_of(bob, alice), limit=20)
    assert len(history) == 12  # the photo, the album of ten, the album of one
    # Uploads go through messages.uploadMedia first; an upload inside is refused.
    uploaded = await alice.upload_file(_jpeg(20, 20), file_name="x.jpg")
    with pytest.raises(errors.MediaInvalidError):
        await alice(
            functions.messages.SendMultiMediaRequest(
                peer=bob_peer,
                multi_media=[
                    types.InputSingleMedia(
                        media=types.InputMediaUploadedPhoto(file=uploaded),
                        message="",
                        random_id=300 + i,
                    )
                    for i in range(2)
                ],
            )
        )


async def _send_document(
    client: Any, peer: Any, attributes: list[Any], mime: str, *, force_file: bool = False
) -> Any:
    uploaded = await client.upload_file(os.urandom(3000), file_name="f.bin")
    return await client(
        functions.messages.SendMediaRequest(
            peer=peer,
            media=types.InputMediaUploadedDocument(
                file=uploaded, mime_type=mime, attributes=attributes, force_file=force_file
            ),
            message="",
        )
    )


async def test_a_video_uploaded_as_a_file_stays_a_file_when_sent_by_id(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    video = types.DocumentAttributeVideo(duration=1.0, w=16, h=16)

    async def prepared(name: str, force_file: bool) -> Any:
        uploaded = await alice.upload_file(os.urandom(3000), file_name="f.bin")
        return await alice(
            functions.messages.UploadMediaRequest(
                peer=bob_peer,
                media=types.InputMediaUploadedDocument(
                    file=uploaded,
                    mime_type="video/mp4",
                    attributes=[video, types.DocumentAttributeFilename(name)],
                    force_file=force_file,
                ),
            )
        )

    # Prepared with messages.uploadMedia and sent by id, as clients send an album of
    # files: the one uploaded as a file is shown as one, both when prepared and sent.
    as_file = await prepared("raw.mp4", True)
    as_video = await prepared("v.mp4", False)
    assert not as_file.video
    assert as_video.video
    for media in (as_file, as_video):
        document = media.document
        await alice(
            functions.messages.SendMediaRequest(
                peer=bob_peer,
                media=types.InputMediaDocument(
                    id=types.InputDocument(
                        id=document.id,
                        access_hash=document.access_hash,
                        file_reference=document.file_reference,
                    )
                ),
                message="",
            )
        )
    alice_at_bob = await peer_of(bob, alice)
    files = await bob.get_messages(
        alice_at_bob, limit=10, filter=types.InputMessagesFilterDocument()
    )
    videos = await bob.get_messages(alice_at_bob, limit=10, filter=types.InputMessagesFilterVideo())
    assert [m.file.name for m in files] == ["raw.mp4"]
    assert [m.file.name for m in videos] == ["v.mp4"]


async def test_shared_media_filters_and_their_counters(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    name = types.DocumentAttributeFilename
    video = types.DocumentAttributeVideo(duration=1.0, w=16, h=16)
    round_video = types.DocumentAttributeVideo(duration=1.0, w=16, h=16, round_message=True)
    await alice.send_file(bob_peer, _photo_file(40, 30))
    await _send_document(alice, bob_peer, [name("a.pdf")], "application/pdf")
    await _send_document(alice, bob_peer, [video, name("v.mp4")], "video/mp4")
    await _send_document(alice, bob_peer, [video, name("raw.mp4")], "video/mp4", force_file=True)
    await _send_document(alice, bob_peer, [round_video], "video/mp4")
    await _send_document(
        alice, bob_peer, [types.DocumentAttributeAudio(3, voice=True)], "audio/ogg"
    )
    await _send_document(
        alice,
        bob_peer,
        [types.DocumentAttributeAudio(3, title="song"), name("s.mp3")],
        "audio/mpeg",
    )
    await _send_document(
        alice, bob_peer, [types.DocumentAttributeAnimated(), video, name("g.mp4")], "video/mp4"
    )
    await alice.send_message(bob_peer, "see https://example.org/page")
    await alice.send_message(bob_peer, "plain words")

    expected = {
        types.InputMessagesFilterPhotos: 1,
        types.InputMessagesFilterVideo: 1,
        types.InputMessagesFilterPhotoVideo: 2,
        types.InputMessagesFilterDocument: 2,  # the file and the video sent as a file
        types.InputMessagesFilterMusic: 1,
        types.InputMessagesFilterVoice: 1,
        types.InputMessagesFilterRoundVoice: 2,
        types.InputMessagesFilterRoundVideo: 1,
        types.InputMessagesFilterGif: 1,
        types.InputMessagesFilterUrl: 1,
        types.InputMessagesFilterPinned: 0,  # nothing of the kind exists here
    }
    alice_at_bob = await peer_of(bob, alice)
    for kind, n in expected.items():
        found = await bob.get_messages(alice_at_bob, limit=20, filter=kind())
        assert len(found) == n, kind
    documents = await bob.get_messages(
        alice_at_bob, limit=20, filter=types.InputMessagesFilterDocument()
    )
    assert {m.file.name for m in documents} == {"a.pdf", "raw.mp4"}
    counters = await bob(
        functions.messages.GetSearchCountersRequest(
            peer=alice_at_bob, filters=[kind() for kind in expected]
        )
    )
    assert [(type(c.filter), c.count) for c in counters] == list(expected.items())
    # A text search within a filter.
    [link] = await bob.get_messages(
        alice_at_bob, search="example", filter=types.InputMessagesFilterUrl()
    )
    assert "example.org" in link.text
    assert (
        await bob.get_messages(
            alice_at_bob, search="example", filter=types.InputMessagesFilterPhotos()
        )
        == []
    )


async def test_an_edit_moves_a_message_in_and_out_of_the_link_filter(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    alice_at_bob = await peer_of(bob, alice)
    links = types.InputMessagesFilterUrl

    async def linked(client: Any, peer: Any) -> list[int]:
        return [m.id for m in await client.get_messages(peer, limit=10, filter=links())]

    plain = await alice.send_message(bob_peer, "no address yet")
    linked_text = await alice.send_message(bob_peer, "read https://example.org/a")
    photo = await alice.send_file(bob_peer, _photo_file(40, 30), caption="a photo")
    [bob_plain, bob_linked] = [
        m.id for m in reversed(await bob.get_messages(alice_at_bob, limit=3))
    ][:2]
    assert await linked(alice, bob_peer) == [linked_text.id]
    # A link added by an edit (in the text, or as a text-url entity) is found; one
    # removed is not; a caption's link leaves a photo a photo.
    await alice.edit_message(bob_peer, plain.id, "now https://example.com/b")
    await alice.edit_message(bob_peer, linked_text.id, "no address any more")
    await alice.edit_message(bob_peer, photo.id, "see https://example.net/c")
    assert await linked(alice, bob_peer) == [plain.id]
    assert await linked(bob, alice_at_bob) == [bob_plain]
    await alice(
        functions.messages.EditMessageRequest(
            peer=bob_peer,
            id=linked_text.id,
            message="hidden link",
            entities=[types.MessageEntityTextUrl(offset=0, length=6, url="https://e.org")],
        )
    )
    assert sorted(await linked(bob, alice_at_bob)) == [bob_plain, bob_linked]
    photos = await bob.get_messages(
        alice_at_bob, limit=10, filter=types.InputMessagesFilterPhotos()
    )
    assert [m.text for m in photos] == ["see https://example.net/c"]


async def test_a_forwarded_link_stays_in_the_link_filter(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    carol = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    await alice.send_message(bob_peer, "read https://example.org/a")
    await alice.send_message(bob_peer, "no address here")
    await alice.send_file(bob_peer, _photo_file(40, 30), caption="see https://example.net/c")
    alice_at_bob = await peer_of(bob, alice)
    received = list(reversed(await bob.get_messages(alice_at_bob, limit=3)))
    carol_at_bob = await peer_of(bob, carol)
    copies = await bob.forward_messages(carol_at_bob, [m.id for m in received], alice_at_bob)
    links = types.InputMessagesFilterUrl
    # The text with an address is a link for both ends of the copy; the plain text is
    # not, and the photo with a linked caption stays a photo, as for a sent message.
    [bob_link] = await bob.get_messages(carol_at_bob, limit=10, filter=links())
    assert bob_link.id == copies[0].id
    bob_at_carol = await peer_of(carol, bob)
    [carol_link] = await carol.get_messages(bob_at_carol, limit=10, filter=links())
    assert carol_link.text == "read https://example.org/a"
    photos = await carol.get_messages(
        bob_at_carol, limit=10, filter=types.InputMessagesFilterPhotos()
    )
    assert [m.text for m in photos] == ["see https://example.net/c"]


def _gif_file() -> io.BytesIO:
    frames = [Image.new("P", (16, 16), color) for color in (1, 2)]
    data = io.BytesIO()
    frames[0].save(data, "GIF", save_all=True, append_images=frames[1:], duration=100)
    data.name = "anim.gif"
    data.seek(0)
    return data


async def test_a_gif_sent_as_an_animation_arrives_as_one(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    alice_at_bob = await peer_of(bob, alice)
    # Telethon marks a GIF as an animation when asked; the mark and the file name stay.
    await alice.send_file(bob_peer, _gif_file(), attributes=[types.DocumentAttributeAnimated()])
    [at_bob] = await bob.get_messages(alice_at_bob, limit=1)
    assert at_bob.gif is not None and at_bob.file.mime_type == "image/gif"
    assert at_bob.file.name == "anim.gif"
    found = await bob.get_messages(alice_at_bob, limit=5, filter=types.InputMessagesFilterGif())
    assert [m.id for m in found] == [at_bob.id]
    # Sent as a plain file (Telethon's default for a .gif), its type and name stay.
    await alice.send_file(bob_peer, _gif_file())
    [plain] = await bob.get_messages(alice_at_bob, limit=1)
    assert plain.document is not None
    assert (plain.file.mime_type, plain.file.name) == ("image/gif", "anim.gif")
    assert await bob.download_media(plain, bytes) == _gif_file().getvalue()


async def test_drop_media_captions_strips_captions_of_media_copies_only(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    bob = await sign_in(make_client)
    bob_peer = await peer_of(alice, bob)
    photo = await alice.send_file(bob_peer, _photo_file(64, 48), caption="a **caption**")
    text = await alice.send_message(bob_peer, "a text stays")
    assert photo.message == "a caption" and photo.entities
    copies = await alice(
        functions.messages.ForwardMessagesRequest(
            from_peer=bob_peer,
            id=[photo.id, text.id],
            to_peer=types.InputPeerSelf(),
            random_id=[101, 102],
            drop_author=True,
            drop_media_captions=True,
        )
    )
    new = [u.message for u in copies.updates if isinstance(u, types.UpdateNewMessage)]
    assert [m.message for m in new] == ["", "a text stays"]
    assert new[0].media.photo.id == photo.media.photo.id and not new[0].entities
    # Without the flag the caption goes with the copy.
    [kept] = await alice.forward_messages("me", [photo.id], bob_peer)
    assert kept.message == "a caption" and kept.entities
