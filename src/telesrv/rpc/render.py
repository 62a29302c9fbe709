"""Domain rows -> TL: messages, dialogs and update events in an owner's view.

The push (outbox dispatcher) and updates.getDifference both go through
``UpdateRenderer``, so an offline device rebuilds exactly what an online one was
sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from telesrv.rpc import dialogs_tl
from telesrv.store import messages as store
from telesrv.tl import ALL_READERS, TLObject, types
from telesrv.tl.core import read_vector_boxed, write_vector_boxed

# (viewer, user ids) -> TL users, through the one user projection
UsersFor = Callable[[int, Iterable[int]], Awaitable[list[TLObject]]]
# viewer -> user ids, for many viewers at once
UsersForMany = Callable[[dict[int, list[int]]], Awaitable[dict[int, list[TLObject]]]]


def peer_user(user_id: int) -> TLObject:
    return types.PeerUser(user_id=user_id)


def encode_entities(entities: Sequence[TLObject] | None) -> bytes | None:
    if not entities:
        return None
    buf = bytearray()
    write_vector_boxed(buf, list(entities))
    return bytes(buf)


def decode_entities(data: bytes | None) -> list[Any] | None:
    if not data:
        return None
    return read_vector_boxed(ALL_READERS, data, 0, 0)[0]


def decode_object(data: bytes | None) -> Any:
    if not data:
        return None
    return ALL_READERS[int.from_bytes(data[:4], "little")](data, 4, 0)[0]


def message_tl(m: store.BoxMessage) -> TLObject:
    reply = None
    if m.reply_to_msg_id is not None or m.quote_text is not None:
        reply = types.MessageReplyHeader(
            reply_to_msg_id=m.reply_to_msg_id,
            quote=m.quote_text is not None,
            quote_text=m.quote_text,
            quote_entities=decode_entities(m.quote_entities),
            quote_offset=m.quote_offset,
        )
    return types.Message(
        id=m.box_id,
        out=m.out,
        silent=m.silent,
        noforwards=m.noforwards,
        media_unread=m.media_unread,
        from_id=peer_user(m.sender_user_id),
        peer_id=peer_user(m.peer_user_id),
        fwd_from=decode_object(m.fwd_from),
        reply_to=reply,
        date=m.date,
        message=m.message,
        entities=decode_entities(m.entities),
        edit_date=m.edit_date,
    )


def message_user_ids(m: store.BoxMessage) -> set[int]:
    ids = {m.sender_user_id, m.peer_user_id}
    fwd = decode_object(m.fwd_from)
    if fwd is not None and isinstance(fwd.from_id, types.PeerUser):
        ids.add(fwd.from_id.user_id)
    return ids


def default_notify_settings() -> TLObject:
    return types.PeerNotifySettings()


def dialog_tl(
    d: store.DialogRow, notify_settings: TLObject | None = None, draft: TLObject | None = None
) -> TLObject:
    return types.Dialog(
        peer=peer_user(d.peer_user_id),
        top_message=d.top_message,
        read_inbox_max_id=d.read_inbox_max_id,
        read_outbox_max_id=d.read_outbox_max_id,
        unread_count=d.unread_count,
        unread_mentions_count=0,
        unread_reactions_count=0,
        unread_poll_votes_count=0,
        notify_settings=notify_settings or default_notify_settings(),
        draft=draft,
        unread_mark=d.unread_mark,
        pinned=d.pinned_order is not None,
        folder_id=d.folder_id or None,
    )


@dataclass(frozen=True)
class Prefetched:
    """One outbox batch, rendered: per group (in the order given) its updates and the
    ids of the users they mention, and the users each owner needs."""

    built: list[tuple[int, list[TLObject], set[int]]]
    users: dict[int, list[TLObject]]


def _boxes_wanted(events: Sequence[store.UpdateEvent]) -> list[int]:
    return [
        e.box_ids[0]
        for e in events
        if e.event_type in ("new_message", "edit_message") and e.box_ids
    ]


# State-log events (updates with no pts): event type -> its TL update and the users it
# mentions (None: nothing to show). A new kind of pts-less update needs only an entry
# here and a ``state_log.append_txn`` where it happens.
StateRender = Callable[[store.UpdateEvent], "tuple[TLObject, set[int]] | None"]


def _contacts_reset(e: store.UpdateEvent) -> tuple[TLObject, set[int]] | None:
    return types.UpdateContactsReset(), set()


def _peer_blocked(e: store.UpdateEvent) -> tuple[TLObject, set[int]] | None:
    if e.peer_user_id is None:
        return None
    blocked = bool((e.payload or {}).get("blocked"))
    update = types.UpdatePeerBlocked(peer_id=peer_user(e.peer_user_id), blocked=blocked)
    return update, {e.peer_user_id}


STATE_RENDERERS: dict[str, StateRender] = {
    "contacts_reset": _contacts_reset,
    "peer_blocked": _peer_blocked,
    **dialogs_tl.STATE_EVENTS,
}
# pts-log events rendered the same way (the event carries its pts).
PTS_RENDERERS: dict[str, StateRender] = {**dialogs_tl.PTS_EVENTS}


class UpdateRenderer:
    """Update events of one owner -> TL updates, with the messages and users they need."""

    def __init__(
        self,
        load_boxes: Callable[[int, list[int]], Awaitable[list[store.BoxMessage]]],
        users_for: UsersFor,
        *,
        load_boxes_of_owners: Callable[[list[tuple[int, int]]], Awaitable[list[store.BoxMessage]]]
        | None = None,
        users_for_many: UsersForMany | None = None,
    ) -> None:
        self._load_boxes = load_boxes
        self._users_for = users_for
        self._load_boxes_of_owners = load_boxes_of_owners
        self._users_for_many = users_for_many

    async def render(
        self, owner: int, events: Sequence[store.UpdateEvent]
    ) -> tuple[list[TLObject], list[TLObject]]:
        """The TL updates for ``events`` in pts order, and the users they mention."""
        wanted = _boxes_wanted(events)
        boxes = {b.box_id: b for b in await self._load_boxes(owner, wanted)} if wanted else {}
        updates, user_ids = self._build(events, boxes)
        users = await self._users_for(owner, user_ids) if user_ids else []
        return updates, users

    async def render_each(
        self, owner: int, events: Sequence[store.UpdateEvent]
    ) -> list[tuple[list[TLObject], set[int]]]:
        """Per event: its TL updates and the users they mention (so a caller can cut
        the list and load only the users of what it keeps, with ``users``)."""
        wanted = _boxes_wanted(events)
        boxes = {b.box_id: b for b in await self._load_boxes(owner, wanted)} if wanted else {}
        return [self._build([e], boxes) for e in events]

    async def users(self, owner: int, user_ids: set[int]) -> list[TLObject]:
        return await self._users_for(owner, user_ids) if user_ids else []

    async def prefetch(
        self, groups: Sequence[tuple[int, Sequence[store.UpdateEvent]]]
    ) -> Prefetched:
        """Render a whole outbox batch with two queries (boxes, users) instead of two per
        group; ``push_prefetched`` then picks each group's result."""
        keys = [(owner, box_id) for owner, events in groups for box_id in _boxes_wanted(events)]
        boxes: dict[int, dict[int, store.BoxMessage]] = {}
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
        built: list[tuple[int, list[TLObject], set[int]]] = []
        wanted_users: dict[int, list[int]] = {}
        for owner, events in groups:
            updates, user_ids = self._build(events, boxes.get(owner, {}))
            built.append((owner, updates, user_ids))
            wanted_users.setdefault(owner, []).extend(user_ids)
        if self._users_for_many is not None:
            users = await self._users_for_many(wanted_users)
        else:
            users = {o: await self._users_for(o, ids) for o, ids in wanted_users.items()}
        return Prefetched(built, users)

    @staticmethod
    def push_prefetched(prefetched: Prefetched, index: int, date: int) -> TLObject | None:
        """The ``updates`` to push for group ``index`` of the prefetched batch."""
        owner, updates, user_ids = prefetched.built[index]
        if not updates:
            return None
        users = [u for u in prefetched.users.get(owner, []) if u.id in user_ids]  # type: ignore[attr-defined]
        return types.Updates(updates=updates, users=users, chats=[], date=date, seq=0)

    @staticmethod
    def _build(
        events: Sequence[store.UpdateEvent], boxes: dict[int, store.BoxMessage]
    ) -> tuple[list[TLObject], set[int]]:
        """The TL updates for one owner's ``events`` (its boxes given), and who they mention."""
        updates: list[TLObject] = []
        user_ids: set[int] = set()
        for e in events:
            kind = e.event_type
            if kind in ("new_message", "edit_message"):
                box = boxes.get(e.box_ids[0]) if e.box_ids else None
                if box is None:
                    continue  # deleted since: its delete event follows in the log
                cls = types.UpdateNewMessage if kind == "new_message" else types.UpdateEditMessage
                updates.append(cls(message=message_tl(box), pts=e.pts, pts_count=e.pts_count))
                user_ids |= message_user_ids(box)
            elif kind == "read_history_inbox":
                assert e.peer_user_id is not None
                updates.append(
                    types.UpdateReadHistoryInbox(
                        peer=peer_user(e.peer_user_id),
                        max_id=e.max_id or 0,
                        still_unread_count=int((e.payload or {}).get("still_unread", 0)),
                        pts=e.pts,
                        pts_count=e.pts_count,
                    )
                )
                user_ids.add(e.peer_user_id)
            elif kind == "read_history_outbox":
                assert e.peer_user_id is not None
                updates.append(
                    types.UpdateReadHistoryOutbox(
                        peer=peer_user(e.peer_user_id),
                        max_id=e.max_id or 0,
                        pts=e.pts,
                        pts_count=e.pts_count,
                    )
                )
                user_ids.add(e.peer_user_id)
            elif kind == "delete_messages":
                updates.append(
                    types.UpdateDeleteMessages(
                        messages=list(e.box_ids or []), pts=e.pts, pts_count=e.pts_count
                    )
                )
            elif kind == "read_message_contents":
                updates.append(
                    types.UpdateReadMessagesContents(
                        messages=list(e.box_ids or []), pts=e.pts, pts_count=e.pts_count
                    )
                )
            elif (state := STATE_RENDERERS.get(kind) or PTS_RENDERERS.get(kind)) is not None:
                rendered = state(e)
                if rendered is not None:
                    updates.append(rendered[0])
                    user_ids |= rendered[1]
            # 'noop' adds nothing; the client moves its pts past it with the answer's state.
        return updates, user_ids

    async def push_updates(
        self, owner: int, events: Sequence[store.UpdateEvent], date: int
    ) -> TLObject | None:
        """The full ``updates`` pushed to online sessions (never the short forms)."""
        updates, users = await self.render(owner, events)
        if not updates:
            return None
        return types.Updates(updates=updates, users=users, chats=[], date=date, seq=0)
