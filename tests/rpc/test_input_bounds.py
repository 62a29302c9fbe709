"""Inputs that are stored and sent back to every session are bounded before anything
is stored: a dialog filter's emoji and title entities, a local notification sound,
and the attributes of an uploaded document. Each bound is tried at the limit (stored)
and one past it (refused, nothing stored)."""

from __future__ import annotations

from typing import Any

import pytest

from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.dialog_filters import MAX_FILTER_EMOTICON, DialogFilterHandlers
from telesrv.rpc.errors import to_rpc_error
from telesrv.rpc.media import encode_attribute
from telesrv.rpc.messages import MAX_URL_LENGTH
from telesrv.rpc.notify_settings import MAX_SOUND_DATA, MAX_SOUND_TITLE, NotifySettingsHandlers
from telesrv.rpc.stored_tl import decode_object
from telesrv.rpc.uploads import (
    MAX_ATTRIBUTES,
    MAX_ATTRIBUTES_BYTES,
    MAX_AUDIO_TEXT,
    MAX_FILE_NAME,
    MAX_MIME_TYPE,
    MAX_STICKER_ALT,
    MAX_STICKER_SET_NAME,
    MAX_VIDEO_CODEC,
    MAX_WAVEFORM,
    UploadHandlers,
)
from telesrv.services.errors import MediaInvalid
from telesrv.tl import functions, types
from telesrv.tl.errors import (
    EmoticonInvalid,
    EntitiesTooLong,
    EntityBoundsInvalid,
    PeerIdInvalid,
    SettingsInvalid,
)

ME, BOB = 100, 200


class Stored(Exception):
    """Raised by the fake services: the request passed every bound and reached them."""


class FakeService:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def _store(self, *args: Any, **kw: Any) -> Any:
        self.calls.append((*args, kw))
        raise Stored()

    save = update_notify_settings = document_from_upload = _store


async def resolve(ctx: RequestContext, peer: Any) -> int:
    if isinstance(peer, types.InputPeerSelf):
        return ME
    if isinstance(peer, types.InputPeerUser):
        return int(peer.user_id)
    raise PeerIdInvalid()


def ctx() -> AuthedContext:
    plain = RequestContext(
        auth_key_id=1, perm_auth_key_id=1, session_id=2, msg_id=3, now=1000.0, user_id=ME
    )
    return AuthedContext.of(plain, ME)


async def refused(call: Any, error: type[Exception], service: FakeService) -> None:
    with pytest.raises(error):
        await call
    assert service.calls == []


async def stored(call: Any, service: FakeService) -> None:
    with pytest.raises(Stored):
        await call
    assert len(service.calls) == 1


# --- dialog filters -------------------------------------------------------------


def dialog_filter(
    emoticon: str | None = None, title: str = "Work", entities: list[Any] | None = None
) -> Any:
    f = types.DialogFilter(
        id=2,
        title=types.TextWithEntities(text=title, entities=entities or []),
        contacts=True,
        emoticon=emoticon,
        pinned_peers=[],
        include_peers=[],
        exclude_peers=[],
    )
    return functions.messages.UpdateDialogFilter(id=2, filter=f)


@pytest.fixture
def filters() -> FakeService:
    return FakeService()


@pytest.fixture
def filter_handlers(filters: FakeService) -> DialogFilterHandlers:
    return DialogFilterHandlers(filters, resolve)  # type: ignore[arg-type]


async def test_filter_emoticon_at_limit_is_stored(
    filter_handlers: DialogFilterHandlers, filters: FakeService
) -> None:
    req = dialog_filter(emoticon="x" * MAX_FILTER_EMOTICON)
    await stored(filter_handlers.update_dialog_filter(ctx(), req), filters)


async def test_filter_emoticon_past_limit_is_refused(
    filter_handlers: DialogFilterHandlers, filters: FakeService
) -> None:
    req = dialog_filter(emoticon="x" * (MAX_FILTER_EMOTICON + 1))
    await refused(filter_handlers.update_dialog_filter(ctx(), req), EmoticonInvalid, filters)


def url_entity(length: int) -> Any:
    return types.MessageEntityTextUrl(offset=0, length=4, url="u" * length)


async def test_filter_title_url_at_limit_is_stored(
    filter_handlers: DialogFilterHandlers, filters: FakeService
) -> None:
    req = dialog_filter(entities=[url_entity(MAX_URL_LENGTH)])
    await stored(filter_handlers.update_dialog_filter(ctx(), req), filters)


