"""What a session's receive() hands to the gateway, and the error it raises."""

from __future__ import annotations

from dataclasses import dataclass

from telesrv.tl import TLObject


class SessionError(ValueError):
    """The plaintext does not belong to this session or is not a message at all."""


# -- events ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RpcRequest:
    """Run ``request``; answer with send_rpc_result/send_rpc_error(msg_id, ...)."""

    msg_id: int
    request: TLObject


@dataclass(frozen=True, slots=True)
class CancelRpc:
    """The client dropped the answer to a running request (rpc_drop_answer)."""

    req_msg_id: int


@dataclass(frozen=True, slots=True)
class DisconnectDelay:
    """ping_delay_disconnect: close the connection after ``seconds`` without a new one."""

    seconds: int


@dataclass(frozen=True, slots=True)
class DestroySession:
    """destroy_session: forget session ``session_id`` of this auth key, then call
    :meth:`ServerSession.answer_destroy_session`."""

    session_id: int


Event = RpcRequest | CancelRpc | DisconnectDelay | DestroySession
