"""Uploads, uploadMedia and downloads with an unmodified Telethon client: a 12 MB
document in big parts comes back byte-identical, a photo comes back as JPEG renditions
of the same aspect, and forged access hashes or stale file references are refused."""

from __future__ import annotations

import io
import os

import pytest
from PIL import Image
from telethon import errors, functions, types

from .conftest import ClientFactory
from .test_messages import sign_in


def _jpeg(width: int, height: int) -> bytes:
    image = Image.new("RGB", (width, height), (30, 120, 200))
    for x in range(0, width, 40):
        for y in range(0, height, 40):
            image.putpixel((x, y), (255, 255, 0))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


async def test_a_big_document_uploads_and_downloads_byte_identical(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    content = os.urandom(12 * 1024 * 1024 + 12345)  # saveBigFilePart (over 10 MiB)
    uploaded = await alice.upload_file(content, file_name="big.bin")
    assert isinstance(uploaded, types.InputFileBig)
    media = await alice(
        functions.messages.UploadMediaRequest(
            peer=types.InputPeerSelf(),
            media=types.InputMediaUploadedDocument(
                file=uploaded,
                mime_type="application/octet-stream",
                attributes=[types.DocumentAttributeFilename("big.bin")],
            ),
        )
    )
    assert isinstance(media, types.MessageMediaDocument)
    document = media.document
    assert document.size == len(content) and document.dc_id == 2
    assert document.attributes == [types.DocumentAttributeFilename("big.bin")]
    downloaded = await alice.download_file(
        types.InputDocumentFileLocation(
            id=document.id,
            access_hash=document.access_hash,
            file_reference=document.file_reference,
            thumb_size="",
        ),
        bytes,
    )
    assert downloaded == content
    assert await alice.download_media(media, bytes) == content

    # The same document named by another account, or with a forged hash, is refused.
    bob = await sign_in(make_client)
    for client, access_hash in ((alice, document.access_hash ^ 1), (bob, document.access_hash)):
        with pytest.raises(errors.FileIdInvalidError):
            await client(
                functions.upload.GetFileRequest(
                    location=types.InputDocumentFileLocation(
                        id=document.id,
                        access_hash=access_hash,
                        file_reference=document.file_reference,
                        thumb_size="",
                    ),
                    offset=0,
                    limit=4096,
                )
            )
    with pytest.raises(errors.FileReferenceExpiredError):
        await alice(
            functions.upload.GetFileRequest(
                location=types.InputDocumentFileLocation(
                    id=document.id,
                    access_hash=document.access_hash,
                    file_reference=b"stale",
                    thumb_size="",
                ),
                offset=0,
                limit=4096,
            )
        )


async def test_an_uploaded_photo_downloads_as_jpeg_of_the_same_aspect(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client)
    uploaded = await alice.upload_file(_jpeg(1600, 1200), file_name="photo.jpg")
    media = await alice(
        functions.messages.UploadMediaRequest(
            peer=types.InputPeerSelf(), media=types.InputMediaUploadedPhoto(file=uploaded)
        )
    )
    assert isinstance(media, types.MessageMediaPhoto)
    photo = media.photo
    by_type = {s.type: s for s in photo.sizes}
    assert isinstance(by_type["i"], types.PhotoStrippedSize)
    assert [(by_type[t].w, by_type[t].h) for t in "smxy"] == [
        (100, 75),
        (320, 240),
        (800, 600),
        (1280, 960),
    ]
    data = await alice.download_media(media, bytes)  # the largest size
    image = Image.open(io.BytesIO(data))
    assert image.format == "JPEG" and image.size == (1280, 960)
    assert len(data) == by_type["y"].size
    thumb = await alice.download_media(media, bytes, thumb=by_type["m"])
    assert Image.open(io.BytesIO(thumb)).size == (320, 240)

    with pytest.raises(errors.FileIdInvalidError):
        await alice(
            functions.upload.GetFileRequest(
                location=types.InputPhotoFileLocation(
                    id=photo.id,
                    access_hash=photo.access_hash ^ 1,
                    file_reference=photo.file_reference,
                    thumb_size="y",
                ),
                offset=0,
                limit=4096,
            )
        )
    with pytest.raises(errors.LocationInvalidError):
        await alice(
            functions.upload.GetFileRequest(
                location=types.InputPhotoFileLocation(
                    id=photo.id,
                    access_hash=photo.access_hash,
                    file_reference=photo.file_reference,
                    thumb_size="w",
                ),
                offset=0,
                limit=4096,
            )
        )
