"""Per-user pts and box id counters in Redis, recovered from PostgreSQL; a send's claim.

Redis holds only what can be rebuilt. `counter:pts:{uid}` and `counter:box_id:{uid}` hold
the last value handed out; the `{uid}` hash tag keeps one user's keys in one Cluster slot,
so one script call can touch both. When a key is missing (a fresh account, a flushed or
restarted Redis, an evicted key) the allocation script refuses to guess; the caller reads
the highest committed value from PostgreSQL and calls the script again with it as a
floor, and the script raises the counter to the floor (never lowers it) and increments
in one atomic step. So coroutines racing on first use get disjoint ranges above what is
committed.

What this cannot prevent: values handed out but not yet committed when Redis loses the
key are handed out again (the primary keys in PostgreSQL reject the second commit).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, RedisError, ResponseError

from telesrv.store import update_log as update_log_store
from telesrv.store.counter_scripts import (
    ALLOCATE_LUA,
    CLAIM_AND_ALLOCATE_LUA,
    GUARD_ABSENT,
    MISSING_BOX,
    MISSING_PTS,
    NO_FLOOR,
    RATE_AND_CLAIM_LUA,
)
from telesrv.store.db import Db, Executor
from telesrv.store.frozen_slots import quick_init
from telesrv.store.metrics import PTS_FILL_FAILURES
from telesrv.store.rate_limits import SEND_RATE_WINDOW_MS, send_rate_key
from telesrv.store.redis_batch import CommandBatcher
from telesrv.store.redis_client import RedisClient, ServerRedis
from telesrv.store.rows import from_row

log = logging.getLogger(__name__)

COUNTER_RECOVERIES = Counter(
    "telesrv_counter_recoveries_total",
    "Counters rebuilt in Redis from PostgreSQL after a miss.",
    ["counter"],
)
SCRIPT_RELOADS = Counter(
    "telesrv_redis_script_reloads_total",
    "Lua scripts loaded again after Redis answered NOSCRIPT.",
)

# Rounds of "script says missing -> read PostgreSQL -> script with floors". A second
# round only happens when the key vanishes again in between; more means Redis is
# dropping keys as fast as we write them.
MAX_RECOVERY_ROUNDS = 5
MAX_SCRIPT_LOADS = 3

NO_BLOCKS_TTL = 60  # seconds a "has no blocks" mark is trusted


def pts_key(user_id: int) -> str:
    return f"counter:pts:{{{user_id}}}"


def box_id_key(user_id: int) -> str:
    return f"counter:box_id:{{{user_id}}}"


def send_claim_key(user_id: int, random_id: int) -> str:
    """Present while a send of (user, random_id) is in flight (or just committed)."""
    return f"send:inflight:{{{user_id}}}:{random_id}"


def send_claims_since_key(user_id: int) -> str:
    """When this Redis began keeping the user's send claims (ms, Redis's clock)."""
    return f"send:claims_since:{{{user_id}}}"


def no_blocks_key(user_id: int) -> str:
    """Present while the user is known to block nobody (a cache of contact_blocks)."""
    return f"blocks:none:{{{user_id}}}"


def blocks_changed_key(user_id: int) -> str:
    """Present for a mark's lifetime after the user's blocks changed: no mark is set
    meanwhile (a send may have read contact_blocks from before the change)."""
    return f"blocks:changed:{{{user_id}}}"


async def max_committed_pts(executor: Executor, user_id: int) -> int:
    """The highest pts in the user's durable update log (0 for a new account)."""
    value: int = await executor.fetchval(
        "SELECT COALESCE(MAX(pts), 0) FROM user_update_events WHERE user_id = $1", user_id
    )
    return value


async def max_box_id(executor: Executor, user_id: int) -> int:
    """The highest box id the user owns (0 when none)."""
    value: int = await executor.fetchval(
        "SELECT COALESCE(MAX(box_id), 0) FROM message_boxes WHERE owner_user_id = $1", user_id
    )
    return value


