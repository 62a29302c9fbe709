"""The handler classes are found, not listed.

Every class named ``...Handlers`` that a module of this package defines serves the
methods it marks. It is built from the process's parts by the names of its
constructor's parameters (``resolve_peer``, ``users_for``, ``history`` ...), so adding
a handler module, or a method to one, needs no edit where the process is put together;
a new part (a service) is added there once, under the name its handlers use.

A part given as None is one this process does not have (QR login turned off): the
classes that need it are not served. A required parameter with no part of its name is
a wiring mistake, raised at start, unless ``partial`` is asked for (tests that build a
few services and serve what those allow).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Mapping
from functools import cache
from types import ModuleType

HANDLERS_SUFFIX = "Handlers"


class MissingPart(LookupError):
    def __init__(self, cls: type, name: str) -> None:
        super().__init__(f"{cls.__module__}.{cls.__qualname__} needs a part named {name!r}")


@cache
def handler_classes() -> tuple[type, ...]:
    """Every handler class of the package's modules, in module then source order."""
    package = importlib.import_module(__package__ or "telesrv.rpc")
    found: list[type] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        found.extend(_defined_in(module))
    return tuple(found)


def _defined_in(module: ModuleType) -> list[type]:
    # A module's namespace keeps the order its names were bound in: source order,
    # without reading the source (which an installed package may not ship).
    return [
        value
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and name.endswith(HANDLERS_SUFFIX)
        and value.__module__ == module.__name__
    ]


def build_handlers(parts: Mapping[str, object], *, partial: bool = False) -> list[object]:
    """One instance of every handler class whose parts are here."""
    built: list[object] = []
    for cls in handler_classes():
        arguments = _arguments(cls, parts, partial)
        if arguments is not None:
            built.append(cls(**arguments))
    return built


def _arguments(cls: type, parts: Mapping[str, object], partial: bool) -> dict[str, object] | None:
    """The keyword arguments for ``cls`` from ``parts``; None: not served here."""
    arguments: dict[str, object] = {}
    for name, parameter in inspect.signature(cls).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if name in parts:
            value = parts[name]
            if value is None:
                if parameter.default is parameter.empty:
                    return None  # a part this process does not have
                continue
            arguments[name] = value
        elif parameter.default is parameter.empty:
            if partial:
                return None
            raise MissingPart(cls, name)
    return arguments
