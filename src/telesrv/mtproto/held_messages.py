"""Messages a session sent and keeps until the client acknowledges them.

RPC answers and updates stay here so that ``msg_resend_req``, ``msg_resend_ans_req`` or a
reconnect can send them again. Both a count and a byte budget bound them per session
(oldest forgotten first), and ``on_held_change`` tells the owner every change in
held bytes so that it can bound what all sessions hold together.
"""

from __future__ import annotations

from collections.abc import Callable

# What one held message costs beyond its body (the OutMessage, dict slots), for budgets.
HELD_OVERHEAD = 160


class OutMessage:
    """An outgoing message; msg_id and seq_no are set when it is first flushed."""

    __slots__ = ("body", "content", "response", "req_msg_id", "hold", "msg_id", "seq_no", "dropped")

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


class HeldMessages:
    """The held store of :class:`~telesrv.mtproto.session.ServerSession`, which sets
    these attributes in its ``__init__``."""

    _held: dict[int, OutMessage]  # msg_id -> sent, unacknowledged; oldest first
    _held_bytes: int
    _held_answers: dict[int, int]  # req_msg_id -> msg_id of its held answer
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
            self._unhold(next(iter(self._held)))

    def drop_held(self) -> None:
        """Forget every held message."""
        while self._held:
            self._unhold(next(iter(self._held)))

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
            self._unhold(next(iter(self._held)))

    def _unhold(self, msg_id: int) -> None:
        out = self._held.pop(msg_id, None)
        if out is None:
            return
        self._held_bytes -= len(out.body)
        if out.req_msg_id is not None and self._held_answers.get(out.req_msg_id) == msg_id:
            del self._held_answers[out.req_msg_id]
        if self.on_held_change is not None:
            self.on_held_change(-len(out.body) - HELD_OVERHEAD)
