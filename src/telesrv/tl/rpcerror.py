"""Base class of the RPC error catalogue (``errors.tsv``).

Each catalogue row becomes a subclass in ``telesrv.tl.errors``; handlers raise
them (``raise MessageTooLong()``, ``raise FloodWait(30)``) and the RPC layer
turns them into ``rpc_error`` in one place.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

CATALOGUE_PATH = Path(__file__).with_name("errors.tsv")


@dataclass(frozen=True)
class ErrorSpec:
    name: str  # may end in _X, the placeholder for a number or name
    code: int
    description: str
    # The services (and the SQL functions under them) raise this refusal too: it also
    # becomes a domain error class in ``telesrv.store.refusals``.
    domain: bool = False


def load_catalogue(path: Path = CATALOGUE_PATH) -> list[ErrorSpec]:
    with path.open(newline="") as f:
        rows = csv.DictReader(f, delimiter="\t")
        return [
            ErrorSpec(r["name"], int(r["code"]), r["description"], r["domain"] == "yes")
            for r in rows
        ]


class RpcError(Exception):
    """An error the client is told about as ``rpc_error`` (code, message)."""

    CODE: ClassVar[int] = 500
    TEMPLATE: ClassVar[str] = "INTERNAL"
    DESCRIPTION: ClassVar[str] = ""

    def __init__(self, value: int | str | None = None) -> None:
        self.value = value
        super().__init__(self.message)

    @property
    def code(self) -> int:
        return self.CODE

    @property
    def message(self) -> str:
        """The error_message sent to the client, e.g. ``FLOOD_WAIT_30``."""
        value = self.value if self.value is not None else 0
        if self.TEMPLATE.endswith("_X"):
            return f"{self.TEMPLATE[:-1]}{value}"
        if "_X_" in self.TEMPLATE:
            return self.TEMPLATE.replace("_X_", f"_{value}_", 1)
        return self.TEMPLATE

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.CODE}, {self.message!r})"


class CustomRpcError(RpcError):
    """An error not in the catalogue; avoid it in handlers, it exists for forwarding."""

    def __init__(self, code: int, message: str) -> None:
        self._code = code
        self._message = message
        Exception.__init__(self, message)

    @property
    def code(self) -> int:
        return self._code

    @property
    def message(self) -> str:
        return self._message
