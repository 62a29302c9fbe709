"""Messages a session sent and keeps until the client acknowledges them.

RPC answers and updates stay here so that ``msg_resend_req``, ``msg_resend_ans_req`` or a
reconnect can send them again. Both a count and a byte budget bound them per session
(oldest forgotten first), and ``on_held_change`` tells the owner every change in
held bytes so that it can bound what all sessions hold together.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable

from telesrv.mtproto.msgid import SeenMsgIds
from telesrv.tl.core import RPC_RESULT_ID

log = logging.getLogger(__name__)

# What one held message costs beyond its body (the OutMessage, dict slots), for budgets.
HELD_OVERHEAD = 160
# A held message sent again this many times without being acknowledged is dropped at
# the next reconnect: a client that drops its connection on every resend of it (one
# it cannot parse, say) would otherwise be sent it forever.
MAX_RESENDS = 3
# Set on a request's received msg_id when its answer is forgotten before the client
# acknowledged it (resend loop, budgets): a client that asks for that answer again
# (the same msg_id sent again, msg_resend_ans_req) is told to retry instead of
# waiting for an answer that will never come. Kept out of msgs_state_info.
FLAG_ANSWER_LOST = 128

_U32 = struct.Struct("<I")


class OutMessage:
    """An outgoing message; msg_id and seq_no are set when it is first flushed."""

    __slots__ = (
        "body",
        "content",
        "response",
        "req_msg_id",
        "hold",
        "msg_id",
        "seq_no",
        "dropped",
        "resends",
    )

    def __init__(
        self, body: bytes, content: bool, response: bool, req_msg_id: int | None, hold: bool
    ) -> None:
        self.body = body
        self.content = content
        self.response = response
        self.req_msg_id = req_msg_id  # set for RPC answers
        self.hold = hold
        self.msg_id = 0
        self.seq_no = 0
        self.dropped = False
        self.resends = 0  # times sent again while held


def constructor_of(body: bytes) -> int:
    """The constructor id of what a held message carries (inside its rpc_result)."""
    cid = _U32.unpack_from(body, 0)[0] if len(body) >= 4 else 0
    if cid == RPC_RESULT_ID and len(body) >= 16:
        return int(_U32.unpack_from(body, 12)[0])
    return int(cid)


class HeldMessages:
    """The held store of :class:`~telesrv.mtproto.session.ServerSession`, which sets
    these attributes in its ``__init__``."""

    _held: dict[int, OutMessage]  # msg_id -> sent, unacknowledged; oldest first
    _held_bytes: int
    _held_answers: dict[int, int]  # req_msg_id -> msg_id of its held answer
    _seen: SeenMsgIds
    _max_held_messages: int
    _max_held_bytes: int
    on_held_change: Callable[[int], None] | None

    @property
    def held_count(self) -> int:
        """Sent messages waiting for the client's acknowledgement."""
        return len(self._held)

    @property
    def held_bytes(self) -> int:
        """What the held messages cost, counted as :meth:`on_held_change` is told."""
        return self._held_bytes + HELD_OVERHEAD * len(self._held)

    @property
    def oldest_held_id(self) -> int | None:
        """msg_id of the oldest held message (msg_ids grow with time), or None."""
        return next(iter(self._held), None)

    def drop_oldest_held(self) -> None:
        """Forget the oldest held message: the client re-requests it or sends again."""
        if self._held:
            self._forget(next(iter(self._held)))

    def drop_held(self) -> None:
        """Forget every held message."""
        while self._held:
            self._forget(next(iter(self._held)))

    def _held_to_resend(self) -> list[int]:
        """msg_ids of the held messages to send again on a reconnect; those already
        sent again :data:`MAX_RESENDS` times unacknowledged are dropped instead, with
        one warning per reconnect (a client may hold hundreds of them)."""
        again = []
        dropped: dict[int, int] = {}  # constructor -> how many
        for out_id, out in list(self._held.items()):
            if out.resends < MAX_RESENDS:
                again.append(out_id)
                continue
            cid = constructor_of(out.body)
            dropped[cid] = dropped.get(cid, 0) + 1
            self._forget(out_id)
        if dropped:
            log.warning(
                "dropping held messages sent again %d times, never acknowledged, the "
                "client reconnecting after each: %d (%s)",
                MAX_RESENDS,
                sum(dropped.values()),
                ", ".join(f"{cid:#010x} x{n}" for cid, n in list(dropped.items())[:8]),
            )
        return again

    def _hold(self, out: OutMessage) -> None:
        self._held[out.msg_id] = out
        self._held_bytes += len(out.body)
        if out.req_msg_id is not None:
            self._held_answers[out.req_msg_id] = out.msg_id
        if self.on_held_change is not None:
            # The owner may drop held messages of this session in turn.
            self.on_held_change(len(out.body) + HELD_OVERHEAD)
        while self._held and (
            len(self._held) > self._max_held_messages or self._held_bytes > self._max_held_bytes
        ):
            self._forget(next(iter(self._held)))

    def _forget(self, msg_id: int) -> None:
        """Drop a held message the client never acknowledged (not an ack, not a
        renumbering): an answer's request is marked so that asking again gets an error."""
        out = self._held.get(msg_id)
        if out is None:
            return
        self._unhold(msg_id)
        if out.req_msg_id is not None:
            self._seen.set_flags(out.req_msg_id, FLAG_ANSWER_LOST)

    def _unhold(self, msg_id: int) -> None:
        out = self._held.pop(msg_id, None)
        if out is None:
            return
        self._held_bytes -= len(out.body)
        if out.req_msg_id is not None and self._held_answers.get(out.req_msg_id) == msg_id:
            del self._held_answers[out.req_msg_id]
        if self.on_held_change is not None:
            self.on_held_change(-len(out.body) - HELD_OVERHEAD)
