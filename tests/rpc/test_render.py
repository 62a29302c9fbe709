"""Update events -> TL updates: one renderer per event type, looked up in a table."""

from __future__ import annotations

from typing import Any

from telesrv.rpc.render import _RENDERERS, UpdateRenderer
from telesrv.services.messages import BoxMessage
from telesrv.services.update_log import EventType, UpdateEvent
from telesrv.tl import types

ME, BOB = 10, 20


def event(kind: str, pts: int, **kw: Any) -> UpdateEvent:
    fields: dict[str, Any] = dict(
        user_id=ME, pts=pts, pts_count=1, event_type=kind, date=1, peer_user_id=None,
        max_id=None, box_ids=None, payload=None,
    )  # fmt: skip
    fields.update(kw)
    return UpdateEvent(**fields)


def box(box_id: int) -> BoxMessage:
    return BoxMessage(
        owner_user_id=ME, box_id=box_id, peer_user_id=BOB, sender_user_id=BOB, out=False,
        date=5, message="hi", entities=None, fwd_from=None, reply_to_msg_id=None,
        quote_text=None, quote_entities=None, quote_offset=None, silent=False,
        noforwards=False, media_unread=False, edit_date=None,
    )  # fmt: skip


EVERY_KIND = [
    event("new_message", 1, box_ids=[7]),
    event("new_message", 2, box_ids=[8]),  # its box is gone: told as deleted
    event("edit_message", 3, box_ids=[7]),
    event("read_history_inbox", 4, peer_user_id=BOB, max_id=7, payload={"still_unread": 2}),
    event("read_history_outbox", 5, peer_user_id=BOB, max_id=6),
    event("delete_messages", 7, pts_count=2, box_ids=[1, 2]),
    event("read_message_contents", 8, box_ids=[7]),
    event("contacts_reset", 9),
    event("peer_blocked", 10, peer_user_id=BOB, payload={"blocked": True}),
    event("peer_blocked", 11),  # no peer: nothing to say
    event("noop", 12),
    event("some_future_kind", 13),  # unknown kinds are skipped, not fatal
]


def test_every_event_type_has_a_renderer() -> None:
    assert set(_RENDERERS) == set(EventType)


def test_each_event_type_renders_its_update() -> None:
    updates, users = UpdateRenderer._build(EVERY_KIND, {7: box(7)})
    assert [type(u) for u in updates] == [
        types.UpdateNewMessage,
        types.UpdateDeleteMessages,
        types.UpdateEditMessage,
        types.UpdateReadHistoryInbox,
        types.UpdateReadHistoryOutbox,
        types.UpdateDeleteMessages,
        types.UpdateReadMessagesContents,
        types.UpdateContactsReset,
        types.UpdatePeerBlocked,
    ]
    new, gone, edit, inbox, outbox, deleted, contents, _, blocked = updates
    assert isinstance(new, types.UpdateNewMessage) and new.pts == 1
    assert isinstance(new.message, types.Message) and new.message.id == 7
    assert gone == types.UpdateDeleteMessages(messages=[8], pts=2, pts_count=1)
    assert isinstance(edit, types.UpdateEditMessage) and edit.pts == 3
    assert inbox == types.UpdateReadHistoryInbox(
        peer=types.PeerUser(user_id=BOB), max_id=7, still_unread_count=2, pts=4, pts_count=1
    )
    assert outbox == types.UpdateReadHistoryOutbox(
        peer=types.PeerUser(user_id=BOB), max_id=6, pts=5, pts_count=1
    )
    assert deleted == types.UpdateDeleteMessages(messages=[1, 2], pts=7, pts_count=2)
    assert contents == types.UpdateReadMessagesContents(messages=[7], pts=8, pts_count=1)
    assert blocked == types.UpdatePeerBlocked(peer_id=types.PeerUser(user_id=BOB), blocked=True)
    assert users == {BOB}  # the sender and the peer of the message, the reader, the blocked


def test_a_push_stays_contiguous_when_a_message_was_deleted_before_it_was_rendered() -> None:
    # An edit followed at once by a revoking delete: by the time the outbox renders the
    # edit, its box is gone. Every pts of the batch must still be in the push, or the
    # client sees a hole and stops to fetch a difference.
    events = [
        event("edit_message", 3, box_ids=[7]),
        event("delete_messages", 4, box_ids=[7]),
    ]
    updates, _ = UpdateRenderer._build(events, {})
    covered: list[int] = []
    for u in updates:
        assert isinstance(u, types.UpdateDeleteMessages)
        covered += list(range(u.pts - u.pts_count + 1, u.pts + 1))
    assert covered == [3, 4]
