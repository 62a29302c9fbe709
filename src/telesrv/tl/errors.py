"""The RPC error catalogue as typed exceptions (generated from ``errors.tsv``)."""

from telesrv.tl._generated.errors import *  # noqa: F403
from telesrv.tl._generated.errors import BY_TEMPLATE
from telesrv.tl.rpcerror import CustomRpcError as CustomRpcError
from telesrv.tl.rpcerror import RpcError as RpcError


def from_wire(code: int, message: str) -> RpcError:
    """The typed exception for an ``rpc_error`` as it travels (``FLOOD_WAIT_30`` ...)."""
    cls = BY_TEMPLATE.get(message)
    if cls is not None and not message.endswith("_X"):  # "FLOOD_WAIT_X" itself has no value
        return cls()
    head, _, tail = message.rpartition("_")
    cls = BY_TEMPLATE.get(head + "_X") if head else None
    if cls is not None:
        return cls(int(tail) if tail.lstrip("-").isdigit() else tail)
    return CustomRpcError(code, message)
