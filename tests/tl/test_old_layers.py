"""Older layers: requests upgraded to current objects, answers down-converted.

The round-trip tests hand what the server sends, converted to an older layer, to the
client library of that layer (in its own venv, see ``client_venv``) and compare what it
parses with the current object, field by field.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from telesrv.rpc.media import snapshot_media_tl
from telesrv.tl import LAYER, TLObject, decode, functions, types
from telesrv.tl import layers as tl_layers
from telesrv.tl.layers import (
    MIN_LAYER,
    NEWEST_LAYER,
    OTHER_LAYERS,
    ConversionError,
    OldObject,
    downgrade,
    downgrade_bytes,
    served_layer,
)
from telesrv.tl.layers.vendored import layer_diff
from telesrv.tl.parser import load_old_layers, parse_schema
from telesrv.tl.service import encode_result

from .schema_reader import SchemaReader, all_layers

ROOT = Path(__file__).resolve().parents[2]
CLIENT_SCRIPTS = Path(__file__).parent / "clients"
# Client libraries that cannot share our environment live in venvs under this folder,
# one per library (created by .ci/client-venvs).
VENVS = Path(os.environ.get("TELESRV_CLIENT_VENVS", ROOT / ".client-venvs"))


# -- the vendored schemas --------------------------------------------------------------


def test_vendored_layers() -> None:
    vendored = load_old_layers()
    assert {158, 181, 214, 220, 227} <= set(vendored)
    assert {v for v in OTHER_LAYERS if v < LAYER} == {v for v in vendored if v < LAYER}
    assert set(OTHER_LAYERS) == set(vendored) - {LAYER}
    for layer, combinators in vendored.items():
        assert len({c.id for c in combinators}) == len(combinators), layer


def test_only_differences_are_stored() -> None:
    current_ids = set(types_by_id())
    vendored = load_old_layers()
    for layer in OTHER_LAYERS:
        diff = layer_diff(layer)
        stored = parse_schema("\n".join(diff.type_lines + diff.function_lines), "api")
        for c in stored:
            assert c.id not in current_ids, (layer, c.name)
        # exactly the layer's own combinators the current layer lacks, and no more
        assert {c.id for c in stored} == {c.id for c in vendored[layer]} - current_ids
        old_ids = {c.id for c in vendored[layer]}
        assert diff.lacking == {
            cid
            for cid, cls in types_by_id().items()
            if not cls.IS_FUNCTION and "mt_" not in cls.__name__ and cid not in old_ids
        }, layer


def types_by_id() -> dict[int, type[TLObject]]:
    from telesrv.tl import CLASSES

    return dict(CLASSES)


# Layers no public source has (see the layers README): served the nearest one.
UNPUBLISHED = {141: 140, 153: 152, 226: 225}


def test_every_layer_in_range_is_vendored() -> None:
    assert (MIN_LAYER, NEWEST_LAYER) == (133, 230)
    in_range = set(range(MIN_LAYER, NEWEST_LAYER + 1))
    assert in_range - set(UNPUBLISHED) == {*OTHER_LAYERS, LAYER}


@pytest.mark.parametrize(
    "declared", [v for v in range(MIN_LAYER, NEWEST_LAYER + 1) if v not in UNPUBLISHED]
)
def test_every_layer_is_served_as_itself(declared: int) -> None:
    assert served_layer(declared) == declared


@pytest.mark.parametrize(("declared", "served"), UNPUBLISHED.items())
def test_an_unpublished_layer_is_served_the_one_before(declared: int, served: int) -> None:
    assert served_layer(declared) == served


@pytest.mark.parametrize("declared", [NEWEST_LAYER + 1, 300, 2**31 - 1])
def test_newer_layers_get_the_newest(declared: int) -> None:
    assert served_layer(declared) == NEWEST_LAYER


# -- requests from older layers -----------------------------------------------------------

# messages.sendMessage as layer 158 had it: reply_to_msg_id:int instead of InputReplyTo.
SEND_158 = (
    "messages.sendMessage#1cc20387 flags:# no_webpage:flags.1?true silent:flags.5?true "
    "background:flags.6?true clear_draft:flags.7?true noforwards:flags.14?true "
    "update_stickersets_order:flags.15?true peer:InputPeer reply_to_msg_id:flags.0?int "
    "top_msg_id:flags.9?int message:string random_id:long reply_markup:flags.2?ReplyMarkup "
    "entities:flags.3?Vector<MessageEntity> schedule_date:flags.10?int "
    "send_as:flags.13?InputPeer = Updates;"
)


def _old_send_message(reply_to: int | None) -> bytes:
    flags = 1 << 5
    if reply_to is not None:
        flags |= 1
    body = struct.pack("<II", 0x1CC20387, flags)
    body += types.InputPeerUser(user_id=42, access_hash=7).to_bytes()
    if reply_to is not None:
        body += struct.pack("<i", reply_to)
    body += bytes([2]) + b"hi" + b"\0"
    body += struct.pack("<q", 99)
    return body


def test_old_request_id_upgrades_by_name() -> None:
    (c,) = parse_schema(SEND_158, "api")
    assert c.id == 0x1CC20387
    request = decode(_old_send_message(reply_to=None))
    assert isinstance(request, functions.messages.SendMessage)
    assert request.peer == types.InputPeerUser(user_id=42, access_hash=7)
    assert request.message == "hi"
    assert request.random_id == 99
    assert request.silent is True and request.noforwards is False
    assert request.reply_to is None
    assert request.entities is None


def test_old_reply_to_msg_id_becomes_input_reply_to() -> None:
    request = decode(_old_send_message(reply_to=17))
    assert isinstance(request, functions.messages.SendMessage)
    assert request.reply_to == types.InputReplyToMessage(reply_to_msg_id=17)


@pytest.mark.parametrize("constructor", [0x9C5386E4, 0x073EC805, 0x22C0F6D5, 0xB07038B0])
def test_an_older_input_reply_to_message_keeps_its_message_id(constructor: int) -> None:
    # Layers 160-229 had inputReplyToMessage with fewer fields; its reply_to_msg_id is
    # the field itself, not the pre-160 one that became reply_to (Web K's replies at
    # layer 213 arrived as replies to message 0).
    old = struct.pack("<IIii", constructor, 1, 17, 5)  # flags: top_msg_id
    assert decode(old) == types.InputReplyToMessage(reply_to_msg_id=17, top_msg_id=5)
    send = functions.messages.SendMessage(
        peer=types.InputPeerSelf(),
        message="hi",
        random_id=1,
        reply_to=types.InputReplyToMessage(reply_to_msg_id=1),
    ).to_bytes()
    current = types.InputReplyToMessage(reply_to_msg_id=1).to_bytes()
    at = send.index(current)
    request = decode(send[:at] + old + send[at + len(current) :])
    assert isinstance(request, functions.messages.SendMessage)
    assert request.reply_to == types.InputReplyToMessage(reply_to_msg_id=17, top_msg_id=5)


def test_old_request_inside_invoke_with_layer() -> None:
    wrapped = functions.InvokeWithLayer(layer=158, query=types.PeerUser(user_id=1)).to_bytes()
    # Replace the (placeholder) query with the old-layer request bytes.
    head = wrapped[: len(wrapped) - len(types.PeerUser(user_id=1).to_bytes())]
    request = decode(head + _old_send_message(reply_to=3))
    assert isinstance(request, functions.InvokeWithLayer)
    assert isinstance(request.query, functions.messages.SendMessage)
    assert request.query.reply_to == types.InputReplyToMessage(reply_to_msg_id=3)


# dialogFilter as layers 158 and 181 have it: title:string, not TextWithEntities.
def _old_update_dialog_filter(title: str) -> bytes:
    body = struct.pack("<IIi", 0x1AD4A04A, 1, 2)  # messages.updateDialogFilter, flags, id
    body += struct.pack("<Ii", 0x7438F7E8, 1)  # dialogFilter (158), flags: contacts
    body += struct.pack("<i", 2)
    raw = title.encode()
    body += bytes([len(raw)]) + raw + bytes(-(len(raw) + 1) % 4)
    for peers in ([types.InputPeerUser(user_id=6, access_hash=9)], [], []):
        body += struct.pack("<Ii", 0x1CB5C415, len(peers)) + b"".join(p.to_bytes() for p in peers)
    return body


def test_old_folder_title_becomes_text_with_entities() -> None:
    request = decode(_old_update_dialog_filter("Work"))
    assert isinstance(request, functions.messages.UpdateDialogFilter)
    assert isinstance(request.filter, types.DialogFilter)
    assert request.filter.title == types.TextWithEntities(text="Work", entities=[])
    assert request.filter.contacts is True
    assert request.filter.pinned_peers == [types.InputPeerUser(user_id=6, access_hash=9)]


@pytest.mark.parametrize("layer", [158, 181])
def test_folder_title_goes_to_old_layers_as_text(layer: int) -> None:
    folder = types.DialogFilter(
        id=2,
        title=types.TextWithEntities(
            text="Work", entities=[types.MessageEntityBold(offset=0, length=4)]
        ),
        pinned_peers=[],
        include_peers=[types.InputPeerUser(user_id=6, access_hash=9)],
        exclude_peers=[],
    )
    out = downgrade(types.UpdateDialogFilter(id=2, filter=folder), layer)
    assert out.to_dict()["filter"]["title"] == "Work"


def test_dialog_filters_go_to_layer_158_as_a_vector() -> None:
    filters = types.messages.DialogFilters(filters=[types.DialogFilterDefault()])
    request = functions.messages.GetDialogFilters()
    data = encode_result(request, downgrade(filters, 158))
    assert data == struct.pack("<Ii", 0x1CB5C415, 1) + types.DialogFilterDefault().to_bytes()
    assert encode_result(request, downgrade(filters, 181)) == filters.to_bytes()


def test_current_request_decodes_as_before() -> None:
    request = functions.messages.SendMessage(peer=types.InputPeerSelf(), message="x", random_id=1)
    assert decode(request.to_bytes()) == request


# -- answers for older layers ---------------------------------------------------------------


def user(uid: int = 5, **kw: Any) -> types.User:
    fields: dict[str, Any] = {
        "id": uid,
        "access_hash": 77,
        "first_name": "Ann",
        "last_name": "Lee",
        "username": "ann",
        "phone": "15550001",
        "status": types.UserStatusOffline(was_online=1_700_000_000),
        "photo": types.UserProfilePhotoEmpty(),
        "contact": True,
    }
    fields.update(kw)
    return types.User(**fields)


def test_current_layer_takes_no_detour() -> None:
    u = user()
    assert downgrade(u, LAYER) is u
    assert downgrade(u, 230) is u
    assert downgrade_bytes(u.to_bytes(), LAYER) == u.to_bytes()


def test_old_layer_gets_old_user() -> None:
    out = downgrade(user(), 158)
    assert isinstance(out, OldObject)
    assert out.tl_name == "user"
    assert out.to_bytes()[:4] != struct.pack("<I", types.User.CONSTRUCTOR_ID)


def test_shared_objects_are_kept() -> None:
    peer = types.PeerUser(user_id=1)
    assert downgrade(peer, 158) is peer
    status = types.UserStatusOnline(expires=5)
    assert downgrade([status], 158)[0] is status


def test_unknown_media_becomes_unsupported() -> None:
    media = types.MessageMediaToDo(
        todo=types.TodoList(title=types.TextWithEntities(text="t", entities=[]), list=[])
    )
    msg = message(media=media)
    out = downgrade(msg, 158)
    assert out.to_dict()["media"] == {"_": "messageMediaUnsupported"}


def test_unknown_update_is_not_sent() -> None:
    # updateSentStoryReaction does not exist at layer 158: left out of the updates.
    story = types.UpdateSentStoryReaction(
        peer=types.PeerUser(user_id=1), story_id=1, reaction=types.ReactionEmpty()
    )
    kept = types.UpdateUserTyping(user_id=5, action=types.SendMessageTypingAction())
    updates = types.Updates(updates=[story, kept], users=[], chats=[], date=1, seq=0)
    out = downgrade(updates, 158)
    assert [u.to_dict() for u in out.updates] == [
        {"_": "updateUserTyping", "user_id": 5, "action": {"_": "sendMessageTypingAction"}}
    ]
    short = types.UpdateShort(update=story, date=1)
    assert downgrade_bytes(short.to_bytes(), 158) is None
    with pytest.raises(ConversionError):
        downgrade(short, 158)


# -- the corpus: what the server sends --------------------------------------------------------


def message(**kw: Any) -> types.Message:
    fields: dict[str, Any] = {
        "id": 10,
        "peer_id": types.PeerUser(user_id=6),
        "from_id": types.PeerUser(user_id=5),
        "date": 1_700_000_100,
        "message": "hello @bob",
        "out": True,
        "entities": [
            types.MessageEntityBold(offset=0, length=5),
            types.MessageEntityMentionName(offset=6, length=4, user_id=6),
        ],
    }
    fields.update(kw)
    return types.Message(**fields)


# Media as messages store it (the snapshot) and render it.
PHOTO_SNAPSHOT: dict[str, Any] = {
    "kind": "photo",
    "id": 1001,
    "access_hash": -5,
    "file_reference": "0a0b",
    "date": 1_700_000_000,
    "dc_id": 2,
    "has_stickers": False,
    "stripped": "01281e",
    "sizes": [{"type": "m", "w": 320, "h": 240, "size": 9000}],
}
DOCUMENT_SNAPSHOT: dict[str, Any] = {
    "kind": "document",
    "id": 1002,
    "access_hash": 7,
    "file_reference": "0c",
    "date": 1_700_000_000,
    "dc_id": 2,
    "mime_type": "application/pdf",
    "size": 12345,
    "attributes": [types.DocumentAttributeFilename(file_name="a.pdf").to_bytes().hex()],
    "thumbs": [{"type": "s", "w": 90, "h": 90, "size": 800}],
    "stripped": None,
    "shown_as": "document",
    "nosound": False,
}
VOICE_SNAPSHOT: dict[str, Any] = {
    **DOCUMENT_SNAPSHOT,
    "id": 1003,
    "mime_type": "audio/ogg",
    "attributes": [types.DocumentAttributeAudio(duration=3, voice=True).to_bytes().hex()],
    "thumbs": [],
    "shown_as": "voice",
}


def notify() -> types.PeerNotifySettings:
    return types.PeerNotifySettings(show_previews=True, silent=False, mute_until=0)


def dialog_filter() -> types.DialogFilter:
    return types.DialogFilter(
        contacts=True,
        exclude_muted=True,
        id=2,
        title=types.TextWithEntities(text="Work", entities=[]),
        emoticon="💼",
        pinned_peers=[types.InputPeerUser(user_id=6, access_hash=9)],
        include_peers=[],
        # Not InputPeerSelf alone: Pyrogram reads a vector of one 4-byte object as an int.
        exclude_peers=[types.InputPeerUser(user_id=7, access_hash=3)],
    )


def corpus() -> dict[str, TLObject]:
    reply = message(
        id=11,
        reply_to=types.MessageReplyHeader(reply_to_msg_id=10, quote_text="hel", quote=True),
    )
    fwd = message(
        id=12,
        fwd_from=types.MessageFwdHeader(
            date=1_700_000_000, from_id=types.PeerUser(user_id=7), from_name="Zed"
        ),
    )
    reactions = types.MessageReactions(
        results=[
            types.ReactionCount(
                chosen_order=0, reaction=types.ReactionEmoji(emoticon="👍"), count=2
            )
        ],
        recent_reactions=[
            types.MessagePeerReaction(
                big=True,
                unread=True,
                peer_id=types.PeerUser(user_id=6),
                date=1_700_000_150,
                reaction=types.ReactionEmoji(emoticon="👍"),
            ),
            types.MessagePeerReaction(
                my=True,
                peer_id=types.PeerUser(user_id=5),
                date=1_700_000_140,
                reaction=types.ReactionEmoji(emoticon="👍"),
            ),
        ],
    )
    reacted = message(id=13, reactions=reactions)
    users: list[types.TypeUser] = [user(5, self_=True), user(6)]
    dialog = types.Dialog(
        peer=types.PeerUser(user_id=6),
        top_message=12,
        read_inbox_max_id=10,
        read_outbox_max_id=9,
        unread_count=2,
        unread_mentions_count=0,
        unread_reactions_count=1,
        unread_poll_votes_count=0,
        notify_settings=notify(),
        pinned=True,
    )
    state = types.updates.State(pts=5, qts=0, date=1_700_000_200, seq=0, unread_count=1)
    peer = types.PeerUser(user_id=6)
    update_list: list[types.TypeUpdate] = [
        types.UpdateNewMessage(message=message(), pts=3, pts_count=1),
        types.UpdateEditMessage(message=message(edit_date=1_700_000_300), pts=4, pts_count=1),
        types.UpdateMessageID(id=10, random_id=123),
        types.UpdateDeleteMessages(messages=[1, 2], pts=6, pts_count=2),
        types.UpdateReadHistoryInbox(
            peer=peer, max_id=10, still_unread_count=0, pts=7, pts_count=1
        ),
        types.UpdateReadHistoryOutbox(peer=peer, max_id=10, pts=8, pts_count=1),
        types.UpdateReadMessagesContents(messages=[10], pts=9, pts_count=1),
        types.UpdateUserTyping(user_id=6, action=types.SendMessageTypingAction()),
        types.UpdatePeerBlocked(peer_id=peer, blocked=True),
        types.UpdateContactsReset(),
        types.UpdateMessageReactions(peer=peer, msg_id=13, reactions=reactions),
        types.UpdateDialogPinned(pinned=True, peer=types.DialogPeer(peer=peer)),
        types.UpdatePinnedDialogs(order=[types.DialogPeer(peer=peer)]),
        types.UpdateDialogUnreadMark(unread=True, peer=types.DialogPeer(peer=peer)),
        types.UpdateDraftMessage(
            peer=peer,
            draft=types.DraftMessage(
                message="draft",
                entities=[types.MessageEntityBold(offset=0, length=5)],
                date=1_700_000_500,
            ),
        ),
        types.UpdateDraftMessage(peer=peer, draft=types.DraftMessageEmpty(date=1_700_000_600)),
        types.UpdateFolderPeers(
            folder_peers=[types.FolderPeer(peer=peer, folder_id=1)], pts=10, pts_count=1
        ),
        types.UpdateNotifySettings(peer=types.NotifyPeer(peer=peer), notify_settings=notify()),
        types.UpdatePeerSettings(peer=peer, settings=types.PeerSettings(add_contact=True)),
        types.UpdateDialogFilter(id=2, filter=dialog_filter()),
        types.UpdateDialogFilterOrder(order=[2]),
        types.UpdateDialogFilters(),
    ]
    return {
        "user": users[0],
        "users.userFull": types.users.UserFull(
            full_user=types.UserFull(
                id=6,
                settings=types.PeerSettings(),
                notify_settings=notify(),
                common_chats_count=0,
                about="bio",
            ),
            chats=[],
            users=[users[1]],
        ),
        "message": message(),
        "message.reply": reply,
        "message.forward": fwd,
        "dialog": dialog,
        "messages.dialogs": types.messages.Dialogs(
            dialogs=[dialog], messages=[fwd], chats=[], users=users
        ),
        "messages.messages": types.messages.Messages(
            messages=[message(), reply, fwd, reacted], topics=[], chats=[], users=users
        ),
        # getPinnedDialogs(folder_id=0): the archive's entry leads the main list's pins.
        "messages.peerDialogs (archive entry)": types.messages.PeerDialogs(
            dialogs=[
                types.DialogFolder(
                    pinned=True,
                    folder=types.Folder(id=1, title="Archived Chats"),
                    peer=types.PeerUser(user_id=6),
                    top_message=12,
                    unread_muted_peers_count=0,
                    unread_unmuted_peers_count=1,
                    unread_muted_messages_count=0,
                    unread_unmuted_messages_count=2,
                ),
                dialog,
            ],
            messages=[fwd],
            chats=[],
            users=users,
            state=state,
        ),
        "messages.messagesSlice": types.messages.MessagesSlice(
            count=30, messages=[reply], topics=[], chats=[], users=users, next_rate=5
        ),
        "updates.difference": types.updates.Difference(
            new_messages=[message()],
            new_encrypted_messages=[],
            other_updates=update_list[1:],
            chats=[],
            users=users,
            state=state,
        ),
        "updates.differenceSlice": types.updates.DifferenceSlice(
            new_messages=[reply],
            new_encrypted_messages=[],
            other_updates=[],
            chats=[],
            users=users,
            intermediate_state=state,
        ),
        "updates.state": state,
        "updates.differenceEmpty": types.updates.DifferenceEmpty(date=1_700_000_200, seq=0),
        "updates.differenceTooLong": types.updates.DifferenceTooLong(pts=50),
        "messages.dialogsSlice": types.messages.DialogsSlice(
            count=9, dialogs=[dialog], messages=[fwd], chats=[], users=users
        ),
        "messages.dialogs.folder": types.messages.Dialogs(
            dialogs=[
                types.DialogFolder(
                    pinned=True,
                    folder=types.Folder(id=1, title="Archived Chats"),
                    peer=peer,
                    top_message=12,
                    unread_muted_peers_count=0,
                    unread_unmuted_peers_count=1,
                    unread_muted_messages_count=0,
                    unread_unmuted_messages_count=2,
                ),
                dialog,
            ],
            messages=[fwd],
            chats=[],
            users=users,
        ),
        "messages.peerDialogs": types.messages.PeerDialogs(
            dialogs=[dialog], messages=[fwd], chats=[], users=users, state=state
        ),
        "messages.dialogFilters": types.messages.DialogFilters(
            filters=[types.DialogFilterDefault(), dialog_filter()]
        ),
        "messages.peerSettings": types.messages.PeerSettings(
            settings=types.PeerSettings(add_contact=True, block_contact=True),
            chats=[],
            users=[users[1]],
        ),
        **{
            f"user.{s.TL_NAME}": user(7, status=s)
            for s in [
                types.UserStatusOnline(expires=1_700_000_900),
                types.UserStatusOffline(was_online=1_700_000_000),
                types.UserStatusRecently(),
                types.UserStatusLastWeek(),
                types.UserStatusLastMonth(),
            ]
        },
        "auth.authorization": types.auth.Authorization(user=users[0]),
        "auth.sentCode": types.auth.SentCode(
            type=types.auth.SentCodeTypeApp(length=5), phone_code_hash="abc", timeout=60
        ),
        "contacts.contacts": types.contacts.Contacts(
            contacts=[types.Contact(user_id=6, mutual=True)], saved_count=0, users=[users[1]]
        ),
        "contacts.resolvedPeer": types.contacts.ResolvedPeer(peer=peer, chats=[], users=[users[1]]),
        "contacts.importedContacts": types.contacts.ImportedContacts(
            imported=[types.ImportedContact(user_id=6, client_id=1)],
            popular_invites=[],
            retry_contacts=[],
            users=[users[1]],
        ),
        "contacts.blocked": types.contacts.Blocked(
            blocked=[types.PeerBlocked(peer_id=peer, date=1_700_000_000)],
            chats=[],
            users=[users[1]],
        ),
        "messages.affectedHistory": types.messages.AffectedHistory(pts=11, pts_count=2, offset=0),
        "messages.messageReactionsList": types.messages.MessageReactionsList(
            count=1,
            reactions=reactions.recent_reactions[:1] if reactions.recent_reactions else [],
            chats=[],
            users=[users[1]],
        ),
        "account.authorizations": types.account.Authorizations(
            authorization_ttl_days=180,
            authorizations=[
                types.Authorization(
                    current=True,
                    hash=0,
                    device_model="pc",
                    platform="linux",
                    system_version="6",
                    api_id=1,
                    app_name="app",
                    app_version="1.0",
                    date_created=1_700_000_000,
                    date_active=1_700_000_100,
                    ip="127.0.0.1",
                    country="",
                    region="",
                )
            ],
        ),
        "user.photo": user(
            8, photo=types.UserProfilePhoto(photo_id=1001, stripped_thumb=b"\x01\x28\x1e", dc_id=2)
        ),
        "message.photo": message(id=13, message="", media=snapshot_media_tl(PHOTO_SNAPSHOT)),
        "message.document": message(
            id=14, message="notes", grouped_id=99, media=snapshot_media_tl(DOCUMENT_SNAPSHOT)
        ),
        "message.voice": message(
            id=15, message="", media_unread=True, media=snapshot_media_tl(VOICE_SNAPSHOT)
        ),
        **{
            f"updates/{u.TL_NAME}": types.Updates(
                updates=[u], users=users, chats=[], date=1_700_000_400, seq=0
            )
            for u in update_list
        },
    }


def _answerable(layer: int, obj: TLObject) -> bool:
    """Whether a client at ``layer`` can call some method answering ``obj``'s type."""
    from telesrv.tl.layers.fields import CLASSES

    methods = {
        cls.TL_NAME for cls in CLASSES.values() if cls.IS_FUNCTION and cls.TL_TYPE == obj.TL_TYPE
    }
    old_methods = {c.name for c in all_layers()[layer] if c.is_function}
    return bool(methods & old_methods) or obj.TL_TYPE == "Updates"


