"""upload.saveFilePart/saveBigFilePart/getFile/getFileHashes and messages.uploadMedia
(TL <-> domain; the rules are in services.uploads and services.files)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.media import document_media_tl, encode_attribute, photo_media_tl
from telesrv.rpc.registry import method
from telesrv.services.errors import LocationInvalid, MediaInvalid
from telesrv.services.files import FileLocation, MediaFiles
from telesrv.services.profile_photos import ProfilePhotos
from telesrv.services.uploads import UploadedFile, Uploads
from telesrv.tl import TLObject, functions, types

PeerResolver = Callable[[RequestContext, "types.TypeInputPeer"], Awaitable[int]]
# The longest mime type kept (longer ones are not mime types).
MAX_MIME_TYPE = 255
# A document's attributes are stored and sent with every message that carries it: a
# few per document, each text of the size a file system, a player or a sticker set uses,
# and all of them together within MAX_ATTRIBUTES_BYTES serialized (room for the longest
# file name, title and performer of four-byte characters, and a waveform).
MAX_ATTRIBUTES = 10
MAX_ATTRIBUTES_BYTES = 4096
MAX_FILE_NAME = 255
MAX_AUDIO_TEXT = 64
MAX_WAVEFORM = 100
MAX_STICKER_ALT = 16
MAX_VIDEO_CODEC = 16
MAX_STICKER_SET_NAME = 64
# Per attribute type, the fields that carry text or bytes and their longest length.
ATTRIBUTE_LIMITS: dict[type[TLObject], tuple[tuple[str, int], ...]] = {
    types.DocumentAttributeFilename: (("file_name", MAX_FILE_NAME),),
    types.DocumentAttributeAudio: (
        ("title", MAX_AUDIO_TEXT),
        ("performer", MAX_AUDIO_TEXT),
        ("waveform", MAX_WAVEFORM),
    ),
    types.DocumentAttributeVideo: (("video_codec", MAX_VIDEO_CODEC),),
    types.DocumentAttributeSticker: (("alt", MAX_STICKER_ALT),),
    types.DocumentAttributeCustomEmoji: (("alt", MAX_STICKER_ALT),),
    types.InputStickerSetShortName: (("short_name", MAX_STICKER_SET_NAME),),
    types.InputStickerSetDice: (("emoticon", MAX_STICKER_ALT),),
}
# Per attribute type, the numbers that are sizes or times: a client sizes its
# placeholder or player by them, so they are finite and not negative.
ATTRIBUTE_MEASURES: dict[type[TLObject], tuple[str, ...]] = {
    types.DocumentAttributeImageSize: ("w", "h"),
    types.DocumentAttributeVideo: ("w", "h", "duration", "video_start_ts", "preload_prefix_size"),
    types.DocumentAttributeAudio: ("duration",),
}


def _within_limits(obj: TLObject) -> bool:
    for field, limit in ATTRIBUTE_LIMITS.get(type(obj), ()):
        value = getattr(obj, field)
        if value is not None and len(value) > limit:
            return False
    for field in ATTRIBUTE_MEASURES.get(type(obj), ()):
        value = getattr(obj, field)
        if value is not None and not 0 <= value < math.inf:  # NaN fails too
            return False
    stickerset = getattr(obj, "stickerset", None)
    return stickerset is None or _within_limits(stickerset)


def check_attributes(attributes: list[types.TypeDocumentAttribute]) -> None:
    """At most MAX_ATTRIBUTES of at most MAX_ATTRIBUTES_BYTES together, each text within
    its bound and each measure a finite non-negative number; MEDIA_INVALID otherwise."""
    if len(attributes) > MAX_ATTRIBUTES:
        raise MediaInvalid()
    if not all(_within_limits(a) for a in attributes):
        raise MediaInvalid()
    if sum(len(encode_attribute(a)) for a in attributes) > MAX_ATTRIBUTES_BYTES:
        raise MediaInvalid()


def uploaded_file(file: types.TypeInputFile) -> UploadedFile:
    if isinstance(file, types.InputFile):
        return UploadedFile(file.id, file.parts, file.name, big=False, md5=file.md5_checksum)
    if isinstance(file, types.InputFileBig):
        return UploadedFile(file.id, file.parts, file.name, big=True)
    raise MediaInvalid()  # inputFileStoryDocument: stories do not exist here


def file_location(location: types.TypeInputFileLocation) -> FileLocation:
    if isinstance(location, types.InputPhotoFileLocation):
        return FileLocation(
            "photo",
            location.id,
            location.access_hash,
            location.file_reference,
            location.thumb_size,
        )
    if isinstance(location, types.InputDocumentFileLocation):
        return FileLocation(
            "document",
            location.id,
            location.access_hash,
            location.file_reference,
            location.thumb_size,
        )
    raise LocationInvalid()


class UploadHandlers:
    def __init__(
        self,
        uploads: Uploads,
        media_files: MediaFiles,
        resolve_peer: PeerResolver,
        profile_photos: ProfilePhotos | None = None,
    ) -> None:
        self._uploads = uploads
        self._media = media_files
        self._resolve_peer = resolve_peer
        self._profile_photos = profile_photos

    async def _location(
        self, ctx: AuthedContext, location: types.TypeInputFileLocation
    ) -> FileLocation:
        # A user's avatar is named by the user and the photo's id alone: the photo it is
        # must be one the caller may see for that user.
        if isinstance(location, types.InputPeerPhotoFileLocation):
            if self._profile_photos is None:
                raise LocationInvalid()
            user_id = await self._resolve_peer(ctx, location.peer)
            return await self._profile_photos.peer_photo_location(
                ctx.user_id, user_id, location.photo_id, bool(location.big)
            )
        return file_location(location)

    @method(functions.upload.SaveFilePart)
    async def save_file_part(self, ctx: AuthedContext, req: functions.upload.SaveFilePart) -> bool:
        await self._uploads.save_part(ctx.user_id, req.file_id, req.file_part, req.bytes)
        return True

    @method(functions.upload.SaveBigFilePart)
    async def save_big_file_part(
        self, ctx: AuthedContext, req: functions.upload.SaveBigFilePart
    ) -> bool:
        await self._uploads.save_part(
            ctx.user_id, req.file_id, req.file_part, req.bytes, total_parts=req.file_total_parts
        )
        return True

    @method(functions.upload.GetFile)
    async def get_file(self, ctx: AuthedContext, req: functions.upload.GetFile) -> TLObject:
        chunk = await self._media.read(
            ctx.user_id, await self._location(ctx, req.location), req.offset, req.limit, req.precise
        )
        kind: types.storage.TypeFileType = (
            types.storage.FileJpeg() if chunk.jpeg else types.storage.FileUnknown()
        )
        return types.upload.File(type=kind, mtime=chunk.mtime, bytes=chunk.data)

    @method(functions.upload.GetFileHashes)
    async def get_file_hashes(
        self, ctx: AuthedContext, req: functions.upload.GetFileHashes
    ) -> list[types.FileHash]:
        hashes = await self._media.hashes(
            ctx.user_id, await self._location(ctx, req.location), req.offset
        )
        return [types.FileHash(offset=o, limit=n, hash=h) for o, n, h in hashes]

    @method(functions.messages.UploadMedia)
    async def upload_media(
        self, ctx: AuthedContext, req: functions.messages.UploadMedia
    ) -> TLObject:
        await self._resolve_peer(ctx, req.peer)
        media = req.media
        date = int(ctx.now)
        if isinstance(media, types.InputMediaUploadedPhoto):
            photo = await self._media.photo_from_upload(
                ctx.user_id, uploaded_file(media.file), date, has_stickers=bool(media.stickers)
            )
            return photo_media_tl(photo)
        if isinstance(media, types.InputMediaUploadedDocument):
            check_attributes(media.attributes)
            document = await self._media.document_from_upload(
                ctx.user_id,
                uploaded_file(media.file),
                mime_type=media.mime_type.strip()[:MAX_MIME_TYPE],
                attributes=[encode_attribute(a) for a in media.attributes],
                thumb=None if media.thumb is None else uploaded_file(media.thumb),
                date=date,
                force_file=bool(media.force_file),
                nosound=bool(media.nosound_video),
            )
            return document_media_tl(document)
        if isinstance(media, types.InputMediaPhoto) and isinstance(media.id, types.InputPhoto):
            ref = media.id
            photo = await self._media.photo(ctx.user_id, ref.id, ref.access_hash, None)
            return photo_media_tl(photo)
        if isinstance(media, types.InputMediaDocument) and isinstance(
            media.id, types.InputDocument
        ):
            doc_ref = media.id
            document = await self._media.document(
                ctx.user_id, doc_ref.id, doc_ref.access_hash, None
            )
            return document_media_tl(document)
        raise MediaInvalid()
