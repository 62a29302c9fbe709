"""Pushing committed writes from the process that committed them.

A write's outbox rows of pts events are written held (due only after the outbox
lease), and the process pushes the updates itself: a lone send from what it has in
hand (``push_sent``: no claim by an outbox worker, no reading the events and boxes
back), any other write from its events read back after its commit
(``HeldPushes.push_written``). Rows whose push fails stay held and a worker delivers
them when the lease ends, as it would a crashed worker's batch.

The pts of such a write are announced before its transaction (``expecting``): writes
for one user commit in any order, and a push of a later pts waits (briefly) for the
earlier one still in its transaction or on its way, so that the user's devices get
them in pts order.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from telesrv.services.update_log import EventType, PtsRange, pts_range
from telesrv.store.counters import Allocation
from telesrv.store.messages import BoxMessage, SendResult
from telesrv.store.update_log import UpdateEvent

if TYPE_CHECKING:
    from telesrv.services.origin import Origin


class HeldPushes(Protocol):
    """Pushing what a write committed from the process that committed it (the outbox
    delivery's): its outbox rows are written held for ``lease`` seconds, then pushed
    here at once, with no claim: from what a lone send has in hand (``push_held``), or
    read back (``push_written``, which settles the pts once they are out)."""

    lease: float

    @property
    def pushes_held(self) -> bool: ...

    async def push_held(
        self,
        events: Sequence[tuple[UpdateEvent, tuple[int, int] | None]],
        boxes: Sequence[BoxMessage],
    ) -> None: ...

    async def push_written(self, ranges: Sequence[PtsRange]) -> None: ...

    def expect_pts(self, ranges: Sequence[PtsRange]) -> None: ...

    def settle_pts(self, ranges: Sequence[PtsRange]) -> None: ...


def expecting(held: HeldPushes | None, allocations: Sequence[Allocation]) -> Expecting:
    """Around a send whose events this process pushes itself: its pts are announced
    before the transaction and settled once the send is over, whatever became of it
    (what it did not push is then not waited for)."""
    ranges = [pts_range(a) for a in allocations if a.last_pts] if held is not None else []
    return Expecting(held, ranges)


class Expecting:
    """``expecting``'s context. A class rather than a generator: every send enters one,
    and a generator's context costs several times as much to enter."""

    __slots__ = ("_held", "_ranges")

    def __init__(self, held: HeldPushes | None, ranges: list[PtsRange]) -> None:
        self._held = held
        self._ranges = ranges

    async def push_written(self) -> None:
        """The send committed rows it does not push from what it has in hand: they are
        read back and pushed (``HeldPushes.push_written``), which settles the pts once
        they are out, whatever becomes of the request."""
        held, ranges, self._ranges = self._held, self._ranges, []
        if held is not None and ranges:
            await held.push_written(ranges)

    def __enter__(self) -> Expecting:
        if self._held is not None:
            self._held.expect_pts(self._ranges)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._held is not None and self._ranges:  # (none once handed over)
            self._held.settle_pts(self._ranges)


async def push_sent(
    held: HeldPushes, sent: BoxMessage, origin: Origin, result: SendResult, *, content_unread: bool
) -> None:
    """Push a committed send's events, built as the outbox would read them back: ``sent``
    is the sender's copy; the recipient's is the same message in their ids, unopened
    when ``content_unread`` (a voice note, a round video)."""
    assert result.sender_pts is not None
    events: list[tuple[UpdateEvent, tuple[int, int] | None]] = [
        (_new_message(sent, result.sender_pts), (origin.auth_key_id, origin.session_id))
    ]
    boxes = [sent]
    if result.recipient_pts is not None and result.recipient_box is not None:
        received = received_copy(sent, result.recipient_box, content_unread=content_unread)
        events.append((_new_message(received, result.recipient_pts), None))
        boxes.append(received)
    await held.push_held(events, boxes)


def received_copy(sent: BoxMessage, box_id: int, *, content_unread: bool) -> BoxMessage:
    """The recipient's copy of ``sent``: the same message as box ``box_id`` of the peer.
    Made field by field, as ``dataclasses.replace`` takes about 1.6 times as long (it
    looks up the class's fields on every call, once per send here); a test holds the
    copy to what ``replace`` makes."""
    return BoxMessage(
        owner_user_id=sent.peer_user_id,
        box_id=box_id,
        peer_user_id=sent.owner_user_id,
        sender_user_id=sent.sender_user_id,
        out=False,
        date=sent.date,
        message=sent.message,
        entities=sent.entities,
        fwd_from=sent.fwd_from,
        reply_to_msg_id=sent.reply_to_msg_id,
        quote_text=sent.quote_text,
        quote_entities=sent.quote_entities,
        quote_offset=sent.quote_offset,
        silent=sent.silent,
        noforwards=sent.noforwards,
        media_unread=content_unread,
        edit_date=sent.edit_date,
        media=sent.media,
        grouped_id=sent.grouped_id,
        reactions=sent.reactions,
        reaction_unread=sent.reaction_unread,
        pinned=sent.pinned,
    )


def _new_message(box: BoxMessage, pts: int) -> UpdateEvent:
    return UpdateEvent(
        user_id=box.owner_user_id,
        pts=pts,
        pts_count=1,
        event_type=EventType.NEW_MESSAGE.value,
        date=box.date,
        peer_user_id=box.peer_user_id,
        max_id=None,
        box_ids=[box.box_id],
        payload=None,
    )
