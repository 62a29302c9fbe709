"""messages.*: private text messages (TL <-> domain; the business rules are in services)."""

from __future__ import annotations

import re
from collections.abc import Callable

from telesrv.rpc import push_wire
from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import (
    UsersFor,
    UsersWire,
    encode_entities,
    message_user_ids,
    peer_user,
    sent_answer_tl,
)
from telesrv.rpc.written_answer import WrittenAnswer
from telesrv.services.ids import INT32_MAX
from telesrv.services.messages import (
    MAX_QUOTE_LENGTH,
    MAX_TEXT_LENGTH,
    MessageService,
    Origin,
    OutgoingText,
)
from telesrv.tl import LAYER, TLObject, functions, types
from telesrv.tl.errors import (
    EffectIdInvalid,
    EntitiesTooLong,
    EntityBoundsInvalid,
    EntityMentionUserInvalid,
    PaymentUnsupported,
    PollOptionInvalid,
    QuoteTextInvalid,
    ReplyMarkupInvalid,
    ReplyMessageIdInvalid,
    ReplyToMonoforumPeerInvalid,
    ScheduleDateInvalid,
    SendAsPeerInvalid,
    ShortcutInvalid,
    StoryIdInvalid,
    SuggestedPostPeerInvalid,
)
from telesrv.tl.rpcerror import RpcError

MAX_ENTITIES = 1024

# (user_id, serialized updates, (auth_key_id, session_id) to skip) -> sessions reached
EphemeralPush = Callable[[int, bytes, tuple[int, int] | None], int]