async def test_filter_title_url_past_limit_is_refused(
    filter_handlers: DialogFilterHandlers, filters: FakeService
) -> None:
    req = dialog_filter(entities=[url_entity(MAX_URL_LENGTH + 1)])
    await refused(filter_handlers.update_dialog_filter(ctx(), req), EntitiesTooLong, filters)


async def test_filter_title_entity_past_the_title_is_refused(
    filter_handlers: DialogFilterHandlers, filters: FakeService
) -> None:
    at_end = types.MessageEntityBold(offset=0, length=4)  # "Work": exactly the title
    await stored(
        filter_handlers.update_dialog_filter(ctx(), dialog_filter(entities=[at_end])), filters
    )
    past = types.MessageEntityBold(offset=0, length=5)
    filters.calls.clear()
    await refused(
        filter_handlers.update_dialog_filter(ctx(), dialog_filter(entities=[past])),
        EntityBoundsInvalid,
        filters,
    )


async def test_filter_title_mention_is_stored_as_mention_name(
    filter_handlers: DialogFilterHandlers, filters: FakeService
) -> None:
    mention = types.InputMessageEntityMentionName(
        offset=0, length=4, user_id=types.InputUser(user_id=BOB, access_hash=0)
    )
    await stored(
        filter_handlers.update_dialog_filter(ctx(), dialog_filter(entities=[mention])), filters
    )
    spec = filters.calls[0][1]
    decoded = decode_object(spec.data)
    assert isinstance(decoded, types.DialogFilter)
    assert decoded.title.entities == [
        types.MessageEntityMentionName(offset=0, length=4, user_id=BOB)
    ]


# --- notification sounds --------------------------------------------------------


@pytest.fixture
def dialogs() -> FakeService:
    return FakeService()


@pytest.fixture
def notify_handlers(dialogs: FakeService) -> NotifySettingsHandlers:
    return NotifySettingsHandlers(dialogs, resolve)  # type: ignore[arg-type]


def notify(title: str, data: str) -> Any:
    return functions.account.UpdateNotifySettings(
        peer=types.InputNotifyUsers(),
        settings=types.InputPeerNotifySettings(
            sound=types.NotificationSoundLocal(title=title, data=data)
        ),
    )


async def test_local_sound_at_limits_is_stored(
    notify_handlers: NotifySettingsHandlers, dialogs: FakeService
) -> None:
    req = notify("t" * MAX_SOUND_TITLE, "d" * MAX_SOUND_DATA)
    await stored(notify_handlers.update_notify_settings(ctx(), req), dialogs)


@pytest.mark.parametrize(
    ("title", "data"),
    [(MAX_SOUND_TITLE + 1, MAX_SOUND_DATA), (MAX_SOUND_TITLE, MAX_SOUND_DATA + 1)],
)
async def test_local_sound_past_a_limit_is_refused(
    notify_handlers: NotifySettingsHandlers, dialogs: FakeService, title: int, data: int
) -> None:
    req = notify("t" * title, "d" * data)
    await refused(notify_handlers.update_notify_settings(ctx(), req), SettingsInvalid, dialogs)


# --- uploaded document attributes -----------------------------------------------


@pytest.fixture
def media() -> FakeService:
    return FakeService()


@pytest.fixture
def upload_handlers(media: FakeService) -> UploadHandlers:
    return UploadHandlers(None, media, resolve)  # type: ignore[arg-type]


def upload(attributes: list[Any], mime_type: str = "application/octet-stream") -> Any:
    return functions.messages.UploadMedia(
        peer=types.InputPeerSelf(),
        media=types.InputMediaUploadedDocument(
            file=types.InputFile(id=1, parts=1, name="f", md5_checksum=""),
            mime_type=mime_type,
            attributes=attributes,
        ),
    )


def audio(title: int = 1, performer: int = 1, waveform: int = 1) -> Any:
    return types.DocumentAttributeAudio(
        duration=1,
        voice=True,
        title="t" * title,
        performer="p" * performer,
        waveform=b"w" * waveform,
    )


def sticker(alt: int) -> Any:
    return types.DocumentAttributeSticker(alt="a" * alt, stickerset=types.InputStickerSetEmpty())


def custom_emoji(alt: int) -> Any:
    return types.DocumentAttributeCustomEmoji(
        alt="a" * alt, stickerset=types.InputStickerSetEmpty()
    )


def file_name(length: int) -> Any:
    return types.DocumentAttributeFilename(file_name="n" * length)


