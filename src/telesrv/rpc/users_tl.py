"""Users as TL: the only place a TL ``User`` is built (from the projection's views)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from telesrv.services.users import Presence, StatusView, UserProjection, UserView
from telesrv.tl import types


def status_to_tl(status: StatusView) -> types.TypeUserStatus:
    presence = status.presence
    if presence is Presence.ONLINE:
        return types.UserStatusOnline(expires=status.expires)
    if presence is Presence.OFFLINE:
        return types.UserStatusOffline(was_online=status.was_online)
    if presence is Presence.RECENTLY:
        return types.UserStatusRecently()
    if presence is Presence.LAST_WEEK:
        return types.UserStatusLastWeek()
    if presence is Presence.LAST_MONTH:
        return types.UserStatusLastMonth()
    return types.UserStatusEmpty()


def user_to_tl(view: UserView) -> types.User:
    return types.User(
        id=view.user_id,
        self_=view.is_self,
        contact=view.contact,
        mutual_contact=view.mutual_contact,
        access_hash=view.access_hash,
        first_name=view.first_name,
        last_name=view.last_name or None,
        username=view.username,
        phone=view.phone,
        photo=types.UserProfilePhotoEmpty(),
        status=status_to_tl(view.status),
    )


class UsersTl:
    """(viewer, user ids) -> TL users through the projection: for every handler."""

    def __init__(self, projection: UserProjection) -> None:
        self.projection = projection

    async def __call__(
        self, viewer_id: int, user_ids: Iterable[int], now: float | None = None
    ) -> list[types.TypeUser]:
        views = await self.projection.views(
            viewer_id, user_ids, time.time() if now is None else now
        )
        return [user_to_tl(v) for v in views]

    async def many(
        self, wanted: dict[int, list[int]], now: float | None = None
    ) -> dict[int, list[types.TypeUser]]:
        """viewer -> TL users, for many viewers in one query."""
        views = await self.projection.views_many(wanted, time.time() if now is None else now)
        return {viewer: [user_to_tl(v) for v in found] for viewer, found in views.items()}

    async def one(self, viewer_id: int, user_id: int, now: float) -> types.User:
        """The user, who must exist (a missing one is a bug upstream: KeyError)."""
        view = await self.projection.view(viewer_id, user_id, now)
        if view is None:
            raise KeyError(user_id)
        return user_to_tl(view)
