"""Reactions -> TL: a message's messageReactions in one owner's view, and the
updateMessageReactions of the state log's reaction events."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from telesrv.services.update_log import EventType, UpdateEvent, log_payloads
from telesrv.tl import types

Rendered = tuple["types.TypeUpdate", set[int]]


# One reaction of a stored summary: [user_id, emoticon, big, date] and, when it is
# hidden from everyone but its reactor, a fifth element true.
Entry = Sequence[object]


def _entry(entry: Entry) -> tuple[int, str, bool, int, bool]:
    """(user id, emoticon, big, date, hidden) of a stored reaction."""
    user_id, emoticon, big, date = entry[:4]
    assert isinstance(user_id, int) and isinstance(emoticon, str) and isinstance(date, int)
    return user_id, emoticon, bool(big), date, len(entry) > 4 and bool(entry[4])


def message_reactions(
    owner: int, summary: Sequence[Entry] | None, unread: bool
) -> types.MessageReactions | None:
    """messageReactions of a message for ``owner`` (None when nobody reacted).

    ``summary`` is [[user_id, emoticon, big, date], ...] oldest first; an entry with a
    fifth element (true) is hidden from everyone but its reactor (put while the other
    side blocked them). Counts come in the order each reaction was first put; the
    owner's own ones carry chosen_order. In a private chat every reaction is listed in
    recent_reactions (with who put it), the peer's marked unread while the owner has not
    seen it.
    """
    if not summary:
        return None
    counts: dict[str, int] = {}
    chosen: dict[str, int] = {}
    recent: list[types.MessagePeerReaction] = []
    for entry in summary:
        user_id, emoticon, big, date, hidden = _entry(entry)
        if hidden and user_id != owner:
            continue
        counts[emoticon] = counts.get(emoticon, 0) + 1
        mine = user_id == owner
        if mine and emoticon not in chosen:
            chosen[emoticon] = len(chosen)
        recent.append(
            types.MessagePeerReaction(
                big=big,
                unread=unread and not mine,
                my=mine,
                peer_id=types.PeerUser(user_id=user_id),
                date=date,
                reaction=types.ReactionEmoji(emoticon=emoticon),
            )
        )
    results = [
        types.ReactionCount(
            chosen_order=chosen.get(emoticon),
            reaction=types.ReactionEmoji(emoticon=emoticon),
            count=count,
        )
        for emoticon, count in counts.items()
    ]
    if not results:
        return None
    # Newest first, as Telegram lists recent reactions.
    return types.MessageReactions(results=results, recent_reactions=recent[::-1])


def reactions_user_ids(summary: Sequence[Entry] | None) -> set[int]:
    return {_entry(r)[0] for r in summary or []}


def _message_reactions(e: UpdateEvent) -> Rendered | None:
    p = log_payloads.MessageReactions.from_json(e.payload)
    if e.peer_user_id is None or p is None:
        return None
    summary = p.reactions
    reactions = message_reactions(e.user_id, summary, p.unread)
    update = types.UpdateMessageReactions(
        peer=types.PeerUser(user_id=e.peer_user_id),
        msg_id=p.box_id,
        reactions=reactions or types.MessageReactions(results=[], recent_reactions=[]),
    )
    return update, {e.peer_user_id} | reactions_user_ids(summary)


# Events of the state log (no pts).
STATE_EVENTS: dict[EventType, Callable[[UpdateEvent], Rendered | None]] = {
    EventType.MESSAGE_REACTIONS: _message_reactions,
}