def _no_push(user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int:
    return 0


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


# Entities carrying text of their own, and how long that text may be (characters).
# Telegram documents no figure; these keep every real use (a URL an address bar takes,
# a language tag, the text a diff entity replaces) and refuse megabyte payloads that
# would make every reader of the chat download them again.
MAX_URL_LENGTH = 2048
MAX_LANGUAGE_LENGTH = 64
MAX_ENTITY_TEXT: dict[type[TLObject], tuple[str, int]] = {
    types.MessageEntityTextUrl: ("url", MAX_URL_LENGTH),
    types.MessageEntityPre: ("language", MAX_LANGUAGE_LENGTH),
    types.MessageEntityDiffReplace: ("old_text", MAX_TEXT_LENGTH),
}
# All the entity text of one message together: a few long links, not a thousand.
MAX_ENTITY_TEXT_TOTAL = 8 * MAX_URL_LENGTH


def check_entities(entities: list[types.TypeMessageEntity] | None, text: str) -> None:
    """Offsets inside the text (ENTITY_BOUNDS_INVALID); count and carried text within
    their bounds (ENTITIES_TOO_LONG)."""
    if not entities:
        return
    if len(entities) > MAX_ENTITIES:
        raise EntitiesTooLong()
    size = utf16_length(text)
    total = 0
    for e in entities:
        offset, length = getattr(e, "offset", -1), getattr(e, "length", -1)
        if offset < 0 or length <= 0 or offset + length > size:
            raise EntityBoundsInvalid()
        carried = MAX_ENTITY_TEXT.get(type(e))
        if carried is not None:
            value = getattr(e, carried[0])
            if len(value) > carried[1]:
                raise EntitiesTooLong()
            total += len(value)
    if total > MAX_ENTITY_TEXT_TOTAL:
        raise EntitiesTooLong()


def _mentioned_peer(user: types.TypeInputUser) -> types.TypeInputPeer | None:
    """The peer a mention names, in the sender's terms (None: not a user one can name)."""
    if isinstance(user, types.InputUserSelf):
        return types.InputPeerSelf()
    if isinstance(user, types.InputUser):
        return types.InputPeerUser(user_id=user.user_id, access_hash=user.access_hash)
    return None


async def checked_entities(
    ctx: RequestContext,
    entities: list[types.TypeMessageEntity] | None,
    text: str,
    resolve_peer: PeerResolver,
) -> list[types.TypeMessageEntity] | None:
    """check_entities, then each inputMessageEntityMentionName (which names a user in
    the sender's terms, access hash included) becomes messageEntityMentionName, as every
    reader must see it; a user the sender cannot name is ENTITY_MENTION_USER_INVALID."""
    check_entities(entities, text)
    if not entities or not any(
        isinstance(e, types.InputMessageEntityMentionName) for e in entities
    ):
        return entities
    out: list[types.TypeMessageEntity] = []
    for e in entities:
        if isinstance(e, types.InputMessageEntityMentionName):
            named = _mentioned_peer(e.user_id)
            if named is None:
                raise EntityMentionUserInvalid()
            try:
                user_id = await resolve_peer(ctx, named)
            except RpcError:
                raise EntityMentionUserInvalid() from None
            e = types.MessageEntityMentionName(offset=e.offset, length=e.length, user_id=user_id)
        out.append(e)
    return out


def reject_unsupported_send_options(
    req: functions.messages.SendMessage | functions.messages.ForwardMessages,
) -> None:
    """Options this server does not implement get explicit errors instead of being
    ignored (sendMessage and forwardMessages share these options)."""
    if req.schedule_date is not None or req.schedule_repeat_period is not None:
        raise ScheduleDateInvalid()
    if req.quick_reply_shortcut is not None:
        raise ShortcutInvalid()
    if req.effect is not None:
        raise EffectIdInvalid()
    if req.allow_paid_stars is not None:
        raise PaymentUnsupported()
    if req.suggested_post is not None:
        raise SuggestedPostPeerInvalid()
    if req.send_as is not None:
        raise SendAsPeerInvalid()  # only channels may send as someone else


async def resolve_reply(
    ctx: RequestContext, reply: types.TypeInputReplyTo, recipient: int, resolve_peer: PeerResolver
) -> tuple[int, str | None, list[types.TypeMessageEntity] | None, int | None]:
    """The reply fields of a send: (message id, quote text, quote entities, offset)."""
    if isinstance(reply, types.InputReplyToStory):
        raise StoryIdInvalid()
    if isinstance(reply, types.InputReplyToMonoForum) or (
        isinstance(reply, types.InputReplyToMessage) and reply.monoforum_peer_id is not None
    ):
        raise ReplyToMonoforumPeerInvalid()
    if not isinstance(reply, types.InputReplyToMessage):
        raise ReplyMessageIdInvalid()
    if reply.todo_item_id is not None or reply.poll_option is not None:
        raise PollOptionInvalid()
    if reply.reply_to_peer_id is not None:
        if await resolve_peer(ctx, reply.reply_to_peer_id) != recipient:
            raise ReplyMessageIdInvalid()  # cross-chat replies are not supported
    if not 0 < reply.reply_to_msg_id <= INT32_MAX:
        raise ReplyMessageIdInvalid()
    quote_text = reply.quote_text
    if quote_text is not None:
        if not quote_text or len(quote_text) > MAX_QUOTE_LENGTH:
            raise QuoteTextInvalid()
    quote_entities = None
    if quote_text is not None:
        quote_entities = await checked_entities(ctx, reply.quote_entities, quote_text, resolve_peer)
    offset = reply.quote_offset
    if offset is not None:
        offset = max(0, min(offset, MAX_TEXT_LENGTH))
    return reply.reply_to_msg_id, quote_text, quote_entities, offset


class MessagesHandlers:
    """messages.sendMessage and setTyping; history and read receipts have their own
    handlers, in history.py and read_receipts.py."""

    def __init__(
        self,
        messages: MessageService,
        resolve_peer: PeerResolver,
        users_for: UsersFor,
        users_wire: UsersWire,
        push_ephemeral: EphemeralPush = _no_push,
    ) -> None:
        self._messages = messages
        self._resolve_peer = resolve_peer
        self._users_for = users_for
        self._users_wire = users_wire
        self._push_ephemeral = push_ephemeral

    async def _peer(self, ctx: RequestContext, peer: types.TypeInputPeer) -> int:
        return await self._resolve_peer(ctx, peer)

    @method(functions.messages.SendMessage)
    async def send_message(
        self, ctx: AuthedContext, req: functions.messages.SendMessage
    ) -> WrittenAnswer | types.Updates:
        reject_unsupported_send_options(req)
        if req.reply_markup is not None:
            raise ReplyMarkupInvalid()
        recipient = await self._peer(ctx, req.peer)
        MessageService.check_text(req.message)
        entities = await checked_entities(ctx, req.entities, req.message, self._resolve_peer)
        reply_to, quote_text, quote_entities, quote_offset = None, None, None, None
        if req.reply_to is not None and not _no_reply(req.reply_to):
            reply_to, quote_text, quote_entities, quote_offset = await self._reply(
                ctx, req.reply_to, recipient
            )
        sent = await self._messages.send_text(
            OutgoingText(
                sender=ctx.user_id,
                recipient=recipient,
                random_id=req.random_id,
                text=req.message,
                entities=encode_entities(entities),
                silent=req.silent,
                noforwards=req.noforwards,
                reply_to=reply_to,
                quote_text=quote_text,
                quote_entities=encode_entities(quote_entities),
                quote_offset=quote_offset,
                clear_draft=bool(req.clear_draft),
                has_link=has_link(req.message, entities),
            ),
            Origin(ctx.auth_key_id, ctx.session_id),
            int(ctx.now),
        )
        user_ids = message_user_ids(sent.message)
        if ctx.layer != LAYER:
            # Any other layer (older, or a newer one vendored) is converted from the
            # objects: reading written bytes back first would cost more than writing
            # them saved.
            users = await self._users_for(ctx.user_id, user_ids)
            return sent_answer_tl(sent.message, sent.pts, req.random_id, users)
        # Written without its TL objects, as a push is: the most frequent answer there is.
        written = await self._users_wire(ctx.user_id, user_ids)
        return WrittenAnswer(
            push_wire.sent_answer_bytes(sent.message, sent.pts, req.random_id, written)
        )

    async def _reply(
        self, ctx: RequestContext, reply: types.TypeInputReplyTo, recipient: int
    ) -> tuple[int, str | None, list[types.TypeMessageEntity] | None, int | None]:
        return await resolve_reply(ctx, reply, recipient, self._resolve_peer)

    @method(functions.messages.SaveDefaultSendAs)
    async def save_default_send_as(
        self, ctx: AuthedContext, req: functions.messages.SaveDefaultSendAs
    ) -> bool:
        # Only in groups and channels may one send as another peer, and this server has
        # private chats only: a known peer is answered that it takes no send_as.
        await self._peer(ctx, req.peer)
        raise SendAsPeerInvalid()

    @method(functions.messages.SetTyping)
    async def set_typing(self, ctx: AuthedContext, req: functions.messages.SetTyping) -> bool:
        """Typing is ephemeral: pushed to the peer's online sessions, never logged."""
        peer = await self._peer(ctx, req.peer)
        if await self._messages.may_notify(ctx.user_id, peer):
            users = await self._users_for(peer, [ctx.user_id])
            body = types.Updates(
                updates=[types.UpdateUserTyping(user_id=ctx.user_id, action=req.action)],
                users=users,
                chats=[],
                date=int(ctx.now),
                seq=0,
            ).to_bytes()
            self._push_ephemeral(peer, body, None)
        return True


__all__ = ["MessagesHandlers", "peer_user"]


def _no_reply(reply: types.TypeInputReplyTo) -> bool:
    """A reply to message 0 with nothing else set means no reply: some clients
    (pyrotgfork) send it with every message, and Telegram accepts it."""
    return (
        isinstance(reply, types.InputReplyToMessage)
        and reply.reply_to_msg_id == 0
        and all(getattr(reply, f) is None for f in reply.FIELDS if f != "reply_to_msg_id")
    )


async def send_reply(
    ctx: RequestContext,
    reply: types.TypeInputReplyTo | None,
    recipient: int,
    resolve_peer: PeerResolver,
) -> tuple[int | None, str | None, list[types.TypeMessageEntity] | None, int | None]:
    """The reply fields of a send, all None when it replies to nothing."""
    if reply is None or _no_reply(reply):
        return None, None, None, None
    return await resolve_reply(ctx, reply, recipient, resolve_peer)


_LINK_ENTITIES = (types.MessageEntityUrl, types.MessageEntityTextUrl)
_LINK = re.compile(r"(?i)\b(?:https?://|www\.)\S")


def has_link(text: str, entities: list[types.TypeMessageEntity] | None) -> bool:
    """Whether a message shows a link (what the search's link filter finds): a link
    entity, or an address in the text (clients leave plain addresses to the server)."""
    return any(isinstance(e, _LINK_ENTITIES) for e in entities or ()) or bool(_LINK.search(text))
