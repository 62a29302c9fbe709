"""users.*: users by id, and the full profile of one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.peers import Peers
from telesrv.rpc.registry import method
from telesrv.rpc.users_tl import UsersTl
from telesrv.services.contacts import ContactService
from telesrv.services.privacy import PrivacyKey, PrivacyService
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
        chat_view: ChatView = no_chat_view,
        privacy: PrivacyService | None = None,
    ) -> None:
        self._chat_view = chat_view
        self._privacy = privacy  # None: the about text is shown to everyone
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
        about = account.about or None
        if about and self._privacy is not None:
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
            ),
            chats=[],
            users=[await self._users_tl.one(viewer, target, ctx.now)],
        )
