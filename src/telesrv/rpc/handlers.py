"""The dispatcher's recorders: what each client declares, and the methods asked for in vain."""

from __future__ import annotations

import dataclasses
import logging

from telesrv.rpc.context import RequestContext
from telesrv.rpc.dispatcher import Dispatcher, PasswordWaiting
from telesrv.rpc.registry import Registry
from telesrv.services.auth_keys import AuthKeyService, ClientInfo
from telesrv.services.compat import UnknownMethods
from telesrv.tl import LAYER
from telesrv.tl.layers import served_layer

log = logging.getLogger(__name__)


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


def build_dispatcher(
    registry: Registry,
    auth_keys: AuthKeyService,
    unknown_methods: UnknownMethods | None = None,
    password_waiting: PasswordWaiting | None = None,
) -> Dispatcher:
    """The dispatcher over ``registry`` (filled by whoever builds the handlers), recording
    what clients declare and which methods they asked for in vain. ``password_waiting``
    tells keys that owe their account's password from keys not signed in at all."""
    clients = ConnectionInfoRecorder(auth_keys)
    if unknown_methods is None:
        return Dispatcher(registry, clients, password_waiting=password_waiting)
    return Dispatcher(
        registry,
        clients,
        UnknownMethodRecorder(unknown_methods, clients),
        password_waiting=password_waiting,
    )
