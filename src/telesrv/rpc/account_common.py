"""Shared by the account handlers: domain errors -> RPC errors, the origin of a change."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from telesrv.rpc.context import RequestContext
from telesrv.rpc.errors import to_rpc_error
from telesrv.services import accounts as domain

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


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
