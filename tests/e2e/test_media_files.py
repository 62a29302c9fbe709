"""Uploads, uploadMedia and downloads with an unmodified Telethon client: a 12 MB
document in big parts comes back byte-identical, a photo comes back as JPEG renditions
of the same aspect, and forged access hashes or stale file references are refused."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import struct
import time
import zlib
from typing import Any

import pytest
from PIL import Image
from telethon import errors, functions, types

from .conftest import ClientFactory, RunningServer
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


def _document_location(
    document: types.Document, thumb_size: str = ""
) -> types.TypeInputFileLocation:
    return types.InputDocumentFileLocation(
        id=document.id,
        access_hash=document.access_hash,
        file_reference=document.file_reference,
        thumb_size=thumb_size,
    )


async def _upload_small(client: Any, file_id: int, data: bytes, part_size: int) -> None:
    for part, start in enumerate(range(0, len(data), part_size)):
        assert await client(
            functions.upload.SaveFilePartRequest(file_id, part, data[start : start + part_size])
        )


async def test_download_limits_and_a_document_thumbnail(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    content = os.urandom(2 * 1024 * 1024 + 100)
    thumb = await alice.upload_file(_jpeg(640, 480), file_name="thumb.jpg")
    media = await alice(
        functions.messages.UploadMediaRequest(
            peer=types.InputPeerSelf(),
            media=types.InputMediaUploadedDocument(
                file=await alice.upload_file(content, file_name="d.bin"),
                mime_type="application/zip",
                attributes=[types.DocumentAttributeFilename("d.bin")],
                thumb=thumb,
            ),
        )
    )
    document = media.document
    assert document.mime_type == "application/zip"
    by_type = {t.type: t for t in document.thumbs}
    assert isinstance(by_type["i"], types.PhotoStrippedSize)
    assert (by_type["m"].w, by_type["m"].h) == (320, 240)
    got = await alice(
        functions.upload.GetFileRequest(_document_location(document, "m"), 0, 1024 * 1024)
    )
    assert isinstance(got.type, types.storage.FileJpeg)
    assert Image.open(io.BytesIO(got.bytes)).size == (320, 240)

    async def get(offset: int, limit: int, precise: bool = False) -> bytes:
        answer = await alice(
            functions.upload.GetFileRequest(
                _document_location(document), offset, limit, precise=precise
            )
        )
        return bytes(answer.bytes)

    mib = 1024 * 1024
    assert await get(0, mib) == content[:mib]  # at the largest limit
    assert await get(2 * mib, mib) == content[2 * mib :]  # the short end
    assert await get(3 * mib, 4096) == b""  # past the end
    assert await get(mib - 4096, 4096) == content[mib - 4096 : mib]
    assert await get(1024, 3072, precise=True) == content[1024:4096]
    with pytest.raises(errors.LimitInvalidError):
        await get(0, mib + 4096)  # past the largest limit
    with pytest.raises(errors.LimitInvalidError):
        await get(0, 12288)  # does not divide 1 MiB
    with pytest.raises(errors.LimitInvalidError):
        await get(mib - 4096, 8192)  # across a 1 MiB boundary
    with pytest.raises(errors.OffsetInvalidError):
        await get(1024, 4096)
    with pytest.raises(errors.OffsetInvalidError):
        await get(512, 1024, precise=True)
    with pytest.raises(errors.LocationInvalidError):
        await alice(functions.upload.GetFileRequest(_document_location(document, "y"), 0, 4096))

    # Hashes of 128 KiB pieces of the 1 MiB window holding the offset.
    piece = 128 * 1024
    hashes = await alice(functions.upload.GetFileHashesRequest(_document_location(document), mib))
    assert [(h.offset, h.limit) for h in hashes] == [(mib + i * piece, piece) for i in range(8)]
    assert all(
        h.hash == hashlib.sha256(content[h.offset : h.offset + piece]).digest() for h in hashes
    )
    tail = await alice(
        functions.upload.GetFileHashesRequest(_document_location(document), 2 * mib + 5)
    )
    assert [(h.offset, h.limit) for h in tail] == [(2 * mib, 100)]
    assert tail[0].hash == hashlib.sha256(content[2 * mib :]).digest()


async def test_upload_refusals_over_the_wire(
    make_client: ClientFactory, server: RunningServer
) -> None:
    alice = await sign_in(make_client)
    with pytest.raises(errors.FilePartTooBigError):
        await alice(functions.upload.SaveFilePartRequest(1, 0, b"x" * (512 * 1024 + 1)))
    with pytest.raises(errors.FilePartsInvalidError):
        await alice(functions.upload.SaveBigFilePartRequest(2, 0, 4001, b"x" * 1024))
    with pytest.raises(errors.FilePartSizeInvalidError):
        await alice(functions.upload.SaveBigFilePartRequest(3, 0, 2, b"x" * 1000))

    async def upload_media(media: Any) -> Any:
        return await alice(
            functions.messages.UploadMediaRequest(peer=types.InputPeerSelf(), media=media)
        )

    # Truncated: part 1 of 3 never arrives.
    await alice(functions.upload.SaveFilePartRequest(4, 0, b"a" * 1024))
    await alice(functions.upload.SaveFilePartRequest(4, 2, b"c" * 10))
    with pytest.raises(errors.FilePartMissingError) as missing:
        await upload_media(
            types.InputMediaUploadedDocument(
                file=types.InputFile(4, 3, "t.bin", ""), mime_type="text/plain", attributes=[]
            )
        )
    assert missing.value.which == 1  # FILE_PART_1_MISSING
    # Left unfinished, the upload expires with the server's periodic cleanup.
    assert server.server.uploads is not None
    assert await server.server.uploads.expire(time.time() + 3601) >= 1
    with pytest.raises(errors.FilePart0MissingError):  # Telethon's name for part 0
        await upload_media(
            types.InputMediaUploadedDocument(
                file=types.InputFile(4, 3, "t.bin", ""), mime_type="text/plain", attributes=[]
            )
        )
    await _upload_small(alice, 5, b"not an image at all", 1024)
    with pytest.raises(errors.ImageProcessFailedError):
        await upload_media(types.InputMediaUploadedPhoto(file=types.InputFile(5, 1, "a.jpg", "")))
    bomb = _png_bomb(60_000, 60_000)
    await _upload_small(alice, 6, bomb, 1024)
    with pytest.raises(errors.PhotoInvalidDimensionsError):
        await upload_media(
            types.InputMediaUploadedPhoto(file=types.InputFile(6, -(-len(bomb) // 1024), "b", ""))
        )
    data = b"md5 checked"
    await _upload_small(alice, 7, data, 1024)
    with pytest.raises(errors.Md5ChecksumInvalidError):
        await upload_media(
            types.InputMediaUploadedDocument(
                file=types.InputFile(7, 1, "m", "0" * 32), mime_type="text/plain", attributes=[]
            )
        )
    good = await upload_media(
        types.InputMediaUploadedDocument(
            file=types.InputFile(7, 1, "m", hashlib.md5(data).hexdigest()),
            mime_type="text/plain",
            attributes=[],
        )
    )
    assert good.document.size == len(data)
    # An existing document again by id and access hash; a forged hash is refused.
    ref = types.InputDocument(good.document.id, good.document.access_hash, b"")
    again = await upload_media(types.InputMediaDocument(id=ref))
    assert again.document.id == good.document.id
    with pytest.raises(errors.FileIdInvalidError):
        forged = types.InputDocument(good.document.id, good.document.access_hash ^ 1, b"")
        await upload_media(types.InputMediaDocument(id=forged))


def _png_bomb(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * 65536))
        + chunk(b"IEND", b"")
    )


async def test_parts_sent_in_parallel_and_out_of_order(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client)
    part = 64 * 1024
    content = os.urandom(40 * part + 999)
    pieces = [content[i : i + part] for i in range(0, len(content), part)]
    file_id = 0x5EED
    await asyncio.gather(
        *(
            alice(functions.upload.SaveBigFilePartRequest(file_id, n, len(pieces), pieces[n]))
            for n in reversed(range(len(pieces)))
        )
    )
    media = await alice(
        functions.messages.UploadMediaRequest(
            peer=types.InputPeerSelf(),
            media=types.InputMediaUploadedDocument(
                file=types.InputFileBig(file_id, len(pieces), "p.bin"),
                mime_type="application/octet-stream",
                attributes=[],
            ),
        )
    )
    assert await alice.download_media(media, bytes) == content
