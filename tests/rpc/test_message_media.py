"""Media messages without a server: how documents are shown, the snapshot a message
stores and the TL rendered from it, and the caption bounds."""

from __future__ import annotations

import pytest

from telesrv.rpc.media import document_media_tl, photo_media_tl, snapshot_media_tl
from telesrv.rpc.message_media import shown_as
from telesrv.rpc.search import FILTER_KINDS, filter_kinds, filter_pinned
from telesrv.services.errors import MediaCaptionTooLong, MessageEmpty
from telesrv.services.files import DocumentRow, PhotoRow
from telesrv.services.message_media import (
    MAX_CAPTION_LENGTH,
    SHOWN_AS,
    MessageMedia,
    document_snapshot,
    photo_snapshot,
)
from telesrv.services.messages import MessageService
from telesrv.tl import types

VIDEO = types.DocumentAttributeVideo(duration=1.0, w=2, h=2)
ROUND = types.DocumentAttributeVideo(duration=1.0, w=2, h=2, round_message=True)


@pytest.mark.parametrize(
    ("attributes", "force_file", "expected"),
    [
        ([types.DocumentAttributeFilename(file_name="a.pdf")], False, "document"),
        ([VIDEO], False, "video"),
        ([VIDEO], True, "document"),
        ([ROUND], False, "round"),
        ([types.DocumentAttributeAudio(duration=1, voice=True)], False, "voice"),
        ([types.DocumentAttributeAudio(duration=1, title="t")], False, "music"),
        ([types.DocumentAttributeAnimated(), VIDEO], False, "gif"),
        (
            [types.DocumentAttributeSticker(alt="x", stickerset=types.InputStickerSetEmpty())],
            False,
            "sticker",
        ),
    ],
)
def test_how_a_document_is_shown(
    attributes: list[types.TypeDocumentAttribute], force_file: bool, expected: str
) -> None:
    assert shown_as(attributes, force_file) == expected
    assert expected in SHOWN_AS


def _photo() -> PhotoRow:
    return PhotoRow(
        id=11,
        access_hash=-3,
        file_reference=b"\x01\x02",
        owner_user_id=1,
        date=1_700_000_000,
        dc_id=2,
        has_stickers=False,
        stripped=b"\x01\x28\x1e",
        sizes=[{"type": "m", "w": 320, "h": 240, "size": 100, "blob": "ab"}],
    )


def _document(attributes: list[bytes]) -> DocumentRow:
    return DocumentRow(
        id=12,
        access_hash=9,
        file_reference=b"\x03",
        owner_user_id=1,
        date=1_700_000_000,
        dc_id=2,
        mime_type="audio/ogg",
        size=500,
        blob="cd",
        attributes=attributes,
        thumbs=[],
        stripped=None,
    )


def test_a_snapshot_renders_as_the_stored_object() -> None:
    photo = _photo()
    snapshot = photo_snapshot(photo)
    assert "blob" not in str(snapshot)  # where the bytes live stays with the photo row
    assert snapshot_media_tl(snapshot) == photo_media_tl(photo)
    media = MessageMedia.photo(photo)
    assert media.snapshot == snapshot
    assert media.kind == "photo" and not media.content_unread

    voice = types.DocumentAttributeAudio(duration=2, voice=True)
    document = _document([voice.to_bytes()])
    voice_snapshot = document_snapshot(document, "voice")
    assert snapshot_media_tl(voice_snapshot) == document_media_tl(document)
    media = MessageMedia.document(document, "voice")
    assert media.snapshot == voice_snapshot
    assert (media.kind, media.content_unread, media.media_id) == ("voice", True, 12)
    # A kind this server does not know renders as no media, not as an error.
    assert snapshot_media_tl({"kind": "poll"}) is None
    assert snapshot_media_tl(None) is None


def test_caption_bounds() -> None:
    MessageService.check_text("", caption=True)  # a media message may have no caption
    MessageService.check_text("c" * MAX_CAPTION_LENGTH, caption=True)
    with pytest.raises(MediaCaptionTooLong):
        MessageService.check_text("c" * (MAX_CAPTION_LENGTH + 1), caption=True)
    with pytest.raises(MessageEmpty):
        MessageService.check_text("")


def test_search_filters() -> None:
    assert filter_kinds(types.InputMessagesFilterEmpty()) is None
    # The pinned filter keeps messages of any kind, those pinned (filter_pinned).
    assert filter_kinds(types.InputMessagesFilterPinned()) is None
    assert filter_pinned(types.InputMessagesFilterPinned())
    assert not filter_pinned(types.InputMessagesFilterPhotos())
    for kinds in FILTER_KINDS.values():
        assert set(kinds) <= SHOWN_AS | {"photo", "url"}
