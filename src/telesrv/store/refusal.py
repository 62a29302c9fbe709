"""The base of every refusal: an operation refused for a reason the client is told.

A refusal carries the name and code it travels as, so nothing between the service
that refuses and the dispatcher that answers has to translate it. The classes are
generated from the error catalogue into ``telesrv.store.refusals``; they sit in the
store because SQL functions refuse writes by these names too, and a service that
needs a more specific refusal subclasses one of them, keeping its name.
"""

from __future__ import annotations

from typing import ClassVar


class DomainError(Exception):
    """A refused operation; subclasses name the catalogue error it becomes."""

    CODE: ClassVar[int] = 400
    # The name as it travels, ``_X`` standing for the value (FLOOD_WAIT_X). Empty
    # only here: a subclass without a name of its own is a bug, answered INTERNAL.
    TEMPLATE: ClassVar[str] = ""

    def __init__(self, value: int | None = None) -> None:
        if value is None:
            super().__init__()
        else:
            super().__init__(value)
        self.value = value
