"""Stored photos and documents as TL (Photo, Document, MessageMedia*)."""

from __future__ import annotations

from telesrv.rpc.render import decode_object
from telesrv.services.files import DocumentRow, PhotoRow, SizeRow
from telesrv.tl import TLObject, types

STRIPPED_TYPE = "i"


def _sizes_tl(sizes: list[SizeRow], stripped: bytes | None) -> list[types.TypePhotoSize]:
    out: list[types.TypePhotoSize] = []
    if stripped:
        out.append(types.PhotoStrippedSize(type=STRIPPED_TYPE, bytes=stripped))
    out += [types.PhotoSize(type=s.type, w=s.w, h=s.h, size=s.size) for s in sizes]
    return out


def photo_tl(row: PhotoRow) -> types.Photo:
    return types.Photo(
        id=row.id,
        access_hash=row.access_hash,
        file_reference=row.file_reference,
        date=row.date,
        sizes=_sizes_tl(row.size_rows(), row.stripped),
        dc_id=row.dc_id,
        has_stickers=row.has_stickers,
    )


def document_tl(row: DocumentRow) -> types.Document:
    thumbs = _sizes_tl(row.thumb_rows(), row.stripped)
    return types.Document(
        id=row.id,
        access_hash=row.access_hash,
        file_reference=row.file_reference,
        date=row.date,
        mime_type=row.mime_type,
        size=row.size,
        dc_id=row.dc_id,
        attributes=[decode_object(a) for a in row.attributes],
        thumbs=thumbs or None,
    )


def encode_attribute(attribute: TLObject) -> bytes:
    return bytes(attribute.to_bytes())


def photo_media_tl(row: PhotoRow) -> types.MessageMediaPhoto:
    return types.MessageMediaPhoto(photo=photo_tl(row))


def document_media_tl(row: DocumentRow, *, nopremium: bool = False) -> types.MessageMediaDocument:
    attributes = [decode_object(a) for a in row.attributes]
    video = next((a for a in attributes if isinstance(a, types.DocumentAttributeVideo)), None)
    audio = next((a for a in attributes if isinstance(a, types.DocumentAttributeAudio)), None)
    return types.MessageMediaDocument(
        document=document_tl(row),
        video=video is not None and not video.round_message,
        round=video is not None and video.round_message,
        voice=audio is not None and audio.voice,
        nopremium=nopremium,
    )
