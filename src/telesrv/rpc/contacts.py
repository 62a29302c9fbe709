"""contacts.*: the address book, blocks, and finding people by username or phone."""

from __future__ import annotations

from telesrv.rpc.account_common import origin
from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.peers import Peers
from telesrv.rpc.registry import method
from telesrv.rpc.users_tl import UsersTl, status_to_tl
from telesrv.services.contacts import ContactService, PhoneContact, contacts_hash
from telesrv.services.users import UserService
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import LimitInvalid

DELETE_MAX = 1000


class ContactsHandlers:
    def __init__(
        self, contacts: ContactService, users: UserService, peers: Peers, users_tl: UsersTl
    ) -> None:
        self._contacts = contacts
        self._users = users
        self._peers = peers
        self._users_tl = users_tl

    def _updates(self, ctx: RequestContext, users: list[types.TypeUser]) -> TLObject:
        return types.Updates(updates=[], users=users, chats=[], date=int(ctx.now), seq=0)

    async def _resolved(self, ctx: AuthedContext, user_id: int) -> TLObject:
        return types.contacts.ResolvedPeer(
            peer=types.PeerUser(user_id=user_id),
            chats=[],
            users=[await self._users_tl.one(ctx.user_id, user_id, ctx.now)],
        )

    @method(functions.contacts.ImportContacts)
    async def import_contacts(
        self, ctx: AuthedContext, req: functions.contacts.ImportContacts
    ) -> TLObject:
        wanted = [
            PhoneContact(c.client_id, c.phone, c.first_name, c.last_name)
            for c in req.contacts
            if isinstance(c, types.InputPhoneContact)
        ]
        result = await self._contacts.import_contacts(ctx.user_id, wanted, origin(ctx))
        users = await self._users_tl(ctx.user_id, [uid for uid, _ in result.imported], ctx.now)
        return types.contacts.ImportedContacts(
            imported=[
                types.ImportedContact(user_id=uid, client_id=client_id)
                for uid, client_id in result.imported
            ],
            popular_invites=[],
            retry_contacts=result.retry_client_ids,
            users=users,
        )

    @method(functions.contacts.GetContacts)
    async def get_contacts(
        self, ctx: AuthedContext, req: functions.contacts.GetContacts
    ) -> TLObject:
        contacts = await self._contacts.contacts(ctx.user_id)
        ids = [c.user_id for c in contacts]
        if req.hash != 0 and req.hash == contacts_hash(ids):
            return types.contacts.ContactsNotModified()
        return types.contacts.Contacts(
            contacts=[types.Contact(user_id=c.user_id, mutual=c.mutual) for c in contacts],
            saved_count=0,
            users=await self._users_tl(ctx.user_id, ids, ctx.now),
        )

    @method(functions.contacts.GetStatuses)
    async def get_statuses(
        self, ctx: AuthedContext, req: functions.contacts.GetStatuses
    ) -> list[TLObject]:
        contacts = await self._contacts.contacts(ctx.user_id)
        views = await self._users_tl.projection.views(
            ctx.user_id, [c.user_id for c in contacts], ctx.now
        )
        return [
            types.ContactStatus(user_id=v.user_id, status=status_to_tl(v.status)) for v in views
        ]

    @method(functions.contacts.AddContact)
    async def add_contact(self, ctx: AuthedContext, req: functions.contacts.AddContact) -> TLObject:
        user_id = await self._peers.resolve_input_user(ctx, req.id)
        await self._contacts.add_contact(
            ctx.user_id, user_id, req.first_name, req.last_name, origin(ctx), phone=req.phone
        )
        return self._updates(ctx, await self._users_tl(ctx.user_id, [user_id], ctx.now))

    @method(functions.contacts.DeleteContacts)
    async def delete_contacts(
        self, ctx: AuthedContext, req: functions.contacts.DeleteContacts
    ) -> TLObject:
        if len(req.id) > DELETE_MAX:
            raise LimitInvalid()
        ids = [await self._peers.resolve_input_user(ctx, u) for u in req.id]
        deleted = await self._contacts.delete_contacts(ctx.user_id, ids, origin(ctx))
        return self._updates(ctx, await self._users_tl(ctx.user_id, deleted, ctx.now))

    @method(functions.contacts.DeleteByPhones)
    async def delete_by_phones(
        self, ctx: AuthedContext, req: functions.contacts.DeleteByPhones
    ) -> bool:
        if len(req.phones) > DELETE_MAX:
            raise LimitInvalid()
        await self._contacts.delete_by_phones(ctx.user_id, req.phones, origin(ctx))
        return True

    @method(functions.contacts.Block)
    async def block(self, ctx: AuthedContext, req: functions.contacts.Block) -> bool:
        user_id = await self._peers.resolve_input_peer(ctx, req.id)
        await self._contacts.block(ctx.user_id, user_id, ctx.now, origin(ctx))
        return True

    @method(functions.contacts.Unblock)
    async def unblock(self, ctx: AuthedContext, req: functions.contacts.Unblock) -> bool:
        user_id = await self._peers.resolve_input_peer(ctx, req.id)
        await self._contacts.unblock(ctx.user_id, user_id, origin(ctx))
        return True

    @method(functions.contacts.GetBlocked)
    async def get_blocked(self, ctx: AuthedContext, req: functions.contacts.GetBlocked) -> TLObject:
        total, page = await self._contacts.blocked(ctx.user_id, req.offset, req.limit)
        blocked = [
            types.PeerBlocked(peer_id=types.PeerUser(user_id=b.user_id), date=b.date) for b in page
        ]
        users = await self._users_tl(ctx.user_id, [b.user_id for b in page], ctx.now)
        if req.offset <= 0 and total <= len(page):
            return types.contacts.Blocked(blocked=blocked, chats=[], users=users)
        return types.contacts.BlockedSlice(count=total, blocked=blocked, chats=[], users=users)

    @method(functions.contacts.ResolveUsername)
    async def resolve_username(
        self, ctx: AuthedContext, req: functions.contacts.ResolveUsername
    ) -> TLObject:
        return await self._resolved(ctx, await self._users.resolve_username(req.username))

    @method(functions.contacts.ResolvePhone)
    async def resolve_phone(
        self, ctx: AuthedContext, req: functions.contacts.ResolvePhone
    ) -> TLObject:
        return await self._resolved(ctx, await self._contacts.resolve_phone(ctx.user_id, req.phone))
