"""Stored photos and documents as TL (Photo, Document, MessageMedia*), from their
rows and from the snapshots messages keep of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

from telesrv.rpc.stored_tl import decode_attribute
from telesrv.services.files import DocumentRow, PhotoRow, SizeRow
from telesrv.services.message_media import (
    DOCUMENT,
    PHOTO,
    DocumentSnapshot,
    PhotoSnapshot,
    SizeSnapshot,
)
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
        attributes=[decode_attribute(a) for a in row.attributes],
        thumbs=thumbs or None,
    )


def encode_attribute(attribute: TLObject) -> bytes:
    return bytes(attribute.to_bytes())


def photo_media_tl(row: PhotoRow) -> types.MessageMediaPhoto:
    return types.MessageMediaPhoto(photo=photo_tl(row))


def document_media_tl(row: DocumentRow, *, nopremium: bool = False) -> types.MessageMediaDocument:
    attributes = [decode_attribute(a) for a in row.attributes]
    video = next((a for a in attributes if isinstance(a, types.DocumentAttributeVideo)), None)
    audio = next((a for a in attributes if isinstance(a, types.DocumentAttributeAudio)), None)
    # A video uploaded as a file is shown as the file it was sent as.
    video = None if row.force_file else video
    return types.MessageMediaDocument(
        document=document_tl(row),
        video=video is not None and not video.round_message,
        round=video is not None and video.round_message,
        voice=audio is not None and audio.voice,
        nopremium=nopremium,
    )


# -- from a message's snapshot -----------------------------------------------------------


def _snapshot_sizes(stripped: str | None, sizes: list[SizeSnapshot]) -> list[types.TypePhotoSize]:
    out: list[types.TypePhotoSize] = []
    if stripped:
        out.append(types.PhotoStrippedSize(type=STRIPPED_TYPE, bytes=bytes.fromhex(stripped)))
    out += [types.PhotoSize(type=s["type"], w=s["w"], h=s["h"], size=s["size"]) for s in sizes]
    return out


def _photo_media(value: PhotoSnapshot) -> types.MessageMediaPhoto:
    return types.MessageMediaPhoto(
        photo=types.Photo(
            id=value["id"],
            access_hash=value["access_hash"],
            file_reference=bytes.fromhex(value["file_reference"]),
            date=value["date"],
            sizes=_snapshot_sizes(value.get("stripped"), value["sizes"]),
            dc_id=value["dc_id"],
            has_stickers=bool(value.get("has_stickers")),
        ),
        spoiler=bool(value.get("spoiler")),
    )


def _document_media(value: DocumentSnapshot) -> types.MessageMediaDocument:
    shown_as = value.get("shown_as")
    thumbs = _snapshot_sizes(value.get("stripped"), value["thumbs"])
    return types.MessageMediaDocument(
        document=types.Document(
            id=value["id"],
            access_hash=value["access_hash"],
            file_reference=bytes.fromhex(value["file_reference"]),
            date=value["date"],
            mime_type=value["mime_type"],
            size=value["size"],
            dc_id=value["dc_id"],
            attributes=[decode_attribute(bytes.fromhex(a)) for a in value["attributes"]],
            thumbs=thumbs or None,
        ),
        nopremium=False,
        spoiler=bool(value.get("spoiler")),
        video=shown_as == "video",
        round=shown_as == "round",
        voice=shown_as == "voice",
    )


# A snapshot is the JSON its service wrote (message_media.py), read back as its kind says.
_SNAPSHOT_RENDERERS: dict[str, Callable[[Mapping[str, object]], types.TypeMessageMedia]] = {
    PHOTO: lambda value: _photo_media(cast(PhotoSnapshot, value)),
    DOCUMENT: lambda value: _document_media(cast(DocumentSnapshot, value)),
}


def snapshot_media_tl(value: Mapping[str, object] | None) -> types.TypeMessageMedia | None:
    """A message's media from its snapshot; None for a text message (and for a kind
    this server does not know, which a client then shows as text)."""
    if not value:
        return None
    render = _SNAPSHOT_RENDERERS.get(str(value.get("kind", "")))
    return render(value) if render is not None else None
