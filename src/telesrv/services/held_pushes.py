"""Pushing a committed send from the process that committed it.

The send's outbox rows are written held (due only after the outbox lease), and the
process pushes both sides' updates at once from what it has in hand: no claim by an
outbox worker, no reading the events and boxes back. Rows whose push fails stay held
and a worker delivers them when the lease ends, as it would a crashed worker's batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from telesrv.services.update_log import EventType
from telesrv.store.messages import BoxMessage, SendResult
from telesrv.store.update_log import UpdateEvent

if TYPE_CHECKING:
    from telesrv.services.messages import OutgoingText
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
    held: HeldPushes, msg: OutgoingText, origin: Origin, result: SendResult
) -> None:
    """Push a committed send's events, built as the outbox would read them back."""
    events: list[tuple[UpdateEvent, tuple[int, int] | None]] = []
    boxes: list[BoxMessage] = []
    sides = [(msg.sender, msg.recipient, result.sender_box, result.sender_pts, True)]
    if result.recipient_pts is not None and result.recipient_box is not None:
        sides.append((msg.recipient, msg.sender, result.recipient_box, result.recipient_pts, False))
    for owner, peer, box_id, pts, out in sides:
        assert pts is not None
        event = UpdateEvent(
            user_id=owner,
            pts=pts,
            pts_count=1,
            event_type=EventType.NEW_MESSAGE.value,
            date=result.date,
            peer_user_id=peer,
            max_id=None,
            box_ids=[box_id],
            payload=None,
        )
        events.append((event, (origin.auth_key_id, origin.session_id) if out else None))
        boxes.append(
            BoxMessage(
                owner_user_id=owner,
                box_id=box_id,
                peer_user_id=peer,
                sender_user_id=msg.sender,
                out=out,
                date=result.date,
                message=msg.text,
                entities=msg.entities,
                fwd_from=msg.fwd_from,
                reply_to_msg_id=None,
                quote_text=msg.quote_text,
                quote_entities=msg.quote_entities,
                quote_offset=msg.quote_offset,
                silent=msg.silent,
                noforwards=msg.noforwards,
                # As the send function stores it: only the recipient's copy unopened.
                media_unread=not out and msg.media is not None and msg.media.content_unread,
                edit_date=None,
                media=msg.media.snapshot if msg.media else None,
                grouped_id=msg.grouped_id,
            )
        )
    await held.push_held(events, boxes)
