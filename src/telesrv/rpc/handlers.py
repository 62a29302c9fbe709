"""Which handlers serve which methods: the RPC half of the object graph."""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from telesrv.rpc.account import AccountHandlers
from telesrv.rpc.auth import AuthHandlers
from telesrv.rpc.auth_keys import TempKeyHandlers
from telesrv.rpc.contacts import ContactsHandlers
from telesrv.rpc.context import RequestContext
from telesrv.rpc.dispatcher import Dispatcher
from telesrv.rpc.help import DefaultReaction, HelpHandlers, LangpackHandlers, ServerAddress
from telesrv.rpc.peers import Peers
from telesrv.rpc.qr_login import QrLoginHandlers
from telesrv.rpc.registry import Registry, register_all
from telesrv.rpc.users import ChatView, UsersHandlers, no_chat_view
from telesrv.rpc.users_tl import UsersTl
from telesrv.services.auth_keys import AuthKeyService, ClientInfo
from telesrv.services.compat import UnknownMethods
from telesrv.tl import LAYER
from telesrv.tl.layers import served_layer

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from telesrv.config import Settings
    from telesrv.services.account_services import AccountServices


class ConnectionInfoRecorder:
    """Persists the layer and initConnection details per permanent auth key."""

    def __init__(self, auth_keys: AuthKeyService) -> None:
        self._auth_keys = auth_keys
        self._last: dict[int, ClientInfo] = {}

    async def __call__(
        self, ctx: RequestContext, layer: int | None, client: ClientInfo | None
    ) -> None:
        key = ctx.perm_auth_key_id
        previous = self._last.get(key)
        if client is None and previous is None:
            return  # a bare invokeWithLayer: nothing to describe the device yet
        base = client if client is not None else previous
        assert base is not None
        # The layer of an invokeWithLayer in this call, else the last one recorded.
        details = dataclasses.replace(base, layer=layer or (previous.layer if previous else LAYER))
        if details == previous:
            return  # clients repeat initConnection on every reconnect
        if previous is None or (previous.layer, previous.app_version, previous.api_id) != (
            details.layer,
            details.app_version,
            details.api_id,
        ):
            # Once per auth key and process, and again when the client changes: which
            # layer (and so which converters) and which app the key's connections use.
            log.info(
                "auth key %016x declared layer %d (served %d): api_id %d, %s %s on %s",
                key & 0xFFFFFFFFFFFFFFFF,
                details.layer,
                served_layer(details.layer),
                details.api_id,
                details.device_model,
                details.app_version,
                details.system_version,
            )
        self._last[key] = details
        if len(self._last) > 100_000:
            self._last.pop(next(iter(self._last)))
        await self._auth_keys.record_client(key, details)

    def last_client(self, perm_auth_key_id: int) -> ClientInfo | None:
        """The client details this process last recorded for the key (clients repeat
        initConnection on every connection, so a live key has them)."""
        return self._last.get(perm_auth_key_id)


class UnknownMethodRecorder:
    """Records each METHOD_NOT_IMPLEMENTED with the layer and app version of its client."""

    def __init__(self, unknown: UnknownMethods, clients: ConnectionInfoRecorder) -> None:
        self._unknown = unknown
        self._clients = clients

    async def __call__(self, ctx: RequestContext, method: str) -> None:
        client = self._clients.last_client(ctx.perm_auth_key_id)
        layer = client.layer if client is not None else ctx.layer
        await self._unknown.record(method, layer, client.app_version if client else None)


# -- accounts -------------------------------------------------------------------------


def account_handlers(
    accounts: AccountServices, chat_view: ChatView | None = None, users_tl: UsersTl | None = None
) -> list[object]:
    """auth.*, account.*, users.*, contacts.* on the account services (``users_tl``: the
    process's one, so that answers and pushes share the users built)."""
    users_tl = users_tl if users_tl is not None else UsersTl(accounts.projection)
    peers = Peers(accounts.access_hashes)
    users = UsersHandlers(
        accounts.users, accounts.contacts, peers, users_tl, chat_view or no_chat_view
    )
    handlers: list[object] = [
        AuthHandlers(accounts.login, accounts.authorizations, users_tl),
        AccountHandlers(accounts.users, accounts.authorizations, users_tl),
        users,
        ContactsHandlers(accounts.contacts, accounts.users, peers, users_tl),
    ]
    if accounts.qr_login is not None:
        handlers.append(QrLoginHandlers(accounts.qr_login, users_tl))
    return handlers


def build_dispatcher(
    settings: Settings,
    auth_keys: AuthKeyService,
    address: ServerAddress,
    accounts: AccountServices | None = None,
    extra_handlers: tuple[object, ...] = (),
    unknown_methods: UnknownMethods | None = None,
    chat_view: ChatView | None = None,
    default_reaction: DefaultReaction | None = None,
    users_tl: UsersTl | None = None,
) -> Dispatcher:
    registry = Registry()
    if accounts is not None:
        register_all(registry, *account_handlers(accounts, chat_view, users_tl))
    register_all(registry, *extra_handlers)
    register_all(
        registry,
        HelpHandlers(address, default_reaction),
        LangpackHandlers(),
        TempKeyHandlers(auth_keys),
    )
    clients = ConnectionInfoRecorder(auth_keys)
    if unknown_methods is None:
        return Dispatcher(registry, clients)
    return Dispatcher(registry, clients, UnknownMethodRecorder(unknown_methods, clients))