@dataclass(frozen=True, slots=True)
class UnguardedFacts:
    """What an allocation without a user's no-blocks mark needs from PostgreSQL: whether
    the user blocks anyone, whether they block ``other``, and the floors of their
    counters (used even when Redis still has them: a floor never lowers a counter)."""

    user_id: int
    has_blocks: bool
    blocks_other: bool
    max_pts: int
    max_box: int


async def unguarded_facts(
    executor: Executor, user_id: int, other: int, *, of_other: bool
) -> dict[int, UnguardedFacts]:
    """``UnguardedFacts`` of ``user_id`` towards ``other``, and with ``of_other`` those of
    ``other`` towards ``user_id`` too, by user, in one round trip: the two sides of a
    send whose marks ran out are read together, not a query per fact and side.

    Each table is filtered by a parameter, not by a joined list of users: the plan then
    touches the one partition of each user, where a list would make every new
    connection open and plan all partitions of both logs first (tens of milliseconds)."""
    rows = await executor.fetch(
        """
        SELECT $1::bigint AS user_id,
               EXISTS (SELECT 1 FROM contact_blocks WHERE owner_user_id = $1) AS has_blocks,
               EXISTS (SELECT 1 FROM contact_blocks
                        WHERE owner_user_id = $1 AND blocked_user_id = $2) AS blocks_other,
               (SELECT COALESCE(MAX(pts), 0) FROM user_update_events
                 WHERE user_id = $1) AS max_pts,
               (SELECT COALESCE(MAX(box_id), 0) FROM message_boxes
                 WHERE owner_user_id = $1) AS max_box
        UNION ALL
        SELECT $2::bigint,
               EXISTS (SELECT 1 FROM contact_blocks WHERE owner_user_id = $2),
               EXISTS (SELECT 1 FROM contact_blocks
                        WHERE owner_user_id = $2 AND blocked_user_id = $1),
               (SELECT COALESCE(MAX(pts), 0) FROM user_update_events WHERE user_id = $2),
               (SELECT COALESCE(MAX(box_id), 0) FROM message_boxes WHERE owner_user_id = $2)
         WHERE $3::boolean
        """,
        user_id,
        other,
        of_other,
    )
    return {row["user_id"]: from_row(UnguardedFacts, row) for row in rows}


def _raise_first_error(replies: Sequence[Any]) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply


def _raised(reply: Any) -> Any:
    """A batched command's reply, or its error reply raised."""
    if isinstance(reply, RedisError):
        raise reply
    return reply


def _side_allocated(reply: Sequence[Any]) -> tuple[int, int, int] | RedisError:
    """One side's {missing mask, last pts, last box id} of the claim and allocation
    script, or the error of a side whose allocation failed or was not tried after
    another's failed ({-1, the error, 0})."""
    if int(reply[0]) < 0:
        error = reply[1].decode(errors="replace") if isinstance(reply[1], bytes) else reply[1]
        return ResponseError(str(error))
    return int(reply[0]), int(reply[1]), int(reply[2])


def _send_claim(reply: Sequence[Any]) -> SendClaim:
    """The claim of a script's reply that begins with {wait ms, claimed, whole}."""
    wait_ms, claimed, whole = int(reply[0]), bool(int(reply[1])), bool(int(reply[2]))
    if wait_ms > 0:
        return SendClaim(max(1, math.ceil(wait_ms / 1000)), False, whole)
    return SendClaim(0, claimed, whole)


class CounterRecoveryError(RuntimeError):
    """Redis kept losing a counter while it was being rebuilt."""


@quick_init
@dataclass(frozen=True, slots=True)
class SendClaim:
    """A send's rate check and claim: ``wait`` seconds (0: accepted), whether the claim
    was free and taken, and whether Redis has kept the sender's claims for a whole
    claim lifetime (only then does a free claim prove that no attempt came before)."""

    wait: int
    claimed: bool
    whole: bool


