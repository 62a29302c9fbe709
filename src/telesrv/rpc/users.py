"""users.*: users by id, and the full profile of one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.media import photo_tl
from telesrv.rpc.peers import Peers
from telesrv.rpc.registry import method
from telesrv.rpc.users_tl import UsersTl
from telesrv.services.contacts import ContactService
from telesrv.services.files import PhotoRow
from telesrv.services.pins import Pins
from telesrv.services.privacy import PrivacyKey, PrivacyService
from telesrv.services.profile_photos import ProfilePhotos
from telesrv.services.users import UserService
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import LimitInvalid

GET_USERS_MAX = 200
# (viewer, target) -> the viewer's notify settings and action bar for their chat
# (the Type* unions exist for the type checker only: quoted, they are never evaluated)
ChatView = Callable[
    [int, int], Awaitable[tuple["types.TypePeerNotifySettings", "types.TypePeerSettings"]]
]


async def no_chat_view(
    viewer: int, target: int
) -> tuple[types.TypePeerNotifySettings, types.TypePeerSettings]:
    return types.PeerNotifySettings(), types.PeerSettings()


class UsersHandlers:
    def __init__(
        self,
        users: UserService,
        contacts: ContactService,
        peers: Peers,
        users_tl: UsersTl,
        privacy: PrivacyService,
        chat_view: ChatView = no_chat_view,
        profile_photos: ProfilePhotos | None = None,
        pins: Pins | None = None,
    ) -> None:
        self._chat_view = chat_view
        self._profile_photos = profile_photos
        self._pins = pins
        # Required: a handler built without it must fail, not show what the rules hide.
        self._privacy = privacy
        self._users = users
        self._contacts = contacts
        self._peers = peers
        self._users_tl = users_tl

    @method(functions.users.GetUsers)
    async def get_users(
        self, ctx: AuthedContext, req: functions.users.GetUsers
    ) -> list[types.TypeUser]:
        if len(req.id) > GET_USERS_MAX:
            raise LimitInvalid()
        ids = [await self._peers.resolve_input_user(ctx, u) for u in req.id]
        return await self._users_tl(ctx.user_id, ids, ctx.now)

    @method(functions.users.GetFullUser)
    async def get_full_user(self, ctx: AuthedContext, req: functions.users.GetFullUser) -> TLObject:
        viewer = ctx.user_id
        target = await self._peers.resolve_input_user(ctx, req.id)
        account = await self._users.get(target)
        blocked = target != viewer and await self._contacts.is_blocked(viewer, target)
        notify_settings, settings = await self._chat_view(viewer, target)
        photos = await self._full_photos(viewer, target)
        pinned = await self._pins.latest(viewer, target) if self._pins is not None else None
        about = account.about or None
        if about:
            if not await self._privacy.shows(viewer, target, PrivacyKey.ABOUT):
                about = None
        return types.users.UserFull(
            full_user=types.UserFull(
                id=target,
                blocked=blocked,
                about=about,
                settings=settings,
                notify_settings=notify_settings,
                common_chats_count=0,
                profile_photo=photos.profile,
                personal_photo=photos.personal,
                fallback_photo=photos.fallback,
                can_pin_message=True,  # either side may pin in a private chat
                pinned_msg_id=pinned,
            ),
            chats=[],
            users=[await self._users_tl.one(viewer, target, ctx.now)],
        )

    async def _full_photos(self, viewer: int, target: int) -> _Photos:
        if self._profile_photos is None:
            return _Photos(None, None, None)
        full = await self._profile_photos.full(viewer, target)

        def tl(row: PhotoRow | None) -> types.Photo | None:
            return None if row is None else photo_tl(row)

        return _Photos(tl(full.profile), tl(full.personal), tl(full.fallback))


@dataclass(frozen=True, slots=True)
class _Photos:
    profile: types.Photo | None
    personal: types.Photo | None
    fallback: types.Photo | None
