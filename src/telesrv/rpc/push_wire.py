"""Pushes, and the answer to a send, written straight to bytes.

A pushed ``updates`` holds mostly a new message and two users; so does the answer to
messages.sendMessage (with the message's updateMessageID). Made as TL objects
first, each of them sets every field its constructor has (about fifty for a message
or a user) and its writer tests every one of them again, for the few that a private
chat's message or a user ever carries. These writers put down what ``message_tl``
and ``user_to_tl`` would make, in the current layer, from the same rows, without the
objects (a user: ``users_tl.user_bytes``); ``tests/rpc/test_push_wire.py`` holds
them to the same bytes as the objects' own writers, so that a constructor's change
in the schema shows there first.

Parts that are rare or nested (a forward header, a reply, media, entities,
reactions, a photo, a status) are still made as TL objects and written by their own
writers.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

from telesrv.rpc.media import snapshot_media_tl
from telesrv.rpc.reactions_tl import message_reactions
from telesrv.rpc.stored_tl import decode_entities, decode_fwd_header
from telesrv.services.messages import BoxMessage
from telesrv.tl import TLObject, types
from telesrv.tl.core import write_object, write_string, write_vector_boxed

_VECTOR = 0x1CB5C415
# The constructors whose layout the writers below put down. A schema that changes
# one gives it another id: the server then refuses to start rather than send the
# old layout under the new id.
LAYOUTS: dict[type[TLObject], int] = {
    types.Message: 0x7600B9D3,
    types.UpdateNewMessage: 0x1F2B0AFD,
    types.UpdateEditMessage: 0xE40370A3,
    types.UpdateMessageID: 0x4E90BFD6,
    types.Updates: 0x74AE4240,
    types.PeerUser: 0x59511722,
    types.User: 0xB1B8CC83,
}
for _made, _written in LAYOUTS.items():
    if _made.CONSTRUCTOR_ID != _written:
        raise RuntimeError(f"push_wire.py writes {_made.TL_NAME} #{_written:08x}: rewrite it")

# message#7600b9d3 flags flags2 id from_id:flags.8?Peer ... peer_id ... date message
# media:flags.9? ... entities:flags.7? ... edit_date:flags.15? ... grouped_id:flags.17?
# reactions:flags.20? ...; from_id and peer_id are always a peerUser here.
_MESSAGE_HEAD = struct.Struct("<IIIiIqIq")
_OUT = 1 << 1
_FWD_FROM = 1 << 2
_REPLY_TO = 1 << 3
_MEDIA_UNREAD = 1 << 5
_ENTITIES = 1 << 7
_FROM_ID = 1 << 8
_MEDIA = 1 << 9
_SILENT = 1 << 13
_EDIT_DATE = 1 << 15
_GROUPED_ID = 1 << 17
_REACTIONS = 1 << 20
_PINNED = 1 << 24
_NOFORWARDS = 1 << 26

_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_U32 = struct.Struct("<I")
_TWO_I32 = struct.Struct("<ii")
_VECTOR_HEAD = struct.Struct("<II")
_UPDATES_TAIL = struct.Struct("<IIii")  # an empty chats vector, date, seq
_MESSAGE_ID = struct.Struct("<Iiq")  # updateMessageID id random_id

PEER_USER = types.PeerUser.CONSTRUCTOR_ID
UPDATE_NEW_MESSAGE = types.UpdateNewMessage.CONSTRUCTOR_ID
UPDATE_EDIT_MESSAGE = types.UpdateEditMessage.CONSTRUCTOR_ID


if TYPE_CHECKING:
    MessageParts = tuple[
        types.MessageFwdHeader | None,
        types.MessageReplyHeader | None,
        types.TypeMessageMedia | None,
        list[types.TypeMessageEntity] | None,
        types.MessageReactions | None,
    ]


def message_parts(m: BoxMessage) -> MessageParts:
    """The nested parts of a box's message as TL objects: its forward header, reply,
    media, entities and reactions (None: it has none). ``message_tl`` and
    ``write_message`` both take them from here."""
    reply = None
    if m.reply_to_msg_id is not None or m.quote_text is not None:
        reply = types.MessageReplyHeader(
            reply_to_msg_id=m.reply_to_msg_id,
            quote=m.quote_text is not None,
            quote_text=m.quote_text,
            quote_entities=decode_entities(m.quote_entities),
            quote_offset=m.quote_offset,
        )
    return (
        decode_fwd_header(m.fwd_from),
        reply,
        snapshot_media_tl(m.media),
        decode_entities(m.entities),
        message_reactions(m.owner_user_id, m.reactions, m.reaction_unread),
    )


def write_message(buf: bytearray, m: BoxMessage) -> None:
    """``message_tl(m)``, written."""
    fwd, reply, media, entities, reactions = message_parts(m)
    flags = _FROM_ID
    if m.out:
        flags |= _OUT
    if m.media_unread:
        flags |= _MEDIA_UNREAD
    if m.silent:
        flags |= _SILENT
    if m.pinned:
        flags |= _PINNED
    if m.noforwards:
        flags |= _NOFORWARDS
    if fwd is not None:
        flags |= _FWD_FROM
    if reply is not None:
        flags |= _REPLY_TO
    if media is not None:
        flags |= _MEDIA
    if entities is not None:
        flags |= _ENTITIES
    if m.edit_date is not None:
        flags |= _EDIT_DATE
    if m.grouped_id is not None:
        flags |= _GROUPED_ID
    if reactions is not None:
        flags |= _REACTIONS
    buf += _MESSAGE_HEAD.pack(
        types.Message.CONSTRUCTOR_ID,
        flags,
        0,
        m.box_id,
        PEER_USER,
        m.sender_user_id,
        PEER_USER,
        m.peer_user_id,
    )
    if fwd is not None:
        write_object(buf, fwd)
    if reply is not None:
        write_object(buf, reply)
    buf += _I32.pack(m.date)
    write_string(buf, m.message)
    if media is not None:
        write_object(buf, media)
    if entities is not None:
        write_vector_boxed(buf, list[TLObject](entities))
    if m.edit_date is not None:
        buf += _I32.pack(m.edit_date)
    if m.grouped_id is not None:
        buf += _I64.pack(m.grouped_id)
    if reactions is not None:
        write_object(buf, reactions)


def write_message_update(
    buf: bytearray, constructor_id: int, m: BoxMessage, pts: int, pts_count: int
) -> None:
    """updateNewMessage or updateEditMessage (by ``constructor_id``) of ``m``, written."""
    buf += _U32.pack(constructor_id)
    write_message(buf, m)
    buf += _TWO_I32.pack(pts, pts_count)


def updates_bytes(updates: bytes, count: int, users: Sequence[bytes], date: int) -> bytes:
    """An ``updates`` of ``count`` updates (written one after another in ``updates``),
    the users given (each written) and no chats."""
    return b"".join(
        (
            _U32.pack(types.Updates.CONSTRUCTOR_ID),
            _VECTOR_HEAD.pack(_VECTOR, count),
            updates,
            _VECTOR_HEAD.pack(_VECTOR, len(users)),
            *users,
            _UPDATES_TAIL.pack(_VECTOR, 0, date, 0),
        )
    )


def sent_answer_bytes(m: BoxMessage, pts: int, random_id: int, users: Sequence[bytes]) -> bytes:
    """The answer to a send of one message: an ``updates`` of its updateMessageID and
    the sender's updateNewMessage of ``m`` at ``pts``, with ``users`` (each written)."""
    buf = bytearray(_MESSAGE_ID.pack(types.UpdateMessageID.CONSTRUCTOR_ID, m.box_id, random_id))
    write_message_update(buf, UPDATE_NEW_MESSAGE, m, pts, 1)
    return updates_bytes(bytes(buf), 2, users, m.date)
