"""RPC calls by method and outcome, their latency, and the methods nothing answers."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from telesrv.tl.errors import CustomRpcError, RpcError

RPC_CALLS = Counter(
    "telesrv_rpc_calls_total",
    "RPC calls by method (TL name) and outcome: 'ok' or the error's catalogue name.",
    ["method", "outcome"],
)
RPC_SECONDS = Histogram(
    "telesrv_rpc_seconds",
    "Time from decoding a call to its encoded answer, by method.",
    ["method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5),
)
UNKNOWN_METHODS = Counter(
    "telesrv_rpc_unknown_method_total",
    "Calls answered METHOD_NOT_IMPLEMENTED, by method.",
    ["method"],
)


def outcome(error: RpcError | None) -> str:
    """A bounded label: the catalogue template (FLOOD_WAIT_X, not FLOOD_WAIT_30)."""
    if error is None:
        return "ok"
    if isinstance(error, CustomRpcError):
        return f"custom_{error.code}"
    return type(error).TEMPLATE
