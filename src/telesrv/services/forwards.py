"""Forwards: the copies of a forward are an input of the send pipeline."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from telesrv.services.errors import (
    ChatForwardsRestricted,
    LimitInvalid,
    MessageIdInvalid,
    MessageIdsEmpty,
    RandomIdDuplicate,
    RandomIdInvalid,
    YouBlockedUser,
)
from telesrv.services.ids import valid_ids
from telesrv.services.message_media import media_of
from telesrv.services.origin import Origin
from telesrv.services.sends import OutgoingText, SendBatch, SendKind, SendPipeline, Sent
from telesrv.store import contacts as contacts_store
from telesrv.store import forwards as forwards_store
from telesrv.store import messages as messages_store
from telesrv.store.db import Db

MAX_FORWARD_IDS = 100  # per forwardMessages call, as Telegram allows


# (original author, original date) -> a serialized MessageFwdHeader; built by the RPC
# layer, which owns TL.
FwdHeaderBuilder = Callable[[int, int], bytes]


@dataclass(frozen=True, slots=True)
class ForwardRequest:
    owner: int
    from_peer: int
    to_peer: int
    ids: list[int]  # in the owner's ids, in the order the copies are sent
    random_ids: list[int]
    drop_author: bool = False
    drop_media_captions: bool = False  # a copy of a media message goes without its caption
    silent: bool = False
    noforwards: bool = False


class Forwards:
    """Forwards: each copy is a send, idempotent on its random_id."""

    def __init__(self, db: Db, sends: SendPipeline) -> None:
        self._db = db
        self._sends = sends

    async def forward(
        self, req: ForwardRequest, header_for: FwdHeaderBuilder, origin: Origin, now: int
    ) -> list[tuple[int, Sent]]:
        """Copy the owner's messages from one chat to another, in the given order; each
        copy is a send (pts_count 1 per side), idempotent on its random_id. Returns
        (random_id, copy) per copy, in source order."""
        if len(req.ids) != len(req.random_ids):
            raise RandomIdInvalid()
        if not req.ids:
            raise MessageIdsEmpty()
        if len(req.ids) > MAX_FORWARD_IDS:
            raise LimitInvalid()
        if len(set(req.random_ids)) != len(req.random_ids):
            raise RandomIdDuplicate()
        if len(set(req.ids)) != len(req.ids):
            # One message forwarded n times in one call would be n copies for one
            # request; Telegram's clients never repeat an id, so it is refused.
            raise MessageIdInvalid()
        pool = self._db.pool
        sources = {
            m.box_id: m
            for m in await forwards_store.get_chat_boxes(
                pool,
                req.owner,
                req.from_peer,
                valid_ids(req.ids),
                distributed=self._db.distributed,
            )
        }
        pairs = [
            (sources[i], r) for i, r in zip(req.ids, req.random_ids, strict=True) if i in sources
        ]
        if not pairs:
            raise MessageIdInvalid()
        if any(source.noforwards for source, _ in pairs):
            raise ChatForwardsRestricted()
        if req.to_peer != req.owner and await contacts_store.is_blocked(
            pool, req.owner, req.to_peer
        ):
            raise YouBlockedUser()
        # A retried copy is answered from what was stored before any pts is taken: a pts
        # allocated for it would only become a noop in both logs, waking the recipient's
        # devices for nothing. (A retry racing its original still in flight is caught by
        # the send function, at the cost of that noop.)
        earlier = await messages_store.find_sends(pool, req.owner, [r for _, r in pairs])
        answers = await self._sends.earlier(req.owner, list(earlier.items()))
        fresh = [(source, r) for source, r in pairs if r not in earlier]
        if fresh:
            # A copy with no media of its own keeps the source's place in the link
            # filter: a text with a link stays one when forwarded.
            linked = await forwards_store.boxes_with_links(
                pool, req.owner, [source.box_id for source, _ in fresh]
            )
            copies = _copies(req, fresh, linked, header_for)
            batch = SendBatch(SendKind.FORWARD, copies)
            answers.update(await self._sends.send(batch, origin, now))
        return [(r, answers[r]) for _, r in pairs if r in answers]


def _copies(
    req: ForwardRequest,
    pairs: list[tuple[messages_store.BoxMessage, int]],
    linked: set[int],
    header_for: FwdHeaderBuilder,
) -> list[OutgoingText]:
    """The messages a forward sends: each source's text, entities and media, under a
    header naming its first author (none when the author is dropped)."""
    copies = []
    # Copies of one album form a new album (one new grouped_id per source album).
    albums: dict[int, int] = {}
    for source, random_id in pairs:
        grouped_id = None
        if source.grouped_id is not None:
            grouped_id = albums.setdefault(source.grouped_id, secrets.randbits(63) or 1)
        header = None
        if not req.drop_author:
            # An existing header is kept: the copy names the first author.
            header = source.fwd_from or header_for(source.sender_user_id, source.date)
        text, entities = source.message, source.entities
        if req.drop_media_captions and source.media is not None:
            text, entities = "", None
        copies.append(
            OutgoingText(
                sender=req.owner,
                recipient=req.to_peer,
                random_id=random_id,
                text=text,
                entities=entities,
                silent=req.silent,
                noforwards=req.noforwards,
                fwd_from=header,
                media=media_of(source.media),
                grouped_id=grouped_id,
                has_link=source.box_id in linked,
            )
        )
    return copies