@pytest.mark.parametrize("layer", OTHER_LAYERS)
def test_corpus_converts_for_every_layer(layer: int) -> None:
    """What the server sends parses with the layer's own schema; only an answer to a
    method the layer does not have may have no form there."""
    reader = SchemaReader.for_layer(layer)
    for name, obj in corpus().items():
        try:
            data = downgrade(obj, layer).to_bytes()
        except ConversionError:
            assert not _answerable(layer, obj), (layer, name)
            continue
        reader.read(data)


# -- checked by the client library of each layer ---------------------------------------------

# layer -> (venv, the script that parses with its library)
CLIENTS = {
    158: ("pyrogram", "pyrogram_parse.py"),
    181: ("hydrogram", "pyrogram_parse.py"),
    133: ("telethon-1-24-0", "telethon_parse.py"),
    214: ("telethon-v1-24", "telethon_parse.py"),
    220: ("pyrofork", "pyrogram_parse.py"),
    227: ("pyrotgfork", "pyrogram_parse.py"),
}


def client_venv(name: str) -> Path:
    python = VENVS / name / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no {name} venv at {VENVS / name} (create it with .ci/client-venvs)")
    return python


def parse_with_client(python: Path, script: str, blobs: list[bytes]) -> dict[str, Any]:
    proc = subprocess.run(
        [str(python), str(CLIENT_SCRIPTS / script)],
        input=json.dumps([b.hex() for b in blobs]),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def pyrogram_qualname(tl_name: str) -> str:
    *ns, short = tl_name.split(".")
    return ".".join(["types", *ns, short[:1].upper() + short[1:]])


# Constructors an older layer gets instead of ours when it has none of that name.
FALLBACK_OK = {("types.MessageMediaUnsupported",), ("types.MessageEntityUnknown",)}


def same_values(ours: Any, theirs: Any, path: str) -> None:
    """The client's parse of our bytes holds our values wherever both layers have a field."""
    if isinstance(ours, types.TextWithEntities) and isinstance(theirs, str):
        assert ours.text == theirs, path  # a title before it had entities
    elif isinstance(ours, types.messages.DialogFilters) and isinstance(theirs, list):
        same_values(ours.filters, theirs, path)  # a bare vector in older layers
    elif isinstance(ours, types.users.UserFull) and theirs.get("_") == "types.UserFull":
        # before users.userFull (adapter user_full_with_user): the user inside
        (user,) = [u for u in ours.users if u.id == ours.full_user.id]
        same_values(user, theirs.pop("user"), f"{path}.user")
        same_values(ours.full_user, {**theirs, "id": ours.full_user.id}, path)
    elif isinstance(ours, types.messages.PeerSettings) and theirs.get("_") == "types.PeerSettings":
        same_values(ours.settings, theirs, path)  # bare before messages.peerSettings
    elif isinstance(ours, TLObject):
        assert isinstance(theirs, dict), path
        assert theirs["_"].lower() == pyrogram_qualname(ours.TL_NAME).lower(), path
        for field, value in theirs.items():
            if field == "_":
                continue
            name = "self_" if field == "is_self" else field
            if name in ours.FIELDS:
                same_values(getattr(ours, name), value, f"{path}.{name}")
            else:  # a field only the old layer has: our default went out
                assert value in (None, False, 0, "", [], {"hex": ""}), f"{path}.{field}"
    elif isinstance(ours, list):
        assert isinstance(theirs, list), path
        if len(theirs) < len(ours):
            # Elements of kinds the layer does not have are left out (updates it
            # cannot parse); the rest keep their order.
            names = {t.get("_", "").lower() for t in theirs if isinstance(t, dict)}
            ours = [
                o
                for o in ours
                if not isinstance(o, TLObject) or pyrogram_qualname(o.TL_NAME).lower() in names
            ]
        assert len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            same_values(a, b, f"{path}[{i}]")
    elif ours is None:
        assert theirs in (None, [], False), path
    elif isinstance(ours, bytes):
        assert theirs == {"hex": ours.hex()}, path
    else:
        assert ours == theirs, path


@pytest.mark.parametrize("layer", sorted(CLIENTS))
def test_client_library_parses_what_we_send(layer: int) -> None:
    venv, script = CLIENTS[layer]
    python = client_venv(venv)
    # What a client at this layer can be answered (see _answerable).
    items = {name: obj for name, obj in corpus().items() if _answerable(layer, obj)}
    blobs = [downgrade(obj, layer).to_bytes() for obj in items.values()]
    parsed = parse_with_client(python, script, blobs)
    assert parsed["layer"] == layer
    for (name, obj), result in zip(items.items(), parsed["results"], strict=True):
        assert "error" not in result, (name, result)
        assert result["trailing"] == 0, name
        same_values(obj, result["ok"], name)


def test_layers_module_is_sans_io() -> None:
    for module in Path(tl_layers.__file__).parent.glob("*.py"):
        source = module.read_text()
        for banned in ("asyncio", "import time", "random"):
            assert banned not in source, module.name


def test_what_a_newer_client_cannot_parse() -> None:
    """The README's list for layer 230: current constructors whose ids 230 does not have."""
    newer = load_old_layers()[230]
    ids = {c.id for c in newer}
    lacking = sorted(
        cls.TL_NAME
        for cls in types_by_id().values()
        if not cls.IS_FUNCTION and cls.CONSTRUCTOR_ID not in ids and "mt_" not in cls.__name__
    )
    assert lacking == [
        "botVerification",
        "botVerifierSettings",
        "inputPasskeyCredentialFirebasePNV",
    ]
