"""Domain rows -> TL: messages, dialogs and update events in an owner's view.

The push (outbox delivery) and updates.getDifference both go through
``UpdateRenderer``, so an offline device rebuilds exactly what an online one was
sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence

from telesrv.rpc import dialogs_tl, privacy_tl, profile_photos_tl, push_wire, reactions_tl
from telesrv.rpc.stored_tl import decode_fwd_header
from telesrv.services.dialog_list import DialogRow
from telesrv.services.messages import BoxMessage
from telesrv.services.update_log import EventType, UpdateEvent, log_payloads
from telesrv.tl import TLObject, types
from telesrv.tl.core import write_object, write_vector_boxed

# (viewer, user ids) -> TL users, through the one user projection
UsersFor = Callable[[int, Iterable[int]], Awaitable[list["types.TypeUser"]]]
# (viewer, user ids) -> the users of ``UsersFor``, each written
UsersWire = Callable[[int, Iterable[int]], Awaitable[list[bytes]]]
# viewer -> user ids, for many viewers at once: (user id, the TL user written)
UsersWireMany = Callable[[dict[int, list[int]]], Awaitable[dict[int, list[tuple[int, bytes]]]]]


def peer_user(user_id: int) -> types.PeerUser:
    return types.PeerUser(user_id=user_id)


def encode_entities(entities: Sequence[TLObject] | None) -> bytes | None:
    if not entities:
        return None
    buf = bytearray()
    write_vector_boxed(buf, list(entities))
    return bytes(buf)


def sent_answer_tl(
    m: BoxMessage, pts: int, random_id: int, users: list[types.TypeUser]
) -> types.Updates:
    """The answer to a send of one message: its updateMessageID and the sender's
    updateNewMessage of ``m`` at ``pts`` (``push_wire.sent_answer_bytes``, as objects)."""
    return types.Updates(
        updates=[
            types.UpdateMessageID(id=m.box_id, random_id=random_id),
            types.UpdateNewMessage(message=message_tl(m), pts=pts, pts_count=1),
        ],
        users=users,
        chats=[],
        date=m.date,
        seq=0,
    )


def message_tl(m: BoxMessage) -> types.Message:
    fwd, reply, media, entities, reactions = push_wire.message_parts(m)
    return types.Message(
        id=m.box_id,
        out=m.out,
        silent=m.silent,
        noforwards=m.noforwards,
        media_unread=m.media_unread,
        pinned=m.pinned,
        from_id=peer_user(m.sender_user_id),
        peer_id=peer_user(m.peer_user_id),
        fwd_from=fwd,
        reply_to=reply,
        date=m.date,
        message=m.message,
        entities=entities,
        edit_date=m.edit_date,
        media=media,
        grouped_id=m.grouped_id,
        reactions=reactions,
    )


def message_user_ids(m: BoxMessage) -> set[int]:
    ids = {m.sender_user_id, m.peer_user_id}
    fwd = decode_fwd_header(m.fwd_from)
    if fwd is not None and isinstance(fwd.from_id, types.PeerUser):
        ids.add(fwd.from_id.user_id)
    return ids


async def messages_answer(
    viewer: int,
    messages: Sequence[BoxMessage | types.MessageEmpty],
    count: int | None,
    users_for: UsersFor,
    *,
    next_rate: int | None = None,
) -> types.messages.TypeMessages:
    """The answer of every method that returns messages of private chats: the whole
    result (``count`` None or no more than given) as messages.messages, part of one as
    messages.messagesSlice of ``count``. messageEmpty entries pass through as they are."""
    user_ids: set[int] = set()
    tl: list[types.TypeMessage] = []
    for m in messages:
        if isinstance(m, types.MessageEmpty):
            tl.append(m)
        else:
            tl.append(message_tl(m))
            user_ids |= message_user_ids(m)
    users = await users_for(viewer, user_ids) if user_ids else []
    if count is None or count <= len(tl):
        return types.messages.Messages(messages=tl, topics=[], chats=[], users=users)
    return types.messages.MessagesSlice(
        count=count, next_rate=next_rate, messages=tl, topics=[], chats=[], users=users
    )


def default_notify_settings() -> types.PeerNotifySettings:
    return types.PeerNotifySettings()


def dialog_tl(
    d: DialogRow,
    notify_settings: types.TypePeerNotifySettings | None = None,
    draft: types.TypeDraftMessage | None = None,
    *,
    unread_reactions: int = 0,
) -> types.Dialog:
    return types.Dialog(
        peer=peer_user(d.peer_user_id),
        top_message=d.top_message,
        read_inbox_max_id=d.read_inbox_max_id,
        read_outbox_max_id=d.read_outbox_max_id,
        unread_count=d.unread_count,
        unread_mentions_count=0,
        unread_reactions_count=unread_reactions,
        unread_poll_votes_count=0,
        notify_settings=notify_settings or default_notify_settings(),
        draft=draft,
        unread_mark=d.unread_mark,
        pinned=d.pinned_order is not None,
        folder_id=d.folder_id or None,
    )


def _boxes_wanted(events: Sequence[UpdateEvent]) -> list[int]:
    return [e.box_ids[0] for e in events if e.event_type in _MESSAGE_EVENTS and e.box_ids]


# -- one function per event type: the update it becomes and the users it mentions --------
# None: nothing to send for it.

Rendered = tuple["types.TypeUpdate", set[int]]


def _message_event(
    update: type[types.UpdateNewMessage] | type[types.UpdateEditMessage],
) -> Callable[[UpdateEvent, dict[int, BoxMessage]], Rendered | None]:
    def render(e: UpdateEvent, boxes: dict[int, BoxMessage]) -> Rendered | None:
        box = boxes.get(e.box_ids[0]) if e.box_ids else None
        if box is None:
            # Deleted since (its delete event follows in the log). Left out, this pts
            # would be a hole in the push, and the client would stop to fetch a
            # difference; told as a delete of the same id, the pts stay contiguous and
            # the client ends where it would have (deleting twice is harmless).
            gone = types.UpdateDeleteMessages(
                messages=list(e.box_ids or []), pts=e.pts, pts_count=e.pts_count
            )
            return gone, set()
        rendered = update(message=message_tl(box), pts=e.pts, pts_count=e.pts_count)
        return rendered, message_user_ids(box)

    return render


def _read_history_inbox(e: UpdateEvent, boxes: dict[int, BoxMessage]) -> Rendered | None:
    assert e.peer_user_id is not None
    update = types.UpdateReadHistoryInbox(
        peer=peer_user(e.peer_user_id),
        max_id=e.max_id or 0,
        still_unread_count=log_payloads.ReadInbox.from_json(e.payload).still_unread,
        pts=e.pts,
        pts_count=e.pts_count,
    )
    return update, {e.peer_user_id}


def _read_history_outbox(e: UpdateEvent, boxes: dict[int, BoxMessage]) -> Rendered | None:
    assert e.peer_user_id is not None
    update = types.UpdateReadHistoryOutbox(
        peer=peer_user(e.peer_user_id), max_id=e.max_id or 0, pts=e.pts, pts_count=e.pts_count
    )
    return update, {e.peer_user_id}


def _delete_messages(e: UpdateEvent, boxes: dict[int, BoxMessage]) -> Rendered | None:
    ids = list(e.box_ids or [])
    return types.UpdateDeleteMessages(messages=ids, pts=e.pts, pts_count=e.pts_count), set()


def _read_message_contents(e: UpdateEvent, boxes: dict[int, BoxMessage]) -> Rendered | None:
    ids = list(e.box_ids or [])
    return types.UpdateReadMessagesContents(messages=ids, pts=e.pts, pts_count=e.pts_count), set()


def _pinned_messages(e: UpdateEvent, boxes: dict[int, BoxMessage]) -> Rendered | None:
    if e.peer_user_id is None:
        return None
    update = types.UpdatePinnedMessages(
        pinned=log_payloads.MessagesPinned.from_json(e.payload).pinned,
        peer=peer_user(e.peer_user_id),
        messages=list(e.box_ids or []),
        pts=e.pts,
        pts_count=e.pts_count,
    )
    return update, {e.peer_user_id}


def _contacts_reset(e: UpdateEvent, boxes: dict[int, BoxMessage]) -> Rendered | None:
    return types.UpdateContactsReset(), set()


def _peer_blocked(e: UpdateEvent, boxes: dict[int, BoxMessage]) -> Rendered | None:
    if e.peer_user_id is None:
        return None
    blocked = log_payloads.PeerBlocked.from_json(e.payload).blocked
    update = types.UpdatePeerBlocked(peer_id=peer_user(e.peer_user_id), blocked=blocked)
    return update, {e.peer_user_id}


def _without_boxes(
    render: Callable[[UpdateEvent], Rendered | None],
) -> Callable[[UpdateEvent, dict[int, BoxMessage]], Rendered | None]:
    return lambda e, boxes: render(e)


def _noop(e: UpdateEvent, boxes: dict[int, BoxMessage]) -> Rendered | None:
    return None  # the client moves its pts past it with the answer's state


_RENDERERS: dict[str, Callable[[UpdateEvent, dict[int, BoxMessage]], Rendered | None]] = {
    EventType.NEW_MESSAGE: _message_event(types.UpdateNewMessage),
    EventType.EDIT_MESSAGE: _message_event(types.UpdateEditMessage),
    EventType.READ_HISTORY_INBOX: _read_history_inbox,
    EventType.READ_HISTORY_OUTBOX: _read_history_outbox,
    EventType.DELETE_MESSAGES: _delete_messages,
    EventType.READ_MESSAGE_CONTENTS: _read_message_contents,
    EventType.PINNED_MESSAGES: _pinned_messages,
    EventType.CONTACTS_RESET: _contacts_reset,
    EventType.PEER_BLOCKED: _peer_blocked,
    EventType.NOOP: _noop,
    # The chat list's events (pins, unread marks, settings, drafts, filters from the
    # state log; folder moves from the pts log) need no boxes.
    **{
        kind: _without_boxes(render)
        for kind, render in {
            **dialogs_tl.STATE_EVENTS,
            **dialogs_tl.PTS_EVENTS,
            **reactions_tl.STATE_EVENTS,
            **profile_photos_tl.STATE_EVENTS,
            **privacy_tl.STATE_EVENTS,
        }.items()
    },
}
# Events that show a message: their first box id is loaded before rendering.
# An outbox batch (up to a grown claim's rows) is rendered and serialized in one go;
# every this many groups the event loop runs its other work (reads, answers, the
# other workers) instead of waiting for the whole batch.
YIELD_EVERY = 100
_MESSAGE_EVENTS = frozenset({EventType.NEW_MESSAGE, EventType.EDIT_MESSAGE})
# The message events' updates, written straight from their box (push_wire.py); an
# event type missing here is made and written by its renderer, as any other.
_MESSAGE_UPDATES: dict[str, int] = {
    EventType.NEW_MESSAGE: push_wire.UPDATE_NEW_MESSAGE,
    EventType.EDIT_MESSAGE: push_wire.UPDATE_EDIT_MESSAGE,
}


def _write_updates(
    events: Sequence[UpdateEvent], boxes: dict[int, BoxMessage]
) -> tuple[bytes, int, set[int]]:
    """One owner's ``events`` (its boxes given) as their TL updates written one after
    another, how many there are, and who they mention: ``UpdateRenderer._build``'s
    updates, written. A message shown by an event is written from its box; every
    other update is made and written by its own writer."""
    buf = bytearray()
    count = 0
    user_ids: set[int] = set()
    for e in events:
        constructor_id = _MESSAGE_UPDATES.get(e.event_type)
        box = boxes.get(e.box_ids[0]) if constructor_id is not None and e.box_ids else None
        if constructor_id is not None and box is not None:
            push_wire.write_message_update(buf, constructor_id, box, e.pts, e.pts_count)
            count += 1
            user_ids |= message_user_ids(box)
            continue
        render = _RENDERERS.get(e.event_type)
        rendered = render(e, boxes) if render is not None else None
        if rendered is not None:
            update, mentioned = rendered
            write_object(buf, update)
            count += 1
            user_ids |= mentioned
    return bytes(buf), count, user_ids


class UpdateRenderer:
    """Update events of one owner -> TL updates, with the messages and users they need."""

    def __init__(
        self,
        load_boxes: Callable[[int, list[int]], Awaitable[list[BoxMessage]]],
        users_for: UsersFor,
        *,
        load_boxes_of_owners: Callable[[list[tuple[int, int]]], Awaitable[list[BoxMessage]]]
        | None = None,
        users_wire_many: UsersWireMany | None = None,
    ) -> None:
        self._load_boxes = load_boxes
        self._users_for = users_for
        self._load_boxes_of_owners = load_boxes_of_owners
        self._users_wire_many = users_wire_many

    async def render(
        self, owner: int, events: Sequence[UpdateEvent]
    ) -> tuple[list[types.TypeUpdate], list[types.TypeUser]]:
        """The TL updates for ``events`` in pts order, and the users they mention."""
        wanted = _boxes_wanted(events)
        boxes = {b.box_id: b for b in await self._load_boxes(owner, wanted)} if wanted else {}
        updates, user_ids = self._build(events, boxes)
        users = await self._users_for(owner, user_ids) if user_ids else []
        return updates, users

    async def render_each(
        self, owner: int, events: Sequence[UpdateEvent]
    ) -> list[tuple[list[types.TypeUpdate], set[int]]]:
        """Per event: its TL updates and the users they mention (so a caller can cut
        the list and load only the users of what it keeps, with ``users``)."""
        wanted = _boxes_wanted(events)
        boxes = {b.box_id: b for b in await self._load_boxes(owner, wanted)} if wanted else {}
        return [self._build([e], boxes) for e in events]

    async def users(self, owner: int, user_ids: set[int]) -> list[types.TypeUser]:
        return await self._users_for(owner, user_ids) if user_ids else []

    async def _boxes_of(
        self,
        groups: Sequence[tuple[int, Sequence[UpdateEvent]]],
        known: Sequence[BoxMessage],
    ) -> dict[int, dict[int, BoxMessage]]:
        """owner -> box id -> box, of the messages a batch's events show: one query
        for the whole batch; boxes in ``known`` are not loaded again."""
        boxes: dict[int, dict[int, BoxMessage]] = {}
        for b in known:
            boxes.setdefault(b.owner_user_id, {})[b.box_id] = b
        keys = [
            (owner, box_id)
            for owner, events in groups
            for box_id in _boxes_wanted(events)
            if box_id not in boxes.get(owner, {})
        ]
        if keys:
            if self._load_boxes_of_owners is not None:
                loaded = await self._load_boxes_of_owners(keys)
            else:
                loaded = [
                    b
                    for owner, events in groups
                    for b in await self._load_boxes(owner, _boxes_wanted(events))
                ]
            for b in loaded:
                boxes.setdefault(b.owner_user_id, {})[b.box_id] = b
        return boxes

    async def _users_wire(self, wanted: dict[int, list[int]]) -> dict[int, list[tuple[int, bytes]]]:
        if self._users_wire_many is not None:
            return await self._users_wire_many(wanted)
        return {
            owner: [(u.id, u.to_bytes()) for u in await self._users_for(owner, ids)]
            for owner, ids in wanted.items()
        }

    @staticmethod
    def _build(
        events: Sequence[UpdateEvent], boxes: dict[int, BoxMessage]
    ) -> tuple[list[types.TypeUpdate], set[int]]:
        """The TL updates for one owner's ``events`` (its boxes given), and who they mention."""
        updates: list[types.TypeUpdate] = []
        user_ids: set[int] = set()
        for e in events:
            render = _RENDERERS.get(e.event_type)
            rendered = render(e, boxes) if render is not None else None
            if rendered is not None:
                update, mentioned = rendered
                updates.append(update)
                user_ids |= mentioned
        return updates, user_ids

    # -- the serialized forms the outbox pushes ------------------------------------------

    async def push_bytes(
        self, owner: int, events: Sequence[UpdateEvent], date: int
    ) -> bytes | None:
        """``push_updates`` serialized (None: nothing to show)."""
        updates = await self.push_updates(owner, events, date)
        return None if updates is None else updates.to_bytes()

    async def batch_bytes(
        self, groups: list[tuple[int, list[UpdateEvent]]], date: int
    ) -> list[bytes | None]:
        """Each group of an outbox batch, serialized, rendered together."""
        return await self.known_bytes(groups, date, ())

    async def known_bytes(
        self,
        groups: list[tuple[int, list[UpdateEvent]]],
        date: int,
        boxes: Sequence[BoxMessage],
    ) -> list[bytes | None]:
        """As ``batch_bytes``, for events whose writer has their boxes in hand already.

        Each group's body is what ``push_bytes`` gives for it, written without its
        TL objects (push_wire.py), with two queries for the batch (boxes, users)
        instead of two per group."""
        by_owner = await self._boxes_of(groups, boxes)
        written: list[tuple[int, bytes, int, set[int]]] = []
        wanted_users: dict[int, list[int]] = {}
        for index, (owner, events) in enumerate(groups):
            if index and index % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a large batch lets the loop's other work run
            body, count, user_ids = _write_updates(events, by_owner.get(owner, {}))
            written.append((owner, body, count, user_ids))
            if count:
                wanted_users.setdefault(owner, []).extend(user_ids)
        users = await self._users_wire(wanted_users) if wanted_users else {}
        by_id = {owner: dict(found) for owner, found in users.items()}
        bodies: list[bytes | None] = []
        for index, (owner, body, count, user_ids) in enumerate(written):
            if index and index % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            if not count:
                bodies.append(None)
                continue
            # In the order of the group's own ids, as ``push_bytes`` asks for them.
            found = by_id.get(owner, {})
            mentioned = [found[user_id] for user_id in user_ids if user_id in found]
            bodies.append(push_wire.updates_bytes(body, count, mentioned, date))
        return bodies

    async def push_updates(
        self, owner: int, events: Sequence[UpdateEvent], date: int
    ) -> TLObject | None:
        """The full ``updates`` pushed to online sessions (never the short forms)."""
        updates, users = await self.render(owner, events)
        if not updates:
            return None
        return types.Updates(updates=updates, users=users, chats=[], date=date, seq=0)
