"""MTProto service messages a session answers itself, dispatched by constructor id.

``msgs_ack``, ``ping``/``ping_delay_disconnect``, ``msgs_state_req``, ``msg_resend_req``
and ``msg_resend_ans_req`` are recognised before any TL decoding; ``get_future_salts``,
``destroy_session`` and ``rpc_drop_answer`` once decoded. Any other query becomes an
:class:`~telesrv.mtproto.session_events.RpcRequest` for the gateway. Each handler takes
the session it acts on, a :class:`~telesrv.mtproto.session.ServerSession`, as the
:class:`ServiceSession` it needs.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Protocol

from telesrv.mtproto.held_messages import FLAG_ANSWER_LOST, OutMessage
from telesrv.mtproto.msgid import (
    MSG_ID_TOO_HIGH,
    MSG_ID_TOO_LOW,
    SeenMsgIds,
    check_client_msg_id,
)
from telesrv.mtproto.salts import future_salts
from telesrv.mtproto.session_events import (
    CancelRpc,
    DestroySession,
    DisconnectDelay,
    Event,
    RpcRequest,
)
from telesrv.tl import DecodeError, TLObject, UnpackBudget, mt, read_object
from telesrv.tl.core import write_bytes
from telesrv.tl.service import encode_rpc_result

# msgs_state_info status bytes
STATE_UNKNOWN = 1
STATE_NOT_RECEIVED = 2
STATE_TOO_NEW = 3
STATE_RECEIVED = 4
# flags kept per received msg_id, with the values msgs_state_info adds to 4
FLAG_ACKED = 8
FLAG_NO_ACK_NEEDED = 16
FLAG_RPC_STARTED = 32
FLAG_ANSWERED = 64

_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_VECTOR_HEAD = struct.Struct("<Ii")
_STATE_INFO_HEAD = struct.Struct("<Iq")

MSGS_ACK = mt.MsgsAck.CONSTRUCTOR_ID
_PING = mt.Ping.CONSTRUCTOR_ID
_PING_DELAY_DISCONNECT = mt.PingDelayDisconnect.CONSTRUCTOR_ID
_GET_FUTURE_SALTS = mt.GetFutureSalts.CONSTRUCTOR_ID
_DESTROY_SESSION = mt.DestroySession.CONSTRUCTOR_ID
_RPC_DROP_ANSWER = mt.RpcDropAnswer.CONSTRUCTOR_ID
_MSGS_STATE_REQ = mt.MsgsStateReq.CONSTRUCTOR_ID
_MSG_RESEND_REQ = mt.MsgResendReq.CONSTRUCTOR_ID
_MSG_RESEND_ANS_REQ = mt.MsgResendAnsReq.CONSTRUCTOR_ID
VECTOR_ID = 0x1CB5C415
# Service queries answered at once, by an answer that is their acknowledgement (a
# pong, a msgs_state_info): no msgs_ack goes ahead of it, which mtcute reads as the
# query acknowledged while its answer is still awaited, and a duplicate gets nothing.
ANSWERED_AT_ONCE = frozenset({_PING, _PING_DELAY_DISCONNECT, _MSGS_STATE_REQ})

# Accepted whatever their seq_no parity says: the parity of these carries nothing we
# act on except whether to acknowledge them, and real clients disagree (Pyrogram sends
# ``ping`` even, Telethon ``msgs_state_req`` even, mtcute numbers ``msgs_ack`` as
# content-related). An odd one is acknowledged like any content-related message, but
# for those ANSWERED_AT_ONCE.
ANY_PARITY = frozenset(
    {
        MSGS_ACK,
        _PING,
        _PING_DELAY_DISCONNECT,
        _MSGS_STATE_REQ,
        _MSG_RESEND_REQ,
        _MSG_RESEND_ANS_REQ,
        mt.HttpWait.CONSTRUCTOR_ID,
        mt.MsgsStateInfo.CONSTRUCTOR_ID,
        mt.MsgsAllInfo.CONSTRUCTOR_ID,
        mt.MsgDetailedInfo.CONSTRUCTOR_ID,
        mt.MsgNewDetailedInfo.CONSTRUCTOR_ID,
    }
)
# Sent to us only as answers to queries we never make, or as hints we do not need.
_IGNORED = frozenset(
    {
        mt.HttpWait.CONSTRUCTOR_ID,
        mt.MsgsStateInfo.CONSTRUCTOR_ID,
        mt.MsgsAllInfo.CONSTRUCTOR_ID,
        mt.MsgDetailedInfo.CONSTRUCTOR_ID,
        mt.MsgNewDetailedInfo.CONSTRUCTOR_ID,
        mt.RpcResult.CONSTRUCTOR_ID,
    }
)


class ServiceSession(Protocol):
    """What the handlers here read and change of the session they answer for;
    :class:`~telesrv.mtproto.session.ServerSession` is one. The handlers are part of
    the session's own rules, split off by message kind, so they use its private state
    too. Listed here rather than imported: the session module imports these handler
    tables, and this module stays below it."""

    @property
    def auth_key_id(self) -> int: ...

    @property
    def session_id(self) -> int: ...

    @property
    def _salt_secret(self) -> bytes: ...

    @property
    def _seen(self) -> SeenMsgIds: ...

    @property
    def _held(self) -> dict[int, OutMessage]: ...  # msg_id -> sent, unacknowledged

    @property
    def _held_answers(self) -> dict[int, int]: ...  # req_msg_id -> its held answer

    @property
    def _queued_answers(self) -> dict[int, OutMessage]: ...  # req_msg_id -> not flushed

    @property
    def _running(self) -> set[int]: ...  # requests handed to the gateway, unanswered

    @property
    def _resend(self) -> dict[int, None]: ...  # held msg_ids to send again

    def _unhold(self, msg_id: int) -> None: ...

    def _queue_service(self, body: bytes, *, response: bool) -> None: ...

    def _queue_pong(self, msg_id: int, body: bytes) -> None: ...

    def _constructor_invalid(self, msg_id: int, cid: int, detail: str) -> None: ...

    def _answer_lost(self, req_msg_id: int) -> None: ...

    def answered_instead_of_ack(self, msg_id: int) -> None: ...

    def answer_destroy_session(self, session_id: int, destroyed: bool) -> None: ...


# Service messages, by constructor id (see SERVICE_HANDLERS). Each gets the
# message's msg_id and its body (constructor id included).


def _on_msgs_ack(
    session: ServiceSession, msg_id: int, body: bytes, now: float, events: list[Event]
) -> None:
    for out_id in _decode_long_vector(body) or ():
        session._unhold(out_id)


def _on_ping(
    session: ServiceSession, msg_id: int, body: bytes, now: float, events: list[Event]
) -> None:
    if len(body) >= 12:
        # The pong is the acknowledgement. mtcute warns of an ack for a ping whose
        # pong it has not read yet, and the ack goes ahead of the pong in a packet.
        session.answered_instead_of_ack(msg_id)
        session._queue_pong(msg_id, body)
    else:
        session._constructor_invalid(msg_id, _U32.unpack_from(body, 0)[0], "truncated")


def _on_ping_delay_disconnect(
    session: ServiceSession, msg_id: int, body: bytes, now: float, events: list[Event]
) -> None:
    if len(body) >= 16:
        session.answered_instead_of_ack(msg_id)  # as for ping
        session._queue_pong(msg_id, body)
        events.append(DisconnectDelay(_I32.unpack_from(body, 12)[0]))
    else:
        session._constructor_invalid(msg_id, _U32.unpack_from(body, 0)[0], "truncated")


def _on_ignored(
    session: ServiceSession, msg_id: int, body: bytes, now: float, events: list[Event]
) -> None:
    pass


def _on_msgs_state_req(
    session: ServiceSession, msg_id: int, body: bytes, now: float, events: list[Event]
) -> None:
    session.answered_instead_of_ack(msg_id)  # as for ping
    _answer_state_req(session, msg_id, _decode_long_vector(body) or [], now)


def _on_msg_resend_req(
    session: ServiceSession, msg_id: int, body: bytes, now: float, events: list[Event]
) -> None:
    for out_id in _decode_long_vector(body) or ():
        if out_id in session._held:
            session._resend[out_id] = None


def _on_msg_resend_ans_req(
    session: ServiceSession, msg_id: int, body: bytes, now: float, events: list[Event]
) -> None:
    for req_id in _decode_long_vector(body) or ():
        answer_id = session._held_answers.get(req_id)
        if answer_id is not None:
            session._resend[answer_id] = None
        elif (session._seen.flags(req_id) or 0) & FLAG_ANSWER_LOST:
            session._answer_lost(req_id)


def handle_query(
    session: ServiceSession,
    msg_id: int,
    body: bytes,
    now: float,
    events: list[Event],
    budget: UnpackBudget,
) -> None:
    try:
        request, end = read_object(body, 0, budget)
        if end != len(body):
            raise DecodeError("trailing bytes after the request")
    except DecodeError as e:
        session._constructor_invalid(msg_id, _U32.unpack_from(body, 0)[0], str(e))
        return
    handler = SERVICE_QUERY_HANDLERS.get(request.CONSTRUCTOR_ID)
    if handler is not None:
        handler(session, msg_id, request, now, events)
    else:
        session._running.add(msg_id)
        session._seen.set_flags(msg_id, FLAG_RPC_STARTED)
        events.append(RpcRequest(msg_id, request))


# Service queries answered here rather than by the RPC layer (see
# SERVICE_QUERY_HANDLERS); each gets the decoded request.


def _on_get_future_salts(
    session: ServiceSession, msg_id: int, request: Any, now: float, events: list[Event]
) -> None:
    salts = future_salts(session._salt_secret, session.auth_key_id, now, request.num)
    answer = mt.FutureSalts(
        req_msg_id=msg_id,
        now=int(now),
        salts=[mt.FutureSalt(valid_since=s, valid_until=u, salt=v) for s, u, v in salts],
    )
    # The answer is the acknowledgement: an ack sent ahead of it reads to some clients
    # (mtcute warns) as the query acknowledged while its answer is still awaited.
    session.answered_instead_of_ack(msg_id)
    session._queue_service(answer.to_bytes(), response=True)


def _on_destroy_session(
    session: ServiceSession, msg_id: int, request: Any, now: float, events: list[Event]
) -> None:
    target: int = request.session_id
    if target == session.session_id:
        # Only other sessions can be destroyed from here.
        session.answer_destroy_session(target, False)
    else:
        events.append(DestroySession(target))


def _on_rpc_drop_answer(
    session: ServiceSession, msg_id: int, request: Any, now: float, events: list[Event]
) -> None:
    _drop_answer(session, msg_id, request.req_msg_id, events)


def _drop_answer(
    session: ServiceSession, msg_id: int, req_msg_id: int, events: list[Event]
) -> None:
    answer: TLObject
    queued = session._queued_answers.pop(req_msg_id, None)
    held_id = session._held_answers.get(req_msg_id)
    if req_msg_id in session._running:
        session._running.discard(req_msg_id)
        events.append(CancelRpc(req_msg_id))
        answer = mt.RpcAnswerDroppedRunning()
    elif queued is not None:
        queued.dropped = True  # computed but not sent yet: as good as running
        answer = mt.RpcAnswerDroppedRunning()
    elif held_id is not None:
        out = session._held[held_id]
        session._unhold(held_id)
        answer = mt.RpcAnswerDropped(msg_id=out.msg_id, seq_no=out.seq_no, bytes=len(out.body))
    else:
        answer = mt.RpcAnswerUnknown()
    session._queue_service(encode_rpc_result(msg_id, answer.to_bytes()), response=True)


def _answer_state_req(session: ServiceSession, msg_id: int, ids: list[int], now: float) -> None:
    states = bytes([_msg_state(session, i, now) for i in ids])
    buf = bytearray(_STATE_INFO_HEAD.pack(mt.MsgsStateInfo.CONSTRUCTOR_ID, msg_id))
    write_bytes(buf, states)  # info is TL `string` but holds raw bytes
    session._queue_service(bytes(buf), response=True)


def _msg_state(session: ServiceSession, msg_id: int, now: float) -> int:
    flags = session._seen.flags(msg_id)
    if flags is not None:
        return STATE_RECEIVED | (flags & ~FLAG_ANSWER_LOST)
    code = check_client_msg_id(msg_id, now)
    if code == MSG_ID_TOO_LOW or session._seen.is_too_old(msg_id):
        return STATE_UNKNOWN
    highest = session._seen.max_id
    if code == MSG_ID_TOO_HIGH or highest is None or msg_id > highest:
        return STATE_TOO_NEW
    return STATE_NOT_RECEIVED


def _decode_long_vector(body: bytes) -> list[int] | None:
    """The Vector<long> after a constructor id, or None when malformed."""
    if len(body) < 12:
        return None
    vector_id, count = _VECTOR_HEAD.unpack_from(body, 4)
    if vector_id != VECTOR_ID or count < 0 or len(body) != 12 + 8 * count:
        return None
    return list(struct.unpack_from(f"<{count}q", body, 12))


_ServiceHandler = Callable[[ServiceSession, int, bytes, float, list[Event]], None]
_QueryHandler = Callable[[ServiceSession, int, Any, float, list[Event]], None]

# Service messages recognised by constructor id before any TL decoding.
SERVICE_HANDLERS: dict[int, _ServiceHandler] = {
    MSGS_ACK: _on_msgs_ack,
    _PING: _on_ping,
    _PING_DELAY_DISCONNECT: _on_ping_delay_disconnect,
    _MSGS_STATE_REQ: _on_msgs_state_req,
    _MSG_RESEND_REQ: _on_msg_resend_req,
    _MSG_RESEND_ANS_REQ: _on_msg_resend_ans_req,
    **dict.fromkeys(_IGNORED, _on_ignored),
}
# Service queries the session answers itself once decoded; any other request is
# handed to the gateway as an RpcRequest.
SERVICE_QUERY_HANDLERS: dict[int, _QueryHandler] = {
    _GET_FUTURE_SALTS: _on_get_future_salts,
    _DESTROY_SESSION: _on_destroy_session,
    _RPC_DROP_ANSWER: _on_rpc_drop_answer,
}
