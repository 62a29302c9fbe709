"""Method registry: TL function class -> handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast, overload

from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.tl import TLObject
from telesrv.tl.errors import AuthKeyUnregistered

# What the dispatcher calls: any context, any request of the registered class.
Handler = Callable[[RequestContext, Any], Awaitable[Any]]
# A handler of a method that needs login.
AuthedHandler = Callable[[AuthedContext, Any], Awaitable[Any]]

Req = TypeVar("Req", bound=TLObject)
S = TypeVar("S")
R = TypeVar("R")


@dataclass(frozen=True)
class Method:
    function: type[TLObject]
    handler: Handler
    requires_auth: bool


def _authed(handler: AuthedHandler) -> Handler:
    async def call(ctx: RequestContext, request: Any) -> Any:
        user_id = ctx.user_id
        # The dispatcher answers these calls with 401 before they get here; the test
        # only proves to the handler that its caller is signed in.
        if user_id is None:
            raise AuthKeyUnregistered()
        return await handler(AuthedContext.of(ctx, user_id), request)

    return call


class Registry:
    def __init__(self) -> None:
        self._methods: dict[type[TLObject], Method] = {}

    @overload
    def add(
        self,
        function: type[TLObject],
        handler: AuthedHandler,
        *,
        requires_auth: Literal[True] = True,
    ) -> None: ...

    @overload
    def add(self, function: type[TLObject], handler: Handler, *, requires_auth: bool) -> None: ...

    def add(
        self,
        function: type[TLObject],
        handler: Handler | AuthedHandler,
        *,
        requires_auth: bool = True,
    ) -> None:
        if not function.IS_FUNCTION:
            raise TypeError(f"{function.TL_NAME} is a constructor, not a method")
        if function in self._methods:
            raise ValueError(f"{function.TL_NAME} is registered twice")
        if requires_auth:
            call = _authed(handler)
        else:
            call = cast(Handler, handler)
        self._methods[function] = Method(function, call, requires_auth)

    def get(self, function: type[TLObject]) -> Method | None:
        return self._methods.get(function)

    def names(self) -> Iterable[str]:
        return sorted(m.function.TL_NAME for m in self._methods.values())


# The decorators keep the handler as it is; their types tie the request parameter to
# the registered class and give login-only handlers an ``AuthedContext``.
@overload
def method(
    function: type[Req], *, requires_auth: Literal[True] = True
) -> Callable[
    [Callable[[S, AuthedContext, Req], Awaitable[R]]],
    Callable[[S, AuthedContext, Req], Awaitable[R]],
]: ...


@overload
def method(
    function: type[Req], *, requires_auth: Literal[False]
) -> Callable[
    [Callable[[S, RequestContext, Req], Awaitable[R]]],
    Callable[[S, RequestContext, Req], Awaitable[R]],
]: ...


def method(function: type[TLObject], *, requires_auth: bool = True) -> Any:
    """Mark a handler method of a service class; ``register_all`` collects them."""

    def mark(handler: Any) -> Any:
        handler.__tl_method__ = (function, requires_auth)
        return handler

    return mark


def marked(function: type[TLObject], handler: Callable[..., Any]) -> Callable[..., Any]:
    """A plain function (no self) marked as ``@method`` marks a handler method, for a
    handler object that sets its methods itself."""
    return method(function)(handler)


def register_all(registry: Registry, *handler_objects: object) -> None:
    """Add every ``@method``-marked bound method of the given objects."""
    for obj in handler_objects:
        for name in dir(obj):
            fn = getattr(obj, name, None)
            marker = getattr(fn, "__tl_method__", None)
            if marker is not None and fn is not None:
                function, requires_auth = marker
                registry.add(function, fn, requires_auth=requires_auth)
