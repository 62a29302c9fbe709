"""Method registry: TL function class -> handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from telesrv.rpc.context import RequestContext
from telesrv.tl import TLObject

Handler = Callable[[RequestContext, Any], Awaitable[Any]]
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


@dataclass(frozen=True)
class Method:
    function: type[TLObject]
    handler: Handler
    requires_auth: bool


class Registry:
    def __init__(self) -> None:
        self._methods: dict[type[TLObject], Method] = {}

    def add(
        self, function: type[TLObject], handler: Handler, *, requires_auth: bool = True
    ) -> None:
        if not function.IS_FUNCTION:
            raise TypeError(f"{function.TL_NAME} is a constructor, not a method")
        if function in self._methods:
            raise ValueError(f"{function.TL_NAME} is registered twice")
        self._methods[function] = Method(function, handler, requires_auth)

    def get(self, function: type[TLObject]) -> Method | None:
        return self._methods.get(function)

    def names(self) -> Iterable[str]:
        return sorted(m.function.TL_NAME for m in self._methods.values())


def method(function: type[TLObject], *, requires_auth: bool = True) -> Callable[[F], F]:
    """Mark a handler method of a service class; ``register_all`` collects them."""

    def mark(handler: F) -> F:
        handler.__tl_method__ = (function, requires_auth)  # type: ignore[attr-defined]
        return handler

    return mark


def register_all(registry: Registry, *handler_objects: object) -> None:
    """Add every ``@method``-marked bound method of the given objects."""
    for obj in handler_objects:
        for name in dir(obj):
            fn = getattr(obj, name, None)
            marker = getattr(fn, "__tl_method__", None)
            if marker is not None and fn is not None:
                function, requires_auth = marker
                registry.add(function, fn, requires_auth=requires_auth)
