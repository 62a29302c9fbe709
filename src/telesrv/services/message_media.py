"""Media in messages: the snapshot a message stores of its photo or document.

A message keeps a copy of what a client needs to show and download its media (ids,
access hash, file reference, sizes or mime type, size, attributes, thumbnails), so
that every read renders it from the message row alone. The copy is a JSON object;
binary fields (file reference, stripped previews, serialized attributes) are hex.

A document is shown as one of a few kinds, chosen from its attributes when it is
sent: the kind decides how clients present it (video, voice note, round video...)
and which shared-media filter of a search finds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from telesrv.services.files import DocumentRow, PhotoRow, SizeRow

PHOTO = "photo"
DOCUMENT = "document"

# How a document is shown (and filtered): the values of "shown_as" in a snapshot.
SHOWN_AS = frozenset({"video", "gif", "voice", "round", "music", "sticker", "document"})
# Kinds whose content the recipient has not opened until it reads it
# (messages.readMessageContents): a voice note, a round video.
UNREAD_CONTENT = frozenset({"voice", "round"})
# Text messages with a link are found by the link filter under this kind.
URL_KIND = "url"

MAX_CAPTION_LENGTH = 1024  # code points, Telegram's limit for a media caption
MIN_ALBUM = 2
MAX_ALBUM = 10  # messages.sendMultiMedia items, as Telegram allows


class SizeSnapshot(TypedDict):
    type: str
    w: int
    h: int
    size: int


class PhotoSnapshot(TypedDict):
    kind: str  # PHOTO
    id: int
    access_hash: int
    file_reference: str  # hex
    date: int
    dc_id: int
    has_stickers: NotRequired[bool]
    stripped: NotRequired[str | None]  # hex
    sizes: list[SizeSnapshot]
    spoiler: NotRequired[bool]


class DocumentSnapshot(TypedDict):
    kind: str  # DOCUMENT
    id: int
    access_hash: int
    file_reference: str  # hex
    date: int
    dc_id: int
    mime_type: str
    size: int
    attributes: list[str]  # hex, each a serialized DocumentAttribute
    thumbs: list[SizeSnapshot]
    stripped: NotRequired[str | None]  # hex
    shown_as: NotRequired[str]
    nosound: NotRequired[bool]
    spoiler: NotRequired[bool]


def _sizes_json(sizes: list[SizeRow]) -> list[SizeSnapshot]:
    # The blob key stays with the photo row: a download looks it up there.
    return [{"type": s.type, "w": s.w, "h": s.h, "size": s.size} for s in sizes]


def photo_snapshot(row: PhotoRow, *, spoiler: bool = False) -> PhotoSnapshot:
    """``spoiler``: clients show it blurred until tapped."""
    return {
        "kind": PHOTO,
        "id": row.id,
        "access_hash": row.access_hash,
        "file_reference": row.file_reference.hex(),
        "date": row.date,
        "dc_id": row.dc_id,
        "has_stickers": row.has_stickers,
        "stripped": row.stripped.hex() if row.stripped else None,
        "sizes": _sizes_json(row.size_rows()),
        "spoiler": spoiler,
    }


def document_snapshot(
    row: DocumentRow, shown_as: str, *, nosound: bool = False, spoiler: bool = False
) -> DocumentSnapshot:
    assert shown_as in SHOWN_AS
    return {
        "kind": DOCUMENT,
        "id": row.id,
        "access_hash": row.access_hash,
        "file_reference": row.file_reference.hex(),
        "date": row.date,
        "dc_id": row.dc_id,
        "mime_type": row.mime_type,
        "size": row.size,
        "attributes": [a.hex() for a in row.attributes],
        "thumbs": _sizes_json(row.thumb_rows()),
        "stripped": row.stripped.hex() if row.stripped else None,
        "shown_as": shown_as,
        "nosound": nosound,
        "spoiler": spoiler,
    }


@dataclass(frozen=True, slots=True)
class MessageMedia:
    """The media of one message to send: its snapshot and what is derived from it."""

    snapshot: dict[str, Any]  # as the message stores it (JSON)

    @classmethod
    def photo(cls, row: PhotoRow, *, spoiler: bool = False) -> MessageMedia:
        return cls(dict(photo_snapshot(row, spoiler=spoiler)))

    @classmethod
    def document(
        cls, row: DocumentRow, shown_as: str, *, nosound: bool = False, spoiler: bool = False
    ) -> MessageMedia:
        return cls(dict(document_snapshot(row, shown_as, nosound=nosound, spoiler=spoiler)))

    @property
    def media_id(self) -> int:
        return int(self.snapshot["id"])

    @property
    def kind(self) -> str:
        """The search kind: 'photo', or how the document is shown."""
        return str(self.snapshot.get("shown_as", self.snapshot["kind"]))

    @property
    def content_unread(self) -> bool:
        """Whether the recipient's copy starts with its content unopened."""
        return self.kind in UNREAD_CONTENT


def media_of(snapshot: dict[str, Any] | None) -> MessageMedia | None:
    return None if snapshot is None else MessageMedia(snapshot)
