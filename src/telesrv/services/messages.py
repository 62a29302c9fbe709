"""Private text messages: MessageService, the send of a text and of an album (the
pipeline they go through is SendPipeline in sends.py; history and read receipts are
History in history.py and ReadReceipts in read_receipts.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from telesrv.services.errors import (
    FloodWait,
    MediaCaptionTooLong,
    MessageEmpty,
    MessageTooLong,
    RandomIdDuplicate,
)
from telesrv.services.message_media import MAX_CAPTION_LENGTH
from telesrv.services.metrics import RATE_LIMITED
from telesrv.services.origin import Origin as Origin
from telesrv.services.sends import BoxMessage as BoxMessage
from telesrv.services.sends import OutgoingText as OutgoingText
from telesrv.services.sends import SendBatch, SendKind, SendPipeline
from telesrv.services.sends import Sent as Sent
from telesrv.store import contacts as contacts_store
from telesrv.store import messages as messages_store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db

log = logging.getLogger(__name__)

MAX_TEXT_LENGTH = 4096  # code points, Telegram's limit
# How long a send's (sender, random_id) claim lives (milliseconds). It is kept after
# success, so within this window a retry is told apart from a fresh send by Redis alone;
# past it, a retry costs the recipient one noop.
SEND_CLAIM_MS = 600_000
# How long a retry waits for an attempt of the same send still in flight (milliseconds)
# before going ahead anyway (the send function settles it).
SEND_CLAIM_WAIT_MS = 30_000
MAX_QUOTE_LENGTH = 1024


class MessageService:
    """A text and an album as inputs of the send pipeline: what is checked of them, and
    how a retry of each is told apart from a fresh send."""

    def __init__(self, db: Db, counters: Counters, sends: SendPipeline) -> None:
        self._db = db
        self._counters = counters
        self._sends = sends

    @staticmethod
    def check_text(text: str, *, caption: bool = False) -> None:
        """A text message needs text (MESSAGE_EMPTY) within MAX_TEXT_LENGTH; a media
        caption may be empty, and is at most MAX_CAPTION_LENGTH."""
        if caption:
            if len(text) > MAX_CAPTION_LENGTH:
                raise MediaCaptionTooLong()
            return
        if not text.strip():
            raise MessageEmpty()
        if len(text) > MAX_TEXT_LENGTH:
            raise MessageTooLong()

    async def send_text(self, msg: OutgoingText, origin: Origin, now: int) -> Sent:
        self.check_text(msg.text, caption=msg.media is not None)
        # The (sender, random_id) claim is taken with the rate check, in one Redis round
        # trip. Taking it means no other attempt of this send began within
        # SEND_CLAIM_MS, so a fresh send goes straight to allocation without looking
        # for an earlier one. Only when the claim is held (a retry) is the earlier send
        # looked for: a retry is answered before any pts is taken, since a pts
        # allocated for it would have to become a noop in the recipient's log, and
        # every retry would move the recipient's pts (and wake their devices) for
        # nothing. A retry of a send that committed is found in the table; one racing
        # a send still in flight (a client re-sending after a reconnect) waits for it.
        # A Redis that restarted or was flushed has lost the claims of sends that
        # committed before; until it has kept the sender's claims for a whole
        # SEND_CLAIM_MS, a free claim is no proof, and the table is looked at first.
        # A retry arriving after its claim expired takes a new claim; the send
        # function's own duplicate check still answers it with the original message,
        # at the cost of one noop that keeps the log dense.
        # On one Redis server, a send without a reply takes its pts in the claim's own
        # script, when the claim is taken whole (nothing else is checked before the
        # allocation then): one round trip instead of two.
        guarded: list[Allocation | None] | None = None
        if msg.reply_to is None and self._counters.claims_allocate:
            claim, guarded = await self._counters.claim_and_allocate(
                msg.sender, msg.recipient, self._sends.send_rate_limit, msg.random_id,
                SEND_CLAIM_MS, 1,
            )  # fmt: skip
        else:
            claim = await self._counters.take_send_claim(
                msg.sender, self._sends.send_rate_limit, msg.random_id, SEND_CLAIM_MS
            )
        if claim.wait:
            RATE_LIMITED.inc()
            raise FloodWait(claim.wait)
        claimed = claim.claimed
        if claimed and not claim.whole:
            try:
                earlier = await self.earlier_send(msg.sender, msg.random_id)
            except BaseException:
                await self._release_claim(msg)  # a retry may go ahead
                raise
            if earlier is not None:
                return earlier  # the claim stays: it marks later attempts as retries
        while not claimed:
            earlier = await self.earlier_send(msg.sender, msg.random_id)
            if earlier is not None:
                return earlier
            if not await self._wait_for_claim(msg.sender, msg.random_id):
                break  # held too long: go on, the send function settles it
            claimed = await self._counters.claim_send(msg.sender, msg.random_id, SEND_CLAIM_MS)
        try:
            sent = await self._sends.send(
                SendBatch(SendKind.TEXT, [msg]), origin, now, rate_checked=True, guarded=guarded
            )
        except BaseException:
            # Failed: a waiting retry may go ahead. (After success the claim stays until
            # it expires, marking later attempts as retries.)
            if claimed:
                await self._release_claim(msg)
            raise
        if not sent:  # a duplicate the sender has deleted since: the id is spent
            raise RandomIdDuplicate()
        return sent[0][1]

    async def _release_claim(self, msg: OutgoingText) -> None:
        with contextlib.suppress(Exception):
            await self._counters.release_send(msg.sender, msg.random_id)

    async def _wait_for_claim(self, sender: int, random_id: int) -> bool:
        """Wait while another attempt of this send is in flight, until it commits or
        gives up its claim; False when it is still held after SEND_CLAIM_WAIT_MS."""
        delay = 0.005
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SEND_CLAIM_WAIT_MS / 1000
        while loop.time() < deadline:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)
            if await messages_store.find_send(self._db.pool, sender, random_id) is not None:
                return True
            if not await self._counters.send_claimed(sender, random_id):
                return True
        return False

    async def send_album(
        self, album: Sequence[OutgoingText], origin: Origin, now: int
    ) -> list[tuple[int, Sent]]:
        """The messages of an album (one chat, each its own random_id), in order, sent
        all or none: a refusal of any item (its rate, its media gone, its reply) leaves
        nothing sent, and the pts taken for them become noops. Returns (random_id, sent)
        per message. A retry of a sent album is answered with its messages before
        anything is counted or allocated; random ids of which only some were sent
        before are RANDOM_ID_DUPLICATE."""
        for msg in album:
            self.check_text(msg.text, caption=msg.media is not None)
        sender = album[0].sender
        random_ids = [m.random_id for m in album]
        earlier = await messages_store.find_sends(self._db.pool, sender, random_ids)
        if earlier:
            if len(earlier) < len(album):
                raise RandomIdDuplicate()
            found = await self._sends.earlier(sender, [(r, earlier[r]) for r in random_ids])
            if not found:  # every message of it deleted since
                raise RandomIdDuplicate()
            return [(r, found[r]) for r in random_ids if r in found]
        sent = await self._sends.send(SendBatch(SendKind.ALBUM, album), origin, now)
        if not sent:
            raise RandomIdDuplicate()
        return sent

    async def earlier_send(self, sender: int, random_id: int) -> Sent | None:
        """The answer to a retry of a committed send, or None for a new random id: a
        send whose media is an upload looks first, since its upload was used up by the
        send it retries. A retry of a message the sender has deleted since is
        RANDOM_ID_DUPLICATE (the id is spent; the message cannot come back)."""
        earlier = await messages_store.find_send(self._db.pool, sender, random_id)
        if earlier is None:
            return None
        found = await self._sends.earlier(sender, [(random_id, earlier)])
        if not found:
            raise RandomIdDuplicate()
        return found[random_id]

    async def may_notify(self, sender: int, recipient: int) -> bool:
        """Whether ephemeral signals (typing) from sender may reach recipient: not across
        a block, whoever made it."""
        if sender == recipient:
            return False
        pool = self._db.pool
        return not (
            await contacts_store.is_blocked(pool, recipient, sender)
            or await contacts_store.is_blocked(pool, sender, recipient)
        )
