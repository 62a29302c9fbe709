"""The registry gives login-only handlers an authenticated context."""

from __future__ import annotations

import pytest

from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.dispatcher import Dispatcher
from telesrv.rpc.registry import Registry, method, register_all
from telesrv.tl import LAYER, TLObject, functions, types
from telesrv.tl.errors import AuthKeyUnregistered


class Seen:
    def __init__(self) -> None:
        self.contexts: list[RequestContext] = []

    @method(functions.help.GetSupport)
    async def support(self, ctx: AuthedContext, req: functions.help.GetSupport) -> TLObject:
        self.contexts.append(ctx)
        return types.help.Support(phone_number="", user=types.UserEmpty(id=ctx.user_id))

    @method(functions.help.GetNearestDc, requires_auth=False)
    async def nearest(self, ctx: RequestContext, req: functions.help.GetNearestDc) -> TLObject:
        self.contexts.append(ctx)
        return types.NearestDc(country="xx", this_dc=2, nearest_dc=2)


async def _no_info(*_: object) -> None:
    return None


def _ctx(user_id: int | None) -> RequestContext:
    return RequestContext(
        auth_key_id=1, perm_auth_key_id=9, session_id=2, msg_id=3, now=5.0, user_id=user_id
    )


def _setup() -> tuple[Registry, Seen]:
    registry = Registry()
    seen = Seen()
    register_all(registry, seen)
    return registry, seen


async def test_login_only_handlers_get_an_authed_context_of_the_same_call() -> None:
    registry, seen = _setup()
    ctx = _ctx(7)
    request = functions.InvokeWithLayer(layer=LAYER - 1, query=functions.help.GetSupport())
    outcome = await Dispatcher(registry, _no_info).call(ctx, request)
    assert outcome.error is None
    (got,) = seen.contexts
    assert isinstance(got, AuthedContext) and got.user_id == 7
    # Everything else is the call's own, including what the wrappers set.
    assert (got.auth_key_id, got.perm_auth_key_id, got.session_id, got.msg_id, got.now) == (
        1,
        9,
        2,
        3,
        5.0,
    )
    assert got.layer == LAYER - 1 and got.sessions is ctx.sessions


async def test_handlers_without_login_get_the_call_context_itself() -> None:
    registry, seen = _setup()
    ctx = _ctx(None)
    outcome = await Dispatcher(registry, _no_info).call(ctx, functions.help.GetNearestDc())
    assert outcome.error is None
    assert seen.contexts == [ctx] and not isinstance(seen.contexts[0], AuthedContext)


async def test_a_login_only_handler_is_never_reached_without_a_user() -> None:
    registry, seen = _setup()
    entry = registry.get(functions.help.GetSupport)
    assert entry is not None
    # Even called past the dispatcher, the registered call refuses an anonymous context.
    with pytest.raises(AuthKeyUnregistered):
        await entry.handler(_ctx(None), functions.help.GetSupport())
    assert seen.contexts == []
