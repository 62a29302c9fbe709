"""Pinned messages of private chats: updatePinnedMessage and unpinAllMessages.

Each side of a chat has its own pins. A pin is made on both sides unless asked for
one side only (pm_oneside), and never on the side of a peer who blocked its maker.
Every side that changes gets one pinned_messages event in its pts log (updatePinned
Messages carries a pts), so online devices get it pushed and offline ones through
getDifference. A call that changes nothing takes no pts. The pts are taken before the
write from what it is expected to change; should a concurrent call change it first,
the write turns the unused pts into noops, so the log stays dense.

Pinning makes no messageActionPinMessage service message: the one send pipeline
(services/sends.py) sends texts, media and forwarded copies only, and a service
message would need a kind of its own there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from telesrv.services.errors import MessageIdInvalid
from telesrv.services.ids import INT32_MAX
from telesrv.services.origin import Origin
from telesrv.services.sends import check_send_rate
from telesrv.store import pins as pins_store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db
from telesrv.store.log_payloads import MessagesPinned
from telesrv.store.log_writes import LogWrites, PtsDelivery
from telesrv.store.rate_limits import RateLimits

# Messages unpinned per unpinAllMessages call; the client repeats while offset > 0.
UNPIN_ALL_BATCH = 100


@dataclass(frozen=True, slots=True)
class PinOutcome:
    """The caller's side of a change: its event's pts and the boxes it names."""

    pts: int
    box_ids: list[int]  # newest first


@dataclass(frozen=True, slots=True)
class UnpinnedAll:
    outcome: PinOutcome | None  # None: nothing was left to unpin on the caller's side
    more: bool  # another call is needed (affectedHistory.offset > 0)


# (owner, the chat in that owner's view, the owner's box ids to change)
_Side = tuple[int, int, list[int]]


class Pins:
    def __init__(
        self,
        db: Db,
        counters: Counters,
        rate_limits: RateLimits,
        *,
        send_rate_limit: int = 0,
        on_commit: Callable[[], None] = lambda: None,
        delivery: PtsDelivery | None = None,
    ) -> None:
        self._db = db
        self._rate_limits = rate_limits
        self._log = LogWrites(db, counters, delivery)
        # A pin that changes anything writes to the peer's log and wakes their devices,
        # as a message does: it counts against the send rate (0: no limit).
        self._send_rate_limit = send_rate_limit
        self._on_commit = on_commit  # wakes the outbox delivery

    async def update_pinned(
        self,
        owner: int,
        peer: int,
        box_id: int,
        *,
        pinned: bool,
        one_side: bool,
        origin: Origin,
        now: int,
    ) -> PinOutcome | None:
        """Pin (or unpin) the owner's message ``box_id`` of the chat with ``peer``, on
        the peer's side too unless ``one_side``. None when the caller's side did not
        change (it was so already; the peer's side may still have changed)."""
        if not 0 < box_id <= INT32_MAX:
            raise MessageIdInvalid()
        target = await pins_store.pin_target(
            self._db.pool, owner, peer, box_id, distributed=self._db.distributed
        )
        if target is None:
            raise MessageIdInvalid()
        sides: list[_Side] = []
        if target.pinned != pinned:
            sides.append((owner, peer, [box_id]))
        if not one_side and target.peer_box_id is not None and target.peer_pinned != pinned:
            sides.append((peer, owner, [target.peer_box_id]))
        return await self._write(owner, sides, pinned, origin, now)

    async def unpin_all(self, owner: int, peer: int, origin: Origin, now: int) -> UnpinnedAll:
        """Unpin the newest UNPIN_ALL_BATCH pinned messages of the chat, on both sides."""
        page = await pins_store.pinned_box_ids(self._db.pool, owner, peer, UNPIN_ALL_BATCH)
        if not page.box_ids:
            return UnpinnedAll(None, False)
        theirs = await pins_store.peer_copies(
            self._db.pool, owner, peer, page.box_ids, distributed=self._db.distributed
        )
        sides: list[_Side] = [(owner, peer, page.box_ids)]
        if theirs:
            sides.append((peer, owner, theirs))
        return UnpinnedAll(await self._write(owner, sides, False, origin, now), page.more)

    async def latest(self, owner: int, peer: int) -> int | None:
        """The chat's newest pinned message on the owner's side (users.getFullUser)."""
        return await pins_store.latest_pinned(self._db.pool, owner, peer)

    async def _write(
        self, pinner: int, sides: list[_Side], pinned: bool, origin: Origin, now: int
    ) -> PinOutcome | None:
        if not sides:
            return None  # nothing changes: no pts is taken
        await check_send_rate(self._rate_limits, pinner, self._send_rate_limit, 1)

        async def txn(
            conn: asyncpg.Connection, allocations: list[Allocation]
        ) -> list[tuple[int, list[int]]]:
            changes = [
                pins_store.PinChange(owner, chat, ids, allocation.first_pts)
                for (owner, chat, ids), allocation in zip(sides, allocations, strict=True)
            ]
            return await pins_store.set_pinned_txn(
                conn,
                pinner,
                changes,
                pinned,
                MessagesPinned(pinned).to_json(),
                now,
                origin.auth_key_id,
                origin.session_id,
            )

        done, allocations = await self._log.write(
            "update_pinned_messages", [(owner, 1, 0) for owner, _, _ in sides], txn, now=now
        )
        self._on_commit()
        mine = dict(done).get(pinner)
        if mine is None:
            return None  # a concurrent call did it first: the pts became a noop
        [allocation] = [a for a in allocations if a.user_id == pinner]
        return PinOutcome(allocation.first_pts, mine)
