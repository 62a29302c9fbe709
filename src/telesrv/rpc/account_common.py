"""Shared by the account handlers: domain errors -> RPC errors, the origin of a change."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from telesrv.rpc.context import RequestContext
from telesrv.services import accounts as domain
from telesrv.services.contacts import PhoneLookupFlood
from telesrv.tl import errors as rpc
from telesrv.tl.rpcerror import RpcError

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

_SIMPLE: dict[type[domain.AccountError], Callable[[], RpcError]] = {
    domain.PhoneNumberInvalid: rpc.PhoneNumberInvalid,
    domain.PhoneCodeEmpty: rpc.PhoneCodeEmpty,
    domain.PhoneCodeHashEmpty: rpc.PhoneCodeHashEmpty,
    domain.PhoneCodeInvalid: rpc.PhoneCodeInvalid,
    domain.PhoneCodeExpired: rpc.PhoneCodeExpired,
    domain.PhoneNumberOccupied: rpc.PhoneNumberOccupied,
    domain.PhoneNumberUnoccupied: rpc.PhoneNumberUnoccupied,
    domain.PhoneNotOccupied: rpc.PhoneNotOccupied,
    domain.FirstNameInvalid: rpc.FirstnameInvalid,
    domain.LastNameInvalid: rpc.LastnameInvalid,
    domain.AboutTooLong: rpc.AboutTooLong,
    domain.UsernameInvalid: rpc.UsernameInvalid,
    domain.UsernameOccupied: rpc.UsernameOccupied,
    domain.UsernameNotModified: rpc.UsernameNotModified,
    domain.UsernameNotOccupied: rpc.UsernameNotOccupied,
    domain.UserNotFound: rpc.UserIdInvalid,
    domain.ContactIdInvalid: rpc.ContactIdInvalid,
    domain.AuthorizationNotFound: rpc.HashInvalid,
}


def to_rpc_error(exc: domain.AccountError) -> RpcError:
    if isinstance(exc, domain.SendCodeFlood | PhoneLookupFlood):
        return rpc.FloodWait(exc.retry_after)
    return _SIMPLE[type(exc)]()


def account_errors(handler: F) -> F:
    """Raise the RPC error for any account error the handler raises."""

    @functools.wraps(handler)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await handler(*args, **kwargs)
        except domain.AccountError as exc:
            raise to_rpc_error(exc) from None

    return wrapper  # type: ignore[return-value]


def origin(ctx: RequestContext) -> domain.Origin:
    """The session making a change (pushes of the change skip it)."""
    return domain.Origin(auth_key_id=ctx.auth_key_id, session_id=ctx.session_id)
