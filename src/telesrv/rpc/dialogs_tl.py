"""Chat-list state -> TL: notification settings, drafts, and the updates of the chat
list's events (pins, unread marks, settings, drafts from the state log; folder moves
from the pts log)."""

from __future__ import annotations

from collections.abc import Callable

from telesrv.rpc.stored_tl import decode_entities, decode_filter, decode_sound
from telesrv.services.drafts import DraftRow
from telesrv.services.notify_settings import NotifyRow
from telesrv.services.update_log import EventType, UpdateEvent, log_payloads
from telesrv.tl import types

# As the renderer's table wants it (the unions exist for the type checker only).
Rendered = tuple["types.TypeUpdate", set[int]]


def _peer(user_id: int) -> types.PeerUser:
    return types.PeerUser(user_id=user_id)


def notify_tl(row: NotifyRow | None) -> types.PeerNotifySettings:
    """peerNotifySettings; a sound set from one device is shown on every platform."""
    if row is None:
        return types.PeerNotifySettings()
    sound = decode_sound(row.sound)
    return types.PeerNotifySettings(
        show_previews=row.show_previews,
        silent=row.silent,
        mute_until=row.mute_until,
        ios_sound=sound,
        android_sound=sound,
        other_sound=sound,
    )


def draft_tl(row: DraftRow | None, date: int | None = None) -> types.TypeDraftMessage:
    if row is None:
        return types.DraftMessageEmpty(date=date)
    reply = None
    if row.reply_to_msg_id is not None:
        reply = types.InputReplyToMessage(reply_to_msg_id=row.reply_to_msg_id)
    return types.DraftMessage(
        no_webpage=row.no_webpage,
        invert_media=row.invert_media,
        reply_to=reply,
        message=row.message,
        entities=decode_entities(row.entities),
        date=row.date,
    )


NOTIFY_PEERS: dict[str, Callable[[], types.TypeNotifyPeer]] = {
    "users": types.NotifyUsers,
    "chats": types.NotifyChats,
    "broadcasts": types.NotifyBroadcasts,
}


def notify_peer_tl(kind: str, peer: int) -> types.TypeNotifyPeer:
    if kind == "peer":
        return types.NotifyPeer(peer=_peer(peer))
    return NOTIFY_PEERS[kind]()


# -- events -> updates (entries of the renderer's tables) --------------------------------


def _dialog_pinned(e: UpdateEvent) -> Rendered | None:
    if e.peer_user_id is None:
        return None
    p = log_payloads.DialogPinned.from_json(e.payload)
    update = types.UpdateDialogPinned(
        pinned=p.pinned,
        folder_id=p.folder_id or None,
        peer=types.DialogPeer(peer=_peer(e.peer_user_id)),
    )
    return update, {e.peer_user_id}


def _pinned_dialogs(e: UpdateEvent) -> Rendered | None:
    p = log_payloads.PinnedDialogs.from_json(e.payload)
    update = types.UpdatePinnedDialogs(
        folder_id=p.folder_id or None,
        order=[types.DialogPeer(peer=_peer(x)) for x in p.order],
    )
    return update, set(p.order)


def _unread_mark(e: UpdateEvent) -> Rendered | None:
    if e.peer_user_id is None:
        return None
    update = types.UpdateDialogUnreadMark(
        unread=log_payloads.UnreadMark.from_json(e.payload).unread,
        peer=types.DialogPeer(peer=_peer(e.peer_user_id)),
    )
    return update, {e.peer_user_id}


def _notify_settings(e: UpdateEvent) -> Rendered | None:
    p = log_payloads.NotifySettingsChanged.from_json(e.payload)
    kind, peer = p.kind, p.peer
    if kind not in NOTIFY_PEERS and kind != "peer":
        return None
    row = None
    if not p.is_default:
        row = NotifyRow(kind, peer, p.show_previews, p.silent, p.mute_until, p.sound)
    update = types.UpdateNotifySettings(
        peer=notify_peer_tl(kind, peer), notify_settings=notify_tl(row)
    )
    return update, ({peer} if kind == "peer" else set())


def _draft(e: UpdateEvent) -> Rendered | None:
    if e.peer_user_id is None:
        return None
    p = log_payloads.DraftChanged.from_json(e.payload, e.date)
    row = None
    if p.message is not None:
        row = DraftRow(
            e.peer_user_id,
            p.message,
            p.entities,
            p.reply_to,
            p.no_webpage,
            p.invert_media,
            p.date,
        )
    update = types.UpdateDraftMessage(peer=_peer(e.peer_user_id), draft=draft_tl(row, p.date))
    return update, {e.peer_user_id}


def _folder_peers(e: UpdateEvent) -> Rendered | None:
    moves = log_payloads.FolderPeers.from_json(e.payload).peers
    update = types.UpdateFolderPeers(
        folder_peers=[types.FolderPeer(peer=_peer(p), folder_id=f) for p, f in moves],
        pts=e.pts,
        pts_count=e.pts_count,
    )
    return update, {p for p, _ in moves}


def peer_settings_tl(
    report_spam: bool, add_contact: bool, block_contact: bool
) -> types.PeerSettings:
    return types.PeerSettings(
        report_spam=report_spam, add_contact=add_contact, block_contact=block_contact
    )


def _peer_settings(e: UpdateEvent) -> Rendered | None:
    if e.peer_user_id is None:
        return None
    p = log_payloads.PeerSettingsChanged.from_json(e.payload)
    settings = peer_settings_tl(p.report_spam, p.add_contact, p.block_contact)
    return types.UpdatePeerSettings(peer=_peer(e.peer_user_id), settings=settings), {e.peer_user_id}


# Events of the state log (no pts).
STATE_EVENTS: dict[EventType, Callable[[UpdateEvent], Rendered | None]] = {
    EventType.DIALOG_PINNED: _dialog_pinned,
    EventType.PINNED_DIALOGS: _pinned_dialogs,
    EventType.DIALOG_UNREAD_MARK: _unread_mark,
    EventType.NOTIFY_SETTINGS: _notify_settings,
    EventType.DRAFT: _draft,
    EventType.PEER_SETTINGS: _peer_settings,
}
# Events of the pts log.
PTS_EVENTS: dict[EventType, Callable[[UpdateEvent], Rendered | None]] = {
    EventType.FOLDER_PEERS: _folder_peers,
}


# -- dialog filters ----------------------------------------------------------------------


def filter_user_ids(f: types.TypeDialogFilter) -> set[int]:
    """The users a stored DialogFilter names."""
    ids = set()
    for name in ("pinned_peers", "include_peers", "exclude_peers"):
        for p in getattr(f, name, None) or []:
            if isinstance(p, types.InputPeerUser):
                ids.add(int(p.user_id))
    return ids


def _dialog_filter(e: UpdateEvent) -> Rendered | None:
    p = log_payloads.DialogFilterChanged.from_json(e.payload)
    f = decode_filter(p.data) if p.data else None
    update = types.UpdateDialogFilter(id=p.filter_id, filter=f)
    return update, (filter_user_ids(f) if f is not None else set())


def _dialog_filter_order(e: UpdateEvent) -> Rendered | None:
    order = log_payloads.DialogFilterOrder.from_json(e.payload).order
    return types.UpdateDialogFilterOrder(order=order), set()


def _dialog_filters(e: UpdateEvent) -> Rendered | None:
    return types.UpdateDialogFilters(), set()


STATE_EVENTS.update(
    {
        EventType.DIALOG_FILTER: _dialog_filter,
        EventType.DIALOG_FILTER_ORDER: _dialog_filter_order,
        EventType.DIALOG_FILTERS: _dialog_filters,
    }
)
