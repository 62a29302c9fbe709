"""Domain errors -> the RPC error catalogue, by the name each carries.

A domain error is generated from its catalogue row, so it knows the name it travels
as; the catalogue error of that name is what the client is sent, with the domain
error's value (the seconds of a FLOOD_WAIT_X) where the name has one.
"""

from __future__ import annotations

from telesrv.services.errors import DomainError
from telesrv.tl.errors import BY_TEMPLATE
from telesrv.tl.rpcerror import RpcError


def to_rpc_error(exc: DomainError) -> RpcError:
    """The catalogue error for a domain error; KeyError for one without a catalogue name."""
    cls = BY_TEMPLATE[exc.TEMPLATE]
    return cls() if exc.value is None else cls(exc.value)
