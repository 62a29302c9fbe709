"""messages.sendMedia and messages.sendMultiMedia: photos and documents in private
chats (TL <-> domain; a media message is sent through the same path as text)."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Awaitable, Callable
from typing import TypeVar

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.media import encode_attribute
from telesrv.rpc.messages import checked_entities, has_link, send_reply
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, encode_entities, message_tl, message_user_ids
from telesrv.rpc.stored_tl import decode_attribute
from telesrv.rpc.uploads import MAX_MIME_TYPE, check_attributes, uploaded_file
from telesrv.services.errors import MediaEmpty, MediaInvalid, MultiMediaTooLong, RandomIdDuplicate
from telesrv.services.files import DocumentRow, MediaFiles
from telesrv.services.message_media import (
    MAX_ALBUM,
    MessageMedia,
)
from telesrv.services.messages import MessageService, Origin, OutgoingText, Sent
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import (
    EffectIdInvalid,
    PaymentUnsupported,
    ReplyMarkupInvalid,
    ScheduleDateInvalid,
    SendAsPeerInvalid,
    ShortcutInvalid,
    SuggestedPostPeerInvalid,
)

# Send options this server does not implement, and the error each gets (sendMedia and
# sendMultiMedia name most of them; a field a request lacks is not set).
_UNSUPPORTED_OPTIONS: tuple[tuple[str, Callable[[], Exception]], ...] = (
    ("schedule_date", ScheduleDateInvalid),
    ("schedule_repeat_period", ScheduleDateInvalid),
    ("quick_reply_shortcut", ShortcutInvalid),
    ("effect", EffectIdInvalid),
    ("allow_paid_stars", PaymentUnsupported),
    ("suggested_post", SuggestedPostPeerInvalid),
    ("send_as", SendAsPeerInvalid),
    ("reply_markup", ReplyMarkupInvalid),
)


def _reject_unsupported_options(req: TLObject) -> None:
    for field, error in _UNSUPPORTED_OPTIONS:
        if getattr(req, field, None) is not None:
            raise error()


def shown_as(attributes: list[types.TypeDocumentAttribute], force_file: bool = False) -> str:
    """How clients show a document with these attributes: a sticker, a GIF, a round
    video, a video (unless sent as a file), a voice note, music, or a plain file."""
    video = next((a for a in attributes if isinstance(a, types.DocumentAttributeVideo)), None)
    audio = next((a for a in attributes if isinstance(a, types.DocumentAttributeAudio)), None)
    if any(isinstance(a, types.DocumentAttributeSticker) for a in attributes):
        return "sticker"
    if any(isinstance(a, types.DocumentAttributeAnimated) for a in attributes) and not force_file:
        return "gif"
    if video is not None and not force_file:
        return "round" if video.round_message else "video"
    if audio is not None:
        return "voice" if audio.voice else "music"
    return "document"


# What a client renders as a sticker or custom emoji it downloads unasked, whatever its
# size: Telegram's sticker files are small, of three formats. A document that claims to
# be one but is not such a file is shown as a plain document (the claim is dropped).
STICKER_FILES: dict[str, int] = {
    "image/webp": 512 * 1024,
    "application/x-tgsticker": 64 * 1024,
    "video/webm": 256 * 1024,
}
_STICKER_ATTRIBUTES = (types.DocumentAttributeSticker, types.DocumentAttributeCustomEmoji)


def _sticker_file(mime_type: str, size: int) -> bool:
    limit = STICKER_FILES.get(mime_type)
    return limit is not None and size <= limit


def document_media(row: DocumentRow, spoiler: bool = False) -> MessageMedia:
    """A document as a message carries it, shown as its attributes and its upload say
    (a sticker claim only for a sticker-sized file of a sticker format)."""
    attributes = [decode_attribute(a) for a in row.attributes]
    if any(isinstance(a, _STICKER_ATTRIBUTES) for a in attributes) and not _sticker_file(
        row.mime_type, row.size
    ):
        kept = [
            (raw, a)
            for raw, a in zip(row.attributes, attributes, strict=True)
            if not isinstance(a, _STICKER_ATTRIBUTES)
        ]
        row = dataclasses.replace(row, attributes=[raw for raw, _ in kept])
        attributes = [a for _, a in kept]
    return MessageMedia.document(
        row, shown_as(attributes, row.force_file), nosound=row.nosound, spoiler=spoiler
    )


def _no_self_destruct(media: types.TypeInputMedia) -> None:
    # Self-destructing media is not kept apart from other media here.
    if getattr(media, "ttl_seconds", None) is not None:
        raise MediaInvalid()


# (ctx, media, media service, date) -> the media to send
_Resolver = Callable[[AuthedContext, TLObject, MediaFiles, int], Awaitable[MessageMedia]]
M = TypeVar("M", bound=TLObject)


def _for(
    kind: type[M], resolve: Callable[[AuthedContext, M, MediaFiles, int], Awaitable[MessageMedia]]
) -> tuple[type[TLObject], _Resolver]:
    """A table entry: ``resolve`` for media of ``kind`` (the table is looked up by it)."""

    async def typed(
        ctx: AuthedContext, media: TLObject, files: MediaFiles, date: int
    ) -> MessageMedia:
        assert isinstance(media, kind)
        return await resolve(ctx, media, files, date)

    return kind, typed


async def _uploaded_photo(
    ctx: AuthedContext, media: types.InputMediaUploadedPhoto, files: MediaFiles, date: int
) -> MessageMedia:
    _no_self_destruct(media)
    if media.video is not None or media.live_photo:
        raise MediaInvalid()  # live photos are not supported
    row = await files.photo_from_upload(
        ctx.user_id, uploaded_file(media.file), date, has_stickers=bool(media.stickers)
    )
    return MessageMedia.photo(row, spoiler=bool(media.spoiler))


async def _uploaded_document(
    ctx: AuthedContext, media: types.InputMediaUploadedDocument, files: MediaFiles, date: int
) -> MessageMedia:
    _no_self_destruct(media)
    if media.video_cover is not None:
        raise MediaInvalid()  # video covers are not supported
    check_attributes(media.attributes)
    row = await files.document_from_upload(
        ctx.user_id,
        uploaded_file(media.file),
        mime_type=media.mime_type.strip()[:MAX_MIME_TYPE],
        attributes=[encode_attribute(a) for a in media.attributes],
        thumb=None if media.thumb is None else uploaded_file(media.thumb),
        date=date,
        force_file=bool(media.force_file),
        nosound=bool(media.nosound_video),
    )
    return document_media(row, bool(media.spoiler))


async def _existing_photo(
    ctx: AuthedContext, media: types.InputMediaPhoto, files: MediaFiles, date: int
) -> MessageMedia:
    _no_self_destruct(media)
    if not isinstance(media.id, types.InputPhoto):
        raise MediaEmpty()  # inputPhotoEmpty
    ref = media.id
    row = await files.photo(ctx.user_id, ref.id, ref.access_hash, ref.file_reference, resend=True)
    return MessageMedia.photo(row, spoiler=bool(media.spoiler))


async def _existing_document(
    ctx: AuthedContext, media: types.InputMediaDocument, files: MediaFiles, date: int
) -> MessageMedia:
    _no_self_destruct(media)
    if media.video_cover is not None:
        raise MediaInvalid()
    if not isinstance(media.id, types.InputDocument):
        raise MediaEmpty()  # inputDocumentEmpty
    ref = media.id
    row = await files.document(
        ctx.user_id, ref.id, ref.access_hash, ref.file_reference, resend=True
    )
    return document_media(row, spoiler=bool(media.spoiler))


_RESOLVERS: dict[type[TLObject], _Resolver] = dict(
    [
        _for(types.InputMediaUploadedPhoto, _uploaded_photo),
        _for(types.InputMediaUploadedDocument, _uploaded_document),
        _for(types.InputMediaPhoto, _existing_photo),
        _for(types.InputMediaDocument, _existing_document),
    ]
)
_UPLOADS = (types.InputMediaUploadedPhoto, types.InputMediaUploadedDocument)
# An album holds files sent before (messages.uploadMedia makes them): Telegram refuses
# uploads inside sendMultiMedia with MEDIA_INVALID, and clients upload first.
_ALBUM_ITEMS = (types.InputMediaPhoto, types.InputMediaDocument)


class MessageMediaHandlers:
    def __init__(
        self,
        messages: MessageService,
        media_files: MediaFiles,
        resolve_peer: PeerResolver,
        users_for: UsersFor,
    ) -> None:
        self._messages = messages
        self._files = media_files
        self._resolve_peer = resolve_peer
        self._users_for = users_for

    async def _media(self, ctx: AuthedContext, media: types.TypeInputMedia | None) -> MessageMedia:
        """What an InputMedia names; MEDIA_EMPTY for none, MEDIA_INVALID for the kinds
        not sent here (geo, contact, poll, dice, web page, game, invoice, story...)."""
        if media is None or isinstance(media, types.InputMediaEmpty):
            raise MediaEmpty()
        resolve = _RESOLVERS.get(type(media))
        if resolve is None:
            raise MediaInvalid()
        return await resolve(ctx, media, self._files, int(ctx.now))

    async def _outgoing(
        self,
        ctx: AuthedContext,
        recipient: int,
        req: functions.messages.SendMedia | functions.messages.SendMultiMedia,
        *,
        random_id: int,
        caption: str,
        entities: list[types.TypeMessageEntity] | None,
        media: MessageMedia,
        reply: tuple[int | None, str | None, list[types.TypeMessageEntity] | None, int | None],
        grouped_id: int | None = None,
    ) -> OutgoingText:
        MessageService.check_text(caption, caption=True)
        checked = await checked_entities(ctx, entities, caption, self._resolve_peer)
        reply_to, quote_text, quote_entities, quote_offset = reply
        return OutgoingText(
            sender=ctx.user_id,
            recipient=recipient,
            random_id=random_id,
            text=caption,
            entities=encode_entities(checked),
            silent=bool(req.silent),
            noforwards=bool(req.noforwards),
            reply_to=reply_to,
            quote_text=quote_text,
            quote_entities=encode_entities(quote_entities),
            quote_offset=quote_offset,
            clear_draft=bool(req.clear_draft),
            media=media,
            grouped_id=grouped_id,
            has_link=has_link(caption, checked),
        )

    async def _answer(self, ctx: AuthedContext, sent: list[tuple[int, Sent]]) -> types.Updates:
        updates: list[types.TypeUpdate] = []
        user_ids: set[int] = set()
        for random_id, s in sent:
            updates.append(types.UpdateMessageID(id=s.message.box_id, random_id=random_id))
        for _, s in sent:
            updates.append(
                types.UpdateNewMessage(message=message_tl(s.message), pts=s.pts, pts_count=1)
            )
            user_ids |= message_user_ids(s.message)
        users = await self._users_for(ctx.user_id, user_ids)
        date = max((s.message.date for _, s in sent), default=int(ctx.now))
        return types.Updates(updates=updates, users=users, chats=[], date=date, seq=0)

    @method(functions.messages.SendMedia)
    async def send_media(self, ctx: AuthedContext, req: functions.messages.SendMedia) -> TLObject:
        _reject_unsupported_options(req)
        recipient = await self._resolve_peer(ctx, req.peer)
        MessageService.check_text(req.message, caption=True)
        reply = await send_reply(ctx, req.reply_to, recipient, self._resolve_peer)
        if isinstance(req.media, _UPLOADS):
            earlier = await self._messages.earlier_send(ctx.user_id, req.random_id)
            if earlier is not None:
                return await self._answer(ctx, [(req.random_id, earlier)])
        media = await self._media(ctx, req.media)
        msg = await self._outgoing(
            ctx,
            recipient,
            req,
            random_id=req.random_id,
            caption=req.message,
            entities=req.entities,
            media=media,
            reply=reply,
        )
        sent = await self._messages.send_text(
            msg, Origin(ctx.auth_key_id, ctx.session_id), int(ctx.now)
        )
        return await self._answer(ctx, [(req.random_id, sent)])

    @method(functions.messages.SendMultiMedia)
    async def send_multi_media(
        self, ctx: AuthedContext, req: functions.messages.SendMultiMedia
    ) -> TLObject:
        """An album: each item its own message (its own random_id), in the order given,
        all with one grouped_id so clients show them together, all sent or none. One
        item is a message of its own album, as Telegram sends it."""
        _reject_unsupported_options(req)
        items = req.multi_media
        if not items:
            raise MediaEmpty()
        if len(items) > MAX_ALBUM:
            raise MultiMediaTooLong()
        if len({i.random_id for i in items}) != len(items):
            raise RandomIdDuplicate()
        recipient = await self._resolve_peer(ctx, req.peer)
        for item in items:
            MessageService.check_text(item.message or "", caption=True)
            if not isinstance(item.media, _ALBUM_ITEMS):
                raise MediaInvalid()
        reply = await send_reply(ctx, req.reply_to, recipient, self._resolve_peer)
        # Every item is checked before the first is sent.
        outgoing = []
        grouped_id = secrets.randbits(63) or 1
        for item in items:
            media = await self._media(ctx, item.media)
            outgoing.append(
                await self._outgoing(
                    ctx,
                    recipient,
                    req,
                    random_id=item.random_id,
                    caption=item.message or "",
                    entities=item.entities,
                    media=media,
                    reply=reply,
                    grouped_id=grouped_id,
                )
            )
        # All are sent in one transaction, or none is.
        sent = await self._messages.send_album(
            outgoing, Origin(ctx.auth_key_id, ctx.session_id), int(ctx.now)
        )
        return await self._answer(ctx, sent)
