"""Profile photo changes as updates: the state-log event a change writes for the
devices of the user whose view changed becomes ``updateUser`` (the user object that
comes with it carries the photo now shown)."""

from __future__ import annotations

from collections.abc import Callable

from telesrv.services.update_log import EventType, UpdateEvent
from telesrv.tl import types

Rendered = tuple["types.TypeUpdate", set[int]]


def _user_photo(e: UpdateEvent) -> Rendered | None:
    if e.peer_user_id is None:
        return None
    return types.UpdateUser(user_id=e.peer_user_id), {e.peer_user_id}


# The state-log events of this concept, for rpc/render.py.
STATE_EVENTS: dict[EventType, Callable[[UpdateEvent], Rendered | None]] = {
    EventType.USER_PHOTO: _user_photo,
}