@quick_init
@dataclass(frozen=True, slots=True)
class Allocation:
    """Consecutive ranges first..last; both 0 for a counter that was not asked for."""

    user_id: int
    first_pts: int
    last_pts: int
    first_box: int
    last_box: int


@quick_init
@dataclass(frozen=True, slots=True)
class _Call:
    """One script call: a request plus the floors read from PostgreSQL, if any."""

    index: int
    user_id: int
    n_pts: int
    n_box: int
    pts_floor: int = NO_FLOOR
    box_floor: int = NO_FLOOR
    guarded: bool = False
    mark: bool = False  # set the user's no-blocks mark (unless its blocks just changed)

    def allocation(self, last_pts: int, last_box: int) -> Allocation:
        """The ranges this call took, from the counters' values after it."""
        return Allocation(
            self.user_id,
            last_pts - self.n_pts + 1 if self.n_pts else 0,
            last_pts if self.n_pts else 0,
            last_box - self.n_box + 1 if self.n_box else 0,
            last_box if self.n_box else 0,
        )


class Counters:
    def __init__(self, redis: RedisClient, db: Db, batch: CommandBatcher | None = None) -> None:
        self._redis = redis
        self._db = db
        # The send path's commands: concurrent sends share round trips (and with
        # whatever else is given the same batcher: the cluster's holder lookups).
        self._batch = batch if batch is not None else CommandBatcher(redis)
        self._allocate_script: AsyncScript = redis.register_script(ALLOCATE_LUA)
        self._rate_claim_script: AsyncScript = redis.register_script(RATE_AND_CLAIM_LUA)
        self._claim_allocate_script: AsyncScript = redis.register_script(CLAIM_AND_ALLOCATE_LUA)

    async def load_scripts(self) -> None:
        """Load the scripts now (at startup) rather than on the first NOSCRIPT."""
        self._allocate_script.sha = await self._redis.script_load(self._allocate_script.script)
        self._rate_claim_script.sha = await self._redis.script_load(self._rate_claim_script.script)
        self._claim_allocate_script.sha = await self._redis.script_load(
            self._claim_allocate_script.script
        )

    async def allocate(self, requests: Sequence[tuple[int, int, int]]) -> list[Allocation]:
        """Allocate `(user_id, n_pts, n_box)` for every request, in one Redis round trip
        unless a counter has to be recovered. A user may appear more than once; each
        request gets its own range."""
        results = await self.allocate_guarded([(u, p, b, False) for u, p, b in requests])
        return [r for r in results if r is not None]

    async def allocate_guarded(
        self, requests: Sequence[tuple[int, int, int, bool]]
    ) -> list[Allocation | None]:
        """Like `allocate`, but a request `(user_id, n_pts, n_box, True)` is only served
        while the user's no-blocks mark is set; otherwise it gets None and allocates
        nothing (the caller checks contact_blocks first). Same single round trip."""
        calls: list[_Call] = []
        for index, (user_id, n_pts, n_box, guarded) in enumerate(requests):
            if n_pts < 0 or n_box < 0:
                raise ValueError(f"negative allocation for user {user_id}: {n_pts}, {n_box}")
            calls.append(_Call(index, user_id, n_pts, n_box, guarded=guarded))
        return await self._settle_guarded(calls, None)

    async def _settle_guarded(
        self,
        calls: list[_Call],
        first: Sequence[tuple[int, int, int] | RedisError] | None,
    ) -> list[Allocation | None]:
        """What ``calls`` allocate, from their scripts' replies (``first``: replies the
        caller got already, else the scripts run now), recovering missing counters."""
        results: list[Allocation | None] = [None] * len(calls)
        # Nothing is returned unless every request is served: what some took before
        # another failed becomes noops here, as no caller will ever write those pts.
        try:
            replies = first
            for _round in range(MAX_RECOVERY_ROUNDS):
                if replies is None:
                    replies = await self._run_allocate_scripts(calls)
                missed: list[tuple[_Call, int]] = []
                for call, reply in zip(calls, replies, strict=True):
                    if isinstance(reply, Exception):
                        continue  # raised below, once the others are counted
                    missing, last_pts, last_box = reply
                    if missing & GUARD_ABSENT:
                        continue  # stays None
                    if missing:
                        missed.append((call, missing))
                    else:
                        results[call.index] = call.allocation(last_pts, last_box)
                _raise_first_error(replies)
                if not missed:
                    return results
                calls = list(await asyncio.gather(*(self._with_floors(c, m) for c, m in missed)))
                replies = None
            raise CounterRecoveryError(
                f"counters of users {sorted({c.user_id for c in calls})} vanished "
                f"{MAX_RECOVERY_ROUNDS} times during recovery"
            )
        except BaseException as e:
            await self._fill_unreturned(results, e)
            raise

    async def allocate_floored(
        self, requests: Sequence[tuple[UnguardedFacts, int, bool]]
    ) -> list[Allocation]:
        """``(facts, n, mark)``: n pts and box ids for the user of ``facts`` above its
        floors (no guard asked for: the caller has just checked contact_blocks), setting
        the no-blocks mark of those with ``mark``, all in one round trip. With floors
        given the script never reports a counter missing."""
        calls = [
            _Call(i, f.user_id, n, n, f.max_pts, f.max_box, mark=mark)
            for i, (f, n, mark) in enumerate(requests)
        ]
        allocations: list[Allocation | None] = [None] * len(calls)
        try:
            replies = await self._run_allocate_scripts(calls)
            for call, reply in zip(calls, replies, strict=True):
                if not isinstance(reply, Exception) and not reply[0]:
                    allocations[call.index] = call.allocation(reply[1], reply[2])
            _raise_first_error(replies)
            for call, allocation in zip(calls, allocations, strict=True):
                if allocation is None:  # cannot happen with floors; refuse rather than guess
                    raise CounterRecoveryError(
                        f"counter of user {call.user_id} missing with a floor"
                    )
        except BaseException as e:
            await self._fill_unreturned(allocations, e)
            raise
        return [a for a in allocations if a is not None]

    async def _fill_unreturned(
        self, allocations: Sequence[Allocation | None], error: BaseException
    ) -> None:
        """The pts of ``allocations``, made before ``error`` stopped the call that would
        have returned them, become noops (best effort: a pts left empty is filled once
        stale by the updates service). A try block rather than a context manager: this
        wraps every send's allocation."""
        for a in allocations:
            if a is None or not a.last_pts:
                continue
            try:
                await update_log_store.fill_pts(
                    self._db.pool, a.user_id, range(a.first_pts, a.last_pts + 1), int(time.time())
                )
            except Exception:
                PTS_FILL_FAILURES.inc(a.last_pts - a.first_pts + 1)
                log.exception(
                    "could not fill pts %d..%d of user %d after %s",
                    a.first_pts,
                    a.last_pts,
                    a.user_id,
                    type(error).__name__,
                )

    async def allocate_one(self, user_id: int, n_pts: int, n_box: int) -> Allocation:
        (allocation,) = await self.allocate([(user_id, n_pts, n_box)])
        return allocation

    async def allocate_pts(self, user_id: int, n: int = 1) -> tuple[int, int]:
        """(first, last) of `n` new consecutive pts for the user."""
        allocation = await self.allocate_one(user_id, n, 0)
        return allocation.first_pts, allocation.last_pts

    async def forget_no_blocks(self, user_id: int) -> None:
        """The user's blocks changed: drop the mark, and keep it from being set again for
        a mark's lifetime (a send in flight may have read contact_blocks before the
        change). The blocks-changed key goes first: an allocation script that runs
        between the two commands already finds it."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.set(blocks_changed_key(user_id), 1, ex=NO_BLOCKS_TTL)
        pipe.delete(no_blocks_key(user_id))
        await pipe.execute()

    async def claim_send(self, user_id: int, random_id: int, ttl_ms: int) -> bool:
        """Claim the send of (user, random_id); False while another attempt holds it."""
        key = send_claim_key(user_id, random_id)
        claimed = _raised(await self._batch.execute("SET", key, 1, "NX", "PX", ttl_ms))
        return bool(claimed)

    async def send_rate_wait_and_claim(
        self, user_id: int, per_minute: int, random_id: int, ttl_ms: int
    ) -> tuple[int, bool]:
        """`RateLimits.send_rate_wait` and `claim_send` in one script call: the claim is taken only
        when the send is accepted, so a refused send leaves nothing to release. A
        retry (claim held) that fits the rate is counted."""
        claim = await self.take_send_claim(user_id, per_minute, random_id, ttl_ms)
        return claim.wait, claim.claimed

    async def take_send_claim(
        self, user_id: int, per_minute: int, random_id: int, ttl_ms: int
    ) -> SendClaim:
        """As `send_rate_wait_and_claim`, and whether this Redis has kept the user's
        claims for a whole ``ttl_ms`` (if not, a free claim may be one lost with an
        earlier Redis, and the caller looks for an earlier send before taking pts)."""
        reply = await self._batched_script(
            self._rate_claim_script,
            send_rate_key(user_id),
            send_claim_key(user_id, random_id),
            send_claims_since_key(user_id),
            max(0, per_minute),
            SEND_RATE_WINDOW_MS,
            ttl_ms,
            keys=3,
        )
        return _send_claim(reply)

    @property
    def claims_allocate(self) -> bool:
        """Whether ``claim_and_allocate`` can serve: on one Redis server, where one
        script may touch both users' keys (on a cluster they are in different slots)."""
        return isinstance(self._redis, ServerRedis)

    async def claim_and_allocate(
        self, sender: int, recipient: int, per_minute: int, random_id: int, ttl_ms: int, n: int
    ) -> tuple[SendClaim, list[Allocation | None] | None]:
        """``take_send_claim``, and only when the claim was taken whole, what
        ``allocate_guarded`` gives a send's chat (n pts and box ids on each side, the
        sender's guarded when the chat is with someone else, the recipient's always), in
        one script: a send's two round trips in one. None when nothing was allocated.
        Should the allocation fail once the script reported the claim taken, the claim
        is given back (a retry may go ahead), as when a send fails. A claim the script
        did not report taken may be another attempt's, and stays; so does one behind a
        reply not of this script's shape, which is left to expire."""
        to_other = recipient != sender
        sides = [sender, recipient] if to_other else [sender]
        keys = [send_rate_key(sender), send_claim_key(sender, random_id)]
        keys.append(send_claims_since_key(sender))
        for user in sides:
            keys += [pts_key(user), box_id_key(user), no_blocks_key(user)]
            keys.append(blocks_changed_key(user))
        reply = await self._batched_script(
            self._claim_allocate_script,
            *keys,
            max(0, per_minute),
            SEND_RATE_WINDOW_MS,
            ttl_ms,
            n,
            NO_BLOCKS_TTL,
            1 if to_other else 0,
            keys=len(keys),
        )
        claim = _send_claim(reply)
        if len(reply) == 3:
            return claim, None
        calls = [_Call(i, user, n, n, guarded=to_other) for i, user in enumerate(sides)]
        if len(reply) != 3 + 3 * len(calls) or not claim.claimed or not claim.whole:
            # Not this script's answer: what it took, if anything, is a hole that the
            # updates service fills once stale, and the claim is left to expire.
            raise ResponseError(f"the claim and allocation script answered {reply!r}")
        try:
            made = [_side_allocated(reply[k : k + 3]) for k in range(3, len(reply), 3)]
            return claim, await self._settle_guarded(calls, made)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.release_send(sender, random_id)  # taken by this call
            raise

    async def new_sender(self, user_id: int) -> None:
        """A new account has sent nothing, so no claim of its can have been lost: this
        Redis holds its claims whole from the start (the mark at Redis's epoch). A Redis
        that loses the mark later falls back to looking sends up, as for anyone. Without
        the mark a new account's first sends only cost a lookup each, so a Redis that
        cannot take it does not fail the sign-up."""
        try:
            await self._redis.set(send_claims_since_key(user_id), 0, nx=True)
        except RedisError as exc:
            log.info("new account %d: its send claims mark was not set: %s", user_id, exc)

    async def send_claimed(self, user_id: int, random_id: int) -> bool:
        return bool(await self._redis.exists(send_claim_key(user_id, random_id)))

    async def release_send(self, user_id: int, random_id: int) -> None:
        await self._redis.delete(send_claim_key(user_id, random_id))

    async def _batched_script(self, script: AsyncScript, *keys_and_args: Any, keys: int) -> Any:
        """One EVALSHA through the batcher (see :meth:`_batched_scripts`)."""
        (reply,) = await self._batched_scripts(script, [(keys, *keys_and_args)])
        return reply

    async def _batched_scripts(
        self, script: AsyncScript, calls: Sequence[tuple[Any, ...]], *, keep_errors: bool = False
    ) -> list[Any]:
        """One EVALSHA per call (``(numkeys, *keys, *args)``), all in the same round trip,
        with other coroutines' commands of the same turn (not MULTI: on a cluster each
        call touches one slot, so this works there too; the claim and allocation script,
        which touches two users' keys, runs on one server only). Calls that hit NOSCRIPT did
        nothing; they are sent again once the script is loaded. An error reply is raised,
        or with ``keep_errors`` given back in its call's place (the other calls did run)."""
        replies: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        for _attempt in range(MAX_SCRIPT_LOADS + 1):
            raw = await self._batch.execute_many(
                [("EVALSHA", script.sha, *calls[position]) for position in pending]
            )
            not_loaded: list[int] = []
            for position, reply in zip(pending, raw, strict=True):
                if isinstance(reply, NoScriptError):
                    not_loaded.append(position)
                else:
                    replies[position] = reply if keep_errors else _raised(reply)
            if not not_loaded:
                return replies
            SCRIPT_RELOADS.inc()
            script.sha = await self._redis.script_load(script.script)
            pending = not_loaded
        raise NoScriptError("script still missing after loading it")

    async def _with_floors(self, call: _Call, missing: int) -> _Call:
        pool = self._db.pool
        pts_floor = box_floor = NO_FLOOR
        if missing & MISSING_PTS:
            COUNTER_RECOVERIES.labels("pts").inc()
            pts_floor = await max_committed_pts(pool, call.user_id)
        if missing & MISSING_BOX:
            COUNTER_RECOVERIES.labels("box_id").inc()
            box_floor = await max_box_id(pool, call.user_id)
        return dataclasses.replace(call, pts_floor=pts_floor, box_floor=box_floor)

    async def _run_allocate_scripts(
        self, calls: Sequence[_Call]
    ) -> list[tuple[int, int, int] | RedisError]:
        """The allocation script for every call, in one round trip; a call whose script
        got an error reply has the error in its place."""
        replies = await self._batched_scripts(
            self._allocate_script,
            [
                (
                    4,
                    pts_key(call.user_id),
                    box_id_key(call.user_id),
                    no_blocks_key(call.user_id),
                    blocks_changed_key(call.user_id),
                    call.n_pts,
                    call.n_box,
                    call.pts_floor,
                    call.box_floor,
                    1 if call.guarded else 0,
                    1 if call.mark else 0,
                    NO_BLOCKS_TTL,
                )
                for call in calls
            ],
            keep_errors=True,
        )
        return [
            reply
            if isinstance(reply, RedisError)
            else (int(reply[0]), int(reply[1]), int(reply[2]))
            for reply in replies
        ]
