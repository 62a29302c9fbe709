"""The RPC error catalogue as typed exceptions (generated from ``errors.tsv``)."""

import re

from telesrv.tl._generated.errors import *  # noqa: F403
from telesrv.tl._generated.errors import BY_TEMPLATE
from telesrv.tl.rpcerror import CustomRpcError as CustomRpcError
from telesrv.tl.rpcerror import RpcError as RpcError

_INNER_VALUE = re.compile(r"_(\d+)_")


def from_wire(code: int, message: str) -> RpcError:
    """The typed exception for an ``rpc_error`` as it travels (``FLOOD_WAIT_30`` ...)."""
    cls = BY_TEMPLATE.get(message)
    # "FLOOD_WAIT_X" itself has no value
    if cls is not None and not (message.endswith("_X") or "_X_" in message):
        return cls()
    head, _, tail = message.rpartition("_")
    cls = BY_TEMPLATE.get(head + "_X") if head else None
    if cls is not None:
        return cls(int(tail) if tail.lstrip("-").isdigit() else tail)
    inner = _INNER_VALUE.search(message)  # FILE_PART_3_MISSING
    if inner is not None:
        cls = BY_TEMPLATE.get(f"{message[: inner.start()]}_X_{message[inner.end() :]}")
        if cls is not None:
            return cls(int(inner.group(1)))
    return CustomRpcError(code, message)
