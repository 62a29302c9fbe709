"""messages.editMessage (TL <-> domain); deletes are in deletes.py."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.messages import checked_entities, has_link
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, encode_entities, message_tl, message_user_ids
from telesrv.services.edits import Edits
from telesrv.services.ids import INT32_MAX
from telesrv.services.messages import Origin
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import (
    MediaInvalid,
    MessageIdInvalid,
    ReplyMarkupInvalid,
    ScheduleDateInvalid,
    ShortcutInvalid,
)

# An edit may name these as its media and still be a text edit.
TEXT_MEDIA = (types.InputMediaEmpty, types.InputMediaWebPage)


class EditHandlers:
    """messages.editMessage."""

    def __init__(self, edits: Edits, resolve_peer: PeerResolver, users_for: UsersFor) -> None:
        self._edits = edits
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
        link = None
        if req.message is not None:
            checked = await checked_entities(ctx, req.entities, req.message, self._resolve_peer)
            entities = encode_entities(checked)
            link = has_link(req.message, checked)
        edited = await self._edits.edit_text(
            ctx.user_id,
            peer,
            req.id,
            req.message,
            entities,
            Origin(ctx.auth_key_id, ctx.session_id),
            int(ctx.now),
            link,
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
