"""contacts.search and contacts.acceptContact: finding people, and sharing one's phone
number from a chat's action bar (TL <-> domain)."""

from __future__ import annotations

from telesrv.rpc.account_common import origin
from telesrv.rpc.context import AuthedContext
from telesrv.rpc.peers import Peers
from telesrv.rpc.registry import method
from telesrv.rpc.render import peer_user
from telesrv.rpc.users import ChatView, no_chat_view
from telesrv.rpc.users_tl import UsersTl
from telesrv.services.contacts import ContactService
from telesrv.services.people_search import PeopleSearch
from telesrv.tl import TLObject, functions, types


class PeopleHandlers:
    def __init__(
        self,
        people_search: PeopleSearch,
        contacts: ContactService,
        peers: Peers,
        users_tl: UsersTl,
        chat_view: ChatView = no_chat_view,
    ) -> None:
        self._search = people_search
        self._contacts = contacts
        self._peers = peers
        self._users_tl = users_tl
        self._chat_view = chat_view

    @method(functions.contacts.Search)
    async def search(self, ctx: AuthedContext, req: functions.contacts.Search) -> TLObject:
        viewer = ctx.user_id
        # The broadcasts and bots flags widen a search to channels and bots; there are
        # none here, so users alone are searched either way.
        found = await self._search.search(viewer, req.q, req.limit)
        found_mine, found_others = found.my_results, found.results
        users = await self._users_tl(viewer, [*found_mine, *found_others], ctx.now)
        return types.contacts.Found(
            my_results=[peer_user(u) for u in found_mine],
            results=[peer_user(u) for u in found_others],
            chats=[],
            users=users,
        )

    @method(functions.contacts.AcceptContact)
    async def accept_contact(
        self, ctx: AuthedContext, req: functions.contacts.AcceptContact
    ) -> TLObject:
        viewer = ctx.user_id
        user_id = await self._peers.resolve_input_user(ctx, req.id)
        await self._contacts.accept_contact(viewer, user_id, origin(ctx))
        _, settings = await self._chat_view(viewer, user_id)
        return types.Updates(
            updates=[types.UpdatePeerSettings(peer=peer_user(user_id), settings=settings)],
            users=await self._users_tl(viewer, [user_id], ctx.now),
            chats=[],
            date=int(ctx.now),
            seq=0,
        )
