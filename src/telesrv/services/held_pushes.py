"""Pushing a committed send from the process that committed it.

The send's outbox rows are written held (due only after the outbox lease), and the
process pushes both sides' updates at once from what it has in hand: no claim by an
outbox worker, no reading the events and boxes back. Rows whose push fails stay held
and a worker delivers them when the lease ends, as it would a crashed worker's batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from telesrv.services.update_log import EventType
from telesrv.store.messages import BoxMessage, SendResult
from telesrv.store.update_log import UpdateEvent

if TYPE_CHECKING:
    from telesrv.services.origin import Origin


class HeldPushes(Protocol):
    """Pushing what a send committed from the process that committed it (the outbox
    dispatcher): its outbox rows are written held for ``lease`` seconds, then pushed
    here at once, with no claim and no reading back."""

    lease: float

    @property
    def pushes_held(self) -> bool: ...

    async def push_held(
        self,
        events: Sequence[tuple[UpdateEvent, tuple[int, int] | None]],
        boxes: Sequence[BoxMessage],
    ) -> None: ...


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
        received = replace(
            sent,
            owner_user_id=sent.peer_user_id,
            box_id=result.recipient_box,
            peer_user_id=sent.owner_user_id,
            out=False,
            media_unread=content_unread,
        )
        events.append((_new_message(received, result.recipient_pts), None))
        boxes.append(received)
    await held.push_held(events, boxes)


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