def video(codec: int = 0, **measures: Any) -> Any:
    fields: dict[str, Any] = {"duration": 1.5, "w": 640, "h": 480, **measures}
    return types.DocumentAttributeVideo(video_codec="c" * codec if codec else None, **fields)


def named_set(length: int) -> Any:
    return types.DocumentAttributeSticker(
        alt="a", stickerset=types.InputStickerSetShortName(short_name="s" * length)
    )


def dice_set(length: int) -> Any:
    return types.DocumentAttributeCustomEmoji(
        alt="a", stickerset=types.InputStickerSetDice(emoticon="e" * length)
    )


def totalling(extra: int) -> list[Any]:
    """Attributes whose serialized size is MAX_ATTRIBUTES_BYTES plus ``extra`` (a
    multiple of 4): file names of four-byte characters, each within MAX_FILE_NAME."""
    wide = "\U0001f600"
    names = [types.DocumentAttributeFilename(file_name=wide * MAX_FILE_NAME)] * 3
    used = sum(len(encode_attribute(a)) for a in names)
    # the last: 4 bytes of constructor and 4 of length before the name's bytes
    last = (MAX_ATTRIBUTES_BYTES + extra - used - 8) // 4
    attributes = [*names, types.DocumentAttributeFilename(file_name=wide * last)]
    assert sum(len(encode_attribute(a)) for a in attributes) == MAX_ATTRIBUTES_BYTES + extra
    return attributes


AT_LIMIT = [
    [file_name(MAX_FILE_NAME)],
    [audio(title=MAX_AUDIO_TEXT, performer=MAX_AUDIO_TEXT, waveform=MAX_WAVEFORM)],
    [sticker(MAX_STICKER_ALT)],
    [custom_emoji(MAX_STICKER_ALT)],
    [file_name(1)] * MAX_ATTRIBUTES,
    [video(MAX_VIDEO_CODEC)],
    [named_set(MAX_STICKER_SET_NAME)],
    [dice_set(MAX_STICKER_ALT)],
    [video(duration=0.0, w=0, h=0, video_start_ts=0.0, preload_prefix_size=0)],
    [types.DocumentAttributeImageSize(w=0, h=0)],
    totalling(0),
]
PAST_LIMIT = [
    [file_name(MAX_FILE_NAME + 1)],
    [audio(title=MAX_AUDIO_TEXT + 1)],
    [audio(performer=MAX_AUDIO_TEXT + 1)],
    [audio(waveform=MAX_WAVEFORM + 1)],
    [sticker(MAX_STICKER_ALT + 1)],
    [custom_emoji(MAX_STICKER_ALT + 1)],
    [file_name(1)] * (MAX_ATTRIBUTES + 1),
    [video(MAX_VIDEO_CODEC + 1)],
    [named_set(MAX_STICKER_SET_NAME + 1)],
    [dice_set(MAX_STICKER_ALT + 1)],
    [video(w=-1)],
    [video(h=-1)],
    [video(duration=-0.5)],
    [video(duration=float("nan"))],
    [video(duration=float("inf"))],
    [video(video_start_ts=-1.0)],
    [video(preload_prefix_size=-1)],
    [types.DocumentAttributeImageSize(w=10, h=-1)],
    [types.DocumentAttributeAudio(duration=-1)],
    totalling(4),
]


@pytest.mark.parametrize("attributes", AT_LIMIT)
async def test_document_attributes_at_limit_are_stored(
    upload_handlers: UploadHandlers, media: FakeService, attributes: list[Any]
) -> None:
    await stored(upload_handlers.upload_media(ctx(), upload(attributes)), media)


@pytest.mark.parametrize("attributes", PAST_LIMIT)
async def test_document_attributes_past_limit_are_refused(
    upload_handlers: UploadHandlers, media: FakeService, attributes: list[Any]
) -> None:
    await refused(upload_handlers.upload_media(ctx(), upload(attributes)), MediaInvalid, media)


def test_media_invalid_reaches_the_client_as_media_invalid() -> None:
    assert to_rpc_error(MediaInvalid()).message == "MEDIA_INVALID"


@pytest.mark.parametrize("extra", [0, 1, 1000])
async def test_a_mime_type_is_kept_to_its_bound(
    upload_handlers: UploadHandlers, media: FakeService, extra: int
) -> None:
    mime = "x/" + "m" * (MAX_MIME_TYPE - 2 + extra)
    await stored(upload_handlers.upload_media(ctx(), upload([], mime)), media)
    assert media.calls[0][-1]["mime_type"] == mime[:MAX_MIME_TYPE]
