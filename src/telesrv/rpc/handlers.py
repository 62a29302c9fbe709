"""Which handlers serve which methods: the RPC half of the object graph."""

from __future__ import annotations

from typing import TYPE_CHECKING

from telesrv.rpc.account import AccountHandlers
from telesrv.rpc.auth import AuthHandlers
from telesrv.rpc.auth_keys import TempKeyHandlers
from telesrv.rpc.contacts import ContactsHandlers
from telesrv.rpc.context import RequestContext
from telesrv.rpc.dispatcher import ClientInfo, Dispatcher
from telesrv.rpc.help import HelpHandlers, LangpackHandlers, ServerAddress
from telesrv.rpc.peers import Peers
from telesrv.rpc.registry import Registry, register_all
from telesrv.rpc.users import ChatView, UsersHandlers, no_chat_view
from telesrv.rpc.users_tl import UsersTl
from telesrv.services.auth_keys import AuthKeyService, ClientDetails
from telesrv.tl import LAYER

if TYPE_CHECKING:
    from telesrv.config import Settings
    from telesrv.services.account_services import AccountServices


class ConnectionInfoRecorder:
    """Persists the layer and initConnection details per permanent auth key."""

    def __init__(self, auth_keys: AuthKeyService) -> None:
        self._auth_keys = auth_keys
        self._last: dict[int, ClientDetails] = {}

    async def __call__(
        self, ctx: RequestContext, layer: int | None, client: ClientInfo | None
    ) -> None:
        key = ctx.perm_auth_key_id
        previous = self._last.get(key)
        if client is None and previous is None:
            return  # a bare invokeWithLayer: nothing to describe the device yet
        base = client or ClientInfo(
            api_id=previous.api_id if previous else 0,
            device_model=previous.device_model if previous else "",
            system_version=previous.system_version if previous else "",
            app_version=previous.app_version if previous else "",
            system_lang_code=previous.system_lang_code if previous else "",
            lang_pack=previous.lang_pack if previous else "",
            lang_code=previous.lang_code if previous else "",
        )
        details = ClientDetails(
            api_id=base.api_id,
            device_model=base.device_model,
            system_version=base.system_version,
            app_version=base.app_version,
            system_lang_code=base.system_lang_code,
            lang_pack=base.lang_pack,
            lang_code=base.lang_code,
            layer=layer or (previous.layer if previous else LAYER),
        )
        if details == previous:
            return  # clients repeat initConnection on every reconnect
        self._last[key] = details
        if len(self._last) > 100_000:
            self._last.pop(next(iter(self._last)))
        await self._auth_keys.record_client(key, details)


# -- accounts (issue 4) -----------------------------------------------------------------


def account_handlers(accounts: AccountServices, chat_view: ChatView | None = None) -> list[object]:
    """auth.*, account.*, users.*, contacts.* on the account services."""
    users_tl = UsersTl(accounts.projection)
    peers = Peers(accounts.access_hashes)
    users = UsersHandlers(
        accounts.users, accounts.contacts, peers, users_tl, chat_view or no_chat_view
    )
    return [
        AuthHandlers(accounts.login, accounts.authorizations, users_tl),
        AccountHandlers(accounts.users, accounts.authorizations, users_tl),
        users,
        ContactsHandlers(accounts.contacts, accounts.users, peers, users_tl),
    ]


def build_dispatcher(
    settings: Settings,
    auth_keys: AuthKeyService,
    address: ServerAddress,
    accounts: AccountServices | None = None,
    extra_handlers: tuple[object, ...] = (),
    chat_view: ChatView | None = None,
) -> Dispatcher:
    registry = Registry()
    if accounts is not None:
        register_all(registry, *account_handlers(accounts, chat_view))
    register_all(registry, *extra_handlers)
    register_all(registry, HelpHandlers(address), LangpackHandlers(), TempKeyHandlers(auth_keys))
    return Dispatcher(registry, ConnectionInfoRecorder(auth_keys))
