"""messages.editMessage, messages.deleteMessages, messages.deleteHistory (TL <-> domain)."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.messages import PeerResolver, checked_entities
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, encode_entities, message_tl, message_user_ids
from telesrv.services.message_edits import MAX_DELETE_IDS, MessageEditService
from telesrv.services.messages import INT32_MAX, Origin
from telesrv.services.updates import UpdatesService
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import (
    LimitInvalid,
    MediaInvalid,
    MessageIdInvalid,
    ReplyMarkupInvalid,
    ScheduleDateInvalid,
    ShortcutInvalid,
)

# An edit may name these as its media and still be a text edit.
TEXT_MEDIA = (types.InputMediaEmpty, types.InputMediaWebPage)


class MessageEditHandlers:
    def __init__(
        self,
        edits: MessageEditService,
        updates: UpdatesService,
        resolve_peer: PeerResolver,
        users_for: UsersFor,
    ) -> None:
        self._edits = edits
        self._updates = updates
        self._resolve_peer = resolve_peer
        self._users_for = users_for

    @method(functions.messages.EditMessage)
    async def edit_message(
        self, ctx: AuthedContext, req: functions.messages.EditMessage
    ) -> TLObject:
        # Options this server does not implement get explicit errors.
        if req.schedule_date is not None or req.schedule_repeat_period is not None:
            raise ScheduleDateInvalid()
        if req.reply_markup is not None:
            raise ReplyMarkupInvalid()
        if req.quick_reply_shortcut_id is not None:
            raise ShortcutInvalid()
        if req.media is not None and not isinstance(req.media, TEXT_MEDIA):
            raise MediaInvalid()
        if req.rich_message is not None:
            raise MediaInvalid()  # rich messages are not plain text either
        peer = await self._resolve_peer(ctx, req.peer)
        if not 0 < req.id <= INT32_MAX:
            raise MessageIdInvalid()
        entities = None
        if req.message is not None:
            entities = encode_entities(
                await checked_entities(ctx, req.entities, req.message, self._resolve_peer)
            )
        edited = await self._edits.edit_text(
            ctx.user_id,
            peer,
            req.id,
            req.message,
            entities,
            Origin(ctx.auth_key_id, ctx.session_id),
            int(ctx.now),
        )
        users = await self._users_for(ctx.user_id, message_user_ids(edited.message))
        return types.Updates(
            updates=[
                types.UpdateEditMessage(
                    message=message_tl(edited.message), pts=edited.pts, pts_count=1
                )
            ],
            users=users,
            chats=[],
            date=int(ctx.now),
            seq=0,
        )

    async def _unchanged(self, ctx: AuthedContext) -> int:
        """The caller's pts when a call deleted nothing (pts_count 0)."""
        return (await self._updates.state(ctx.user_id, int(ctx.now))).pts

    @method(functions.messages.DeleteMessages)
    async def delete_messages(
        self, ctx: AuthedContext, req: functions.messages.DeleteMessages
    ) -> TLObject:
        if len(req.id) > MAX_DELETE_IDS:
            raise LimitInvalid()
        deleted = await self._edits.delete_messages(
            ctx.user_id,
            list(req.id),
            bool(req.revoke),
            Origin(ctx.auth_key_id, ctx.session_id),
            int(ctx.now),
        )
        if deleted is None:
            return types.messages.AffectedMessages(pts=await self._unchanged(ctx), pts_count=0)
        return types.messages.AffectedMessages(pts=deleted.pts, pts_count=deleted.pts_count)

    @method(functions.messages.DeleteHistory)
    async def delete_history(
        self, ctx: AuthedContext, req: functions.messages.DeleteHistory
    ) -> TLObject:
        peer = await self._resolve_peer(ctx, req.peer)
        # min_date/max_date are accepted and ignored: only max_id bounds what goes.
        outcome = await self._edits.delete_history(
            ctx.user_id,
            peer,
            req.max_id,
            just_clear=bool(req.just_clear),
            revoke=bool(req.revoke),
            origin=Origin(ctx.auth_key_id, ctx.session_id),
            now=int(ctx.now),
        )
        offset = 1 if outcome.more else 0
        if outcome.deleted is None:
            return types.messages.AffectedHistory(
                pts=await self._unchanged(ctx), pts_count=0, offset=offset
            )
        return types.messages.AffectedHistory(
            pts=outcome.deleted.pts, pts_count=outcome.deleted.pts_count, offset=offset
        )
