"""An answer a handler has already written to bytes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WrittenAnswer:
    """What a handler may return in place of its answer's TL object: the answer already
    written, in the current layer (a send's ``updates``, rpc/push_wire.py). A client at
    the current layer gets these bytes as they are. Handlers answer a client at any
    other layer with objects (messages.sendMessage does); should such bytes reach one,
    they are read back by the method's result type and converted as any answer is
    (Dispatcher.encode)."""

    body: bytes
