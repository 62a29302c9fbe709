"""The base class of every generated TL constructor and function.

Kept apart from ``telesrv.tl.core`` so that core can be compiled (telesrv/accel.py) while
this class, which the generated classes derive from, stays an ordinary Python class.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar


class TLObject:
    """Base of every generated constructor and function."""

    __slots__ = ()
    CONSTRUCTOR_ID: ClassVar[int] = 0
    TL_NAME: ClassVar[str] = ""
    TL_TYPE: ClassVar[str] = ""  # the boxed type it belongs to, or the result type
    FIELDS: ClassVar[tuple[str, ...]] = ()
    IS_FUNCTION: ClassVar[bool] = False
    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def _write(self, buf: bytearray) -> None:
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        buf = bytearray()
        self._write(buf)
        return bytes(buf)

    def __bytes__(self) -> bytes:
        return self.to_bytes()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.FIELDS)

    def __repr__(self) -> str:
        parts = []
        for f in self.FIELDS:
            v = getattr(self, f)
            if v is None or v is False or v == []:
                continue  # absent optional fields: keep log lines short
            parts.append(f"{f}={v!r}")
        return f"{self.__class__.__qualname__}({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"_": self.TL_NAME}
        for f in self.FIELDS:
            d[f] = _to_plain(getattr(self, f))
        return d

    def iter_fields(self) -> Iterator[tuple[str, Any]]:
        for f in self.FIELDS:
            yield f, getattr(self, f)


def _to_plain(v: Any) -> Any:
    if isinstance(v, TLObject):
        return v.to_dict()
    if isinstance(v, list):
        return [_to_plain(x) for x in v]
    return v
