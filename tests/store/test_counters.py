from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from telesrv.store import counters as countersmod
from telesrv.store.counters import Allocation, Counters, box_id_key, pts_key
from telesrv.store.db import Db
from telesrv.store.rate_limits import send_rate_key
from telesrv.store.redis_client import ServerRedis

_user_ids = itertools.count(1_000_001)


@pytest.fixture
def user_id() -> int:
    return next(_user_ids)


@pytest.fixture
def counters(redis: aioredis.Redis, db: Db) -> Counters:
    return Counters(redis, db)


async def _commit_pts(db: Db, user_id: int, pts: Iterator[int] | range | list[int]) -> None:
    """Stand-in for the transactions that write what was allocated."""
    await db.pool.executemany(
        "INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date)"
        " VALUES ($1, $2, 1, 'noop', 0)",
        [(user_id, p) for p in pts],
    )


async def _commit_boxes(db: Db, user_id: int, box_ids: range | list[int]) -> None:
    await db.pool.executemany(
        "INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id,"
        " message_id, out, date) VALUES ($1, $2::integer, $1, $1, $2::bigint, true, 0)",
        [(user_id, b) for b in box_ids],
    )


async def _committed_pts(db: Db, user_id: int) -> list[int]:
    rows = await db.pool.fetch(
        "SELECT pts FROM user_update_events WHERE user_id = $1 ORDER BY pts", user_id
    )
    return [row["pts"] for row in rows]


def _expand(allocations: list[Allocation]) -> tuple[list[int], list[int]]:
    pts: list[int] = []
    boxes: list[int] = []
    for a in allocations:
        if a.first_pts:
            pts.extend(range(a.first_pts, a.last_pts + 1))
        if a.first_box:
            boxes.extend(range(a.first_box, a.last_box + 1))
    return sorted(pts), sorted(boxes)


async def test_new_account_pts_start_at_one(counters: Counters, user_id: int) -> None:
    assert await counters.allocate_pts(user_id) == (1, 1)
    assert await counters.allocate_pts(user_id, 3) == (2, 4)
    assert await counters.allocate_one(user_id, 0, 2) == Allocation(user_id, 0, 0, 1, 2)


async def test_pts_and_box_ids_are_independent(counters: Counters, user_id: int) -> None:
    assert await counters.allocate_one(user_id, 0, 3) == Allocation(user_id, 0, 0, 1, 3)
    assert await counters.allocate_one(user_id, 2, 1) == Allocation(user_id, 1, 2, 4, 4)


async def test_200_concurrent_allocations_are_dense(
    redis_url: str, redis: aioredis.Redis, db: Db, user_id: int
) -> None:
    # A waiting pool smaller than the crowd: the default pool raises past 100 connections.
    pool = aioredis.BlockingConnectionPool.from_url(redis_url, max_connections=20, timeout=10)
    client = aioredis.Redis(connection_pool=pool)
    try:
        counters = Counters(client, db)
        got = await asyncio.gather(*(counters.allocate_one(user_id, 1, 1) for _ in range(200)))
    finally:
        await client.aclose()
        await pool.disconnect()
    pts, boxes = _expand(list(got))
    assert pts == list(range(1, 201))
    assert boxes == list(range(1, 201))


async def test_concurrent_first_use_recovers_above_postgres_max(
    counters: Counters, redis: aioredis.Redis, db: Db, user_id: int
) -> None:
    await _commit_pts(db, user_id, range(1, 58))
    await _commit_boxes(db, user_id, range(1, 41))
    assert await redis.exists(pts_key(user_id), box_id_key(user_id)) == 0

    sizes = [1, 2, 3] * 20
    got = await asyncio.gather(*(counters.allocate_one(user_id, n, 1) for n in sizes))
    pts, boxes = _expand(list(got))
    assert pts == list(range(58, 58 + sum(sizes)))
    assert boxes == list(range(41, 41 + len(sizes)))


async def test_recovery_never_lowers_a_counter_set_meanwhile(
    counters: Counters, redis: aioredis.Redis, db: Db, user_id: int, monkeypatch: Any
) -> None:
    await _commit_pts(db, user_id, range(1, 58))
    original = countersmod.max_committed_pts

    async def racing_read(executor: Any, uid: int) -> int:
        # Another process recovered and handed out up to 100 while we read PostgreSQL.
        await redis.set(pts_key(uid), 100)
        return await original(executor, uid)

    monkeypatch.setattr(countersmod, "max_committed_pts", racing_read)
    assert await counters.allocate_pts(user_id) == (101, 101)


async def test_recovery_raises_a_counter_left_behind_postgres(
    counters: Counters, redis: aioredis.Redis, db: Db, user_id: int, monkeypatch: Any
) -> None:
    await _commit_boxes(db, user_id, range(1, 31))
    original = countersmod.max_box_id

    async def racing_read(executor: Any, uid: int) -> int:
        # A racer that read PostgreSQL before the last commits wrote a lower value.
        await redis.set(box_id_key(uid), 10)
        return await original(executor, uid)

    monkeypatch.setattr(countersmod, "max_box_id", racing_read)
    assert await counters.allocate_one(user_id, 0, 1) == Allocation(user_id, 0, 0, 31, 31)


async def test_flush_between_allocations_continues_above_committed(
    counters: Counters, redis: aioredis.Redis, db: Db, user_id: int
) -> None:
    for step in range(30):
        if step in (10, 20):
            await redis.flushdb()
        if step == 20:
            await redis.script_flush()
        first, last = await counters.allocate_pts(user_id, 1 + step % 2)
        await _commit_pts(db, user_id, range(first, last + 1))
    committed = await _committed_pts(db, user_id)
    assert committed == list(range(1, len(committed) + 1))
    assert len(committed) == 45

    # Handed out but never committed, then lost with Redis: the next pts follow the
    # committed ones, never fall below them.
    await counters.allocate_pts(user_id, 5)
    await redis.flushdb()
    assert await counters.allocate_pts(user_id) == (46, 46)


async def test_script_flush_alone_keeps_the_counters(
    counters: Counters, redis: aioredis.Redis, db: Db, user_id: int
) -> None:
    assert await counters.allocate_pts(user_id, 5) == (1, 5)
    await redis.script_flush()
    # Redis still has the counter: nothing uncommitted is handed out again.
    assert await counters.allocate_pts(user_id) == (6, 6)


async def test_flush_and_noscript_with_several_users_at_once(
    counters: Counters, redis: aioredis.Redis, db: Db
) -> None:
    users = [next(_user_ids) for _ in range(3)]
    for index, uid in enumerate(users):
        await _commit_pts(db, uid, range(1, 11 + index))
    await counters.allocate([(uid, 1, 1) for uid in users])
    await redis.flushdb()
    await redis.script_flush()
    batches = await asyncio.gather(
        *(counters.allocate([(uid, 1, 0) for uid in users]) for _ in range(10))
    )
    for index, uid in enumerate(users):
        pts = sorted(a.first_pts for batch in batches for a in batch if a.user_id == uid)
        assert pts == list(range(11 + index, 21 + index))


async def test_multi_user_allocation_in_one_round_trip(
    counters: Counters, redis: aioredis.Redis, monkeypatch: Any
) -> None:
    a, b, c = (next(_user_ids) for _ in range(3))
    await counters.allocate([(a, 1, 1), (b, 1, 1), (c, 1, 1)])  # first use: recovery

    assert isinstance(redis, ServerRedis)  # the server's client: the batcher's own round trips
    round_trips = 0
    original_run = redis.round_trips.run

    def counting_run(*args: Any, **kwargs: Any) -> Any:
        nonlocal round_trips
        round_trips += 1
        return original_run(*args, **kwargs)

    async def no_direct_commands(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"unexpected round trip {args[:1]}")

    monkeypatch.setattr(redis.round_trips, "run", counting_run)
    monkeypatch.setattr(redis, "execute_command", no_direct_commands)

    def no_pipelines(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("unexpected pipeline")

    monkeypatch.setattr(redis, "pipeline", no_pipelines)
    got = await counters.allocate([(a, 2, 0), (b, 0, 3), (a, 1, 1), (c, 0, 0)])
    assert round_trips == 1
    assert got == [
        Allocation(a, 2, 3, 0, 0),
        Allocation(b, 0, 0, 2, 4),
        Allocation(a, 4, 4, 2, 2),
        Allocation(c, 0, 0, 0, 0),
    ]


async def test_load_scripts_avoids_the_noscript_round_trip(
    counters: Counters, redis: aioredis.Redis, user_id: int
) -> None:
    await redis.script_flush()
    await counters.load_scripts()
    reloads = countersmod.SCRIPT_RELOADS._value.get()
    assert await counters.allocate_pts(user_id) == (1, 1)
    assert countersmod.SCRIPT_RELOADS._value.get() == reloads


async def test_empty_request_list(counters: Counters) -> None:
    assert await counters.allocate([]) == []


async def test_negative_counts_are_rejected(counters: Counters, user_id: int) -> None:
    with pytest.raises(ValueError):
        await counters.allocate([(user_id, -1, 0)])


async def test_rate_check_and_send_claim_in_one_step(counters: Counters, user_id: int) -> None:
    assert await counters.send_rate_wait_and_claim(user_id, 3, 1, 60_000) == (0, True)
    # The same send again is a retry: counted, but not claimed.
    assert await counters.send_rate_wait_and_claim(user_id, 3, 1, 60_000) == (0, False)
    assert await counters.send_rate_wait_and_claim(user_id, 3, 2, 60_000) == (0, True)
    # Past the limit: refused, and the claim it took is given back.
    wait, claimed = await counters.send_rate_wait_and_claim(user_id, 3, 3, 60_000)
    assert wait > 0 and not claimed
    assert not await counters.send_claimed(user_id, 3)
    # With the limit off only the claim is taken.
    assert await counters.send_rate_wait_and_claim(user_id, 0, 3, 60_000) == (0, True)


async def test_refused_send_leaves_another_attempts_claim(counters: Counters, user_id: int) -> None:
    assert await counters.claim_send(user_id, 7, 60_000)  # an attempt in flight
    assert await counters.send_rate_wait_and_claim(user_id, 1, 8, 60_000) == (0, True)
    # Past the limit: refused, and the claim held by the other attempt stays.
    wait, claimed = await counters.send_rate_wait_and_claim(user_id, 1, 7, 60_000)
    assert wait > 0 and not claimed
    assert await counters.send_claimed(user_id, 7)


async def test_rate_check_and_send_claim_survive_script_flush(
    counters: Counters, redis: aioredis.Redis, user_id: int
) -> None:
    await redis.script_flush()
    assert await counters.send_rate_wait_and_claim(user_id, 2, 1, 60_000) == (0, True)
    assert await counters.send_rate_wait_and_claim(user_id, 2, 2, 60_000) == (0, True)
    assert (await counters.send_rate_wait_and_claim(user_id, 2, 3, 60_000))[0] > 0


async def test_allocate_floored_marks_unless_the_blocks_just_changed_even_after_noscript(
    counters: Counters, redis: aioredis.Redis, db: Db
) -> None:
    from telesrv.store.counters import UnguardedFacts, no_blocks_key

    a, b = next(_user_ids), next(_user_ids)
    await _commit_pts(db, a, range(1, 4))
    facts = {u: UnguardedFacts(u, False, False, 3 if u == a else 0, 0) for u in (a, b)}
    await counters.forget_no_blocks(b)  # b's blocks changed after its facts were read
    await redis.script_flush()  # the marks ride in the scripts: a reload keeps them
    got = await counters.allocate_floored([(facts[a], 2, True), (facts[b], 1, True)])
    assert got == [Allocation(a, 4, 5, 1, 2), Allocation(b, 1, 1, 1, 1)]
    assert await redis.exists(no_blocks_key(a))
    assert not await redis.exists(no_blocks_key(b))
    # a floor below what Redis holds never lowers the counter
    (again,) = await counters.allocate_floored([(facts[a], 1, False)])
    assert (again.first_pts, again.first_box) == (6, 3)


async def test_rate_and_claim_survive_a_script_flush(
    counters: Counters, redis: aioredis.Redis, user_id: int
) -> None:
    await redis.script_flush()
    assert await counters.send_rate_wait_and_claim(user_id, 30, 77, 5_000) == (0, True)
    assert await counters.send_rate_wait_and_claim(user_id, 30, 77, 5_000) == (0, False)


async def test_concurrent_rate_and_claims_in_one_round_trip_survive_a_script_flush(
    counters: Counters, redis: aioredis.Redis
) -> None:
    # The batched path: every call of the round trip meets NOSCRIPT, reloads, and is
    # sent again; each still gets its own claim, once.
    users = [next(_user_ids) for _ in range(3)]
    await counters.load_scripts()
    await redis.script_flush()
    reloads = countersmod.SCRIPT_RELOADS._value.get()
    first = await asyncio.gather(
        *(counters.send_rate_wait_and_claim(u, 30, r, 5_000) for u in users for r in (1, 2))
    )
    again = await asyncio.gather(
        *(counters.send_rate_wait_and_claim(u, 30, r, 5_000) for u in users for r in (1, 2))
    )
    assert first == [(0, True)] * 6
    assert again == [(0, False)] * 6
    assert countersmod.SCRIPT_RELOADS._value.get() > reloads


async def _log_rows(db: Db, user_id: int) -> list[tuple[int, str]]:
    rows = await db.pool.fetch(
        "SELECT pts, event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts",
        user_id,
    )
    return [(row["pts"], row["event_type"]) for row in rows]


async def test_pts_taken_before_another_call_of_the_round_trip_failed_become_noops(
    counters: Counters, redis: aioredis.Redis, db: Db
) -> None:
    from telesrv.store.counters import UnguardedFacts

    ok, broken = next(_user_ids), next(_user_ids)
    (first,) = await counters.allocate([(ok, 1, 1)])  # both counters now in Redis
    await _commit_pts(db, ok, [first.first_pts])
    # The other user's counter is not a number: its script gets an error reply, while
    # the first user's, in the same round trip, takes a pts no caller will ever write.
    await redis.hset(pts_key(broken), "not", "a counter")
    with pytest.raises(aioredis.ResponseError):
        await counters.allocate([(ok, 2, 1), (broken, 1, 0)])
    assert await _log_rows(db, ok) == [(1, "noop"), (2, "noop"), (3, "noop")]
    # The same through the path with floors (a send whose marks ran out).
    facts = [UnguardedFacts(u, False, False, 0, 0) for u in (ok, broken)]
    with pytest.raises(aioredis.ResponseError):
        await counters.allocate_floored([(facts[0], 1, False), (facts[1], 1, False)])
    assert await _log_rows(db, ok) == [(p, "noop") for p in range(1, 5)]
    # The log stays dense: the next allocation follows on.
    (after,) = await counters.allocate([(ok, 1, 0)])
    assert after.first_pts == 5
    assert await _log_rows(db, broken) == []


async def test_a_call_whose_script_fails_takes_no_pts(
    counters: Counters, redis: aioredis.Redis, db: Db
) -> None:
    """A script stopped by an error keeps the writes it made before it: a call must not
    have moved its pts counter when an error reply says it took nothing (no caller and
    no fill would ever know of that pts)."""
    from telesrv.store.counters import UnguardedFacts

    user = next(_user_ids)
    (first,) = await counters.allocate([(user, 1, 1)])
    await _commit_pts(db, user, [first.first_pts])
    # The box id counter is not a number: the script gets an error reply at it.
    await redis.delete(box_id_key(user))
    await redis.hset(box_id_key(user), "not", "a counter")
    with pytest.raises(aioredis.ResponseError):
        await counters.allocate([(user, 1, 1)])
    facts = UnguardedFacts(user, False, False, first.last_pts, 0)
    with pytest.raises(aioredis.ResponseError):
        await counters.allocate_floored([(facts, 1, False)])
    assert await redis.get(pts_key(user)) == b"1"
    # The log stays dense: the next allocation follows on.
    (after,) = await counters.allocate([(user, 1, 0)])
    assert after.first_pts == 2


@pytest.fixture
def server_counters(counters: Counters) -> Counters:
    """Counters on one Redis server, where a send's claim and allocation are one script
    (on a cluster the two users' keys are in different slots)."""
    if not counters.claims_allocate:
        pytest.skip("a send's claim and allocation in one script need one Redis server")
    return counters


async def _marked(redis: aioredis.Redis, *users: int) -> None:
    """The users block nobody (their marks are set), as a recent send would leave."""
    for user in users:
        await redis.set(countersmod.no_blocks_key(user), 1, ex=60)


async def _chat(counters: Counters, redis: aioredis.Redis) -> tuple[int, int]:
    """Two new users who block nobody, the first a sender whose claims are whole."""
    sender, recipient = next(_user_ids), next(_user_ids)
    await counters.new_sender(sender)
    await _marked(redis, sender, recipient)
    return sender, recipient


async def _counter_values(redis: aioredis.Redis, *users: int) -> list[Any]:
    return [await redis.get(key(u)) for u in users for key in (pts_key, box_id_key)]


async def test_claim_and_allocate_takes_both_sides_with_a_whole_claim(
    server_counters: Counters, redis: aioredis.Redis
) -> None:
    counters = server_counters
    sender, recipient = next(_user_ids), next(_user_ids)
    await counters.new_sender(sender)  # its claims are whole from the start
    await _marked(redis, sender, recipient)
    await counters.allocate([(sender, 4, 2), (recipient, 1, 1)])  # counters in Redis
    claim, taken = await counters.claim_and_allocate(sender, recipient, 0, 1, 60_000, 1)
    assert (claim.wait, claim.claimed, claim.whole) == (0, True, True)
    assert taken == [Allocation(sender, 5, 5, 3, 3), Allocation(recipient, 2, 2, 2, 2)]
    # The same send again is a retry: nothing is taken on either side.
    claim, taken = await counters.claim_and_allocate(sender, recipient, 0, 1, 60_000, 1)
    assert (claim.claimed, taken) == (False, None)
    after = await counters.allocate([(sender, 1, 1), (recipient, 1, 1)])
    assert after == [Allocation(sender, 6, 6, 4, 4), Allocation(recipient, 3, 3, 3, 3)]


async def test_claim_and_allocate_takes_nothing_for_a_refused_send_or_a_claim_not_whole(
    server_counters: Counters, redis: aioredis.Redis
) -> None:
    counters = server_counters
    sender, recipient = next(_user_ids), next(_user_ids)
    await _marked(redis, sender, recipient)
    await counters.allocate([(sender, 3, 3), (recipient, 2, 2)])
    before = await _counter_values(redis, sender, recipient)
    # No claims-since mark: this Redis may have lost earlier claims, so the claim is
    # taken but not whole, and the caller looks for an earlier send before allocating.
    claim, taken = await counters.claim_and_allocate(sender, recipient, 1, 1, 60_000, 1)
    assert (claim.wait, claim.claimed, claim.whole, taken) == (0, True, False, None)
    # Past the rate limit (one a minute): refused, unclaimed, nothing taken.
    claim, taken = await counters.claim_and_allocate(sender, recipient, 1, 2, 60_000, 1)
    assert claim.wait > 0 and not claim.claimed and taken is None
    assert not await counters.send_claimed(sender, 2)
    assert await _counter_values(redis, sender, recipient) == before


async def test_claim_and_allocate_leaves_unmarked_sides_and_recovers_missing_counters(
    server_counters: Counters, redis: aioredis.Redis, db: Db
) -> None:
    counters = server_counters
    sender, recipient = next(_user_ids), next(_user_ids)
    await counters.new_sender(sender)
    await _marked(redis, sender)  # the recipient's mark ran out
    await _commit_pts(db, sender, range(1, 8))  # Redis lost the sender's counters
    claim, taken = await counters.claim_and_allocate(sender, recipient, 0, 1, 60_000, 1)
    assert claim.claimed and claim.whole
    # The sender's counters are rebuilt above what is committed; the recipient, whose
    # blocks must be read first, gets nothing yet, and no mark is set for them (only
    # a caller that read their blocks sets it).
    assert taken == [Allocation(sender, 8, 8, 1, 1), None]
    assert not await redis.exists(pts_key(recipient), box_id_key(recipient))
    assert not await redis.exists(countersmod.no_blocks_key(recipient))


async def test_claim_and_allocate_in_the_own_chat_takes_one_unguarded_side(
    server_counters: Counters,
) -> None:
    user = next(_user_ids)
    await server_counters.new_sender(user)  # no mark: the own chat needs none
    claim, taken = await server_counters.claim_and_allocate(user, user, 0, 1, 60_000, 2)
    assert claim.claimed and claim.whole
    assert taken == [Allocation(user, 1, 2, 1, 2)]


async def test_claim_and_allocate_survives_a_script_flush(
    server_counters: Counters, redis: aioredis.Redis
) -> None:
    counters = server_counters
    sender, recipient = await _chat(counters, redis)
    await counters.allocate([(sender, 1, 1), (recipient, 1, 1)])
    await redis.script_flush()
    claim, taken = await counters.claim_and_allocate(sender, recipient, 0, 1, 60_000, 1)
    assert claim.claimed and taken == [
        Allocation(sender, 2, 2, 2, 2),
        Allocation(recipient, 2, 2, 2, 2),
    ]


async def test_a_side_that_fails_in_the_claims_script_leaves_the_other_filled(
    server_counters: Counters, redis: aioredis.Redis, db: Db
) -> None:
    """One side's allocation failing in the script (here a counter that holds no
    number) does not hide the other's: its pts become a noop, as when each side was a
    script of its own, and the claim, taken, is given back for a retry."""
    counters = server_counters
    sender, recipient = await _chat(counters, redis)
    await counters.allocate([(sender, 2, 2), (recipient, 1, 1)])
    await redis.set(pts_key(recipient), "not a number")
    with pytest.raises(ResponseError):
        await counters.claim_and_allocate(sender, recipient, 0, 1, 60_000, 1)
    assert await _committed_pts(db, sender) == [3]  # the noop of the pts it took
    assert not await counters.send_claimed(sender, 1)


async def test_a_claims_script_that_fails_gives_back_no_claim(
    server_counters: Counters, redis: aioredis.Redis
) -> None:
    """Only a claim the script reports taken is given back when what follows fails: a
    script that failed (here on a rate log that is not one) may have found another
    attempt's claim held, and must not free it."""
    counters = server_counters
    sender, recipient = await _chat(counters, redis)
    assert await counters.claim_send(sender, 5, 60_000)  # the first attempt, in flight
    await redis.set(send_rate_key(sender), "not a log")
    with pytest.raises(ResponseError):
        await counters.claim_and_allocate(sender, recipient, 30, 5, 60_000, 1)
    assert await counters.send_claimed(sender, 5)


async def test_a_sender_that_fails_in_the_claims_script_takes_nothing_of_the_recipient(
    server_counters: Counters, redis: aioredis.Redis, db: Db
) -> None:
    """The recipient's allocation is not tried after the sender's failed: it would
    only give them a noop."""
    counters = server_counters
    sender, recipient = await _chat(counters, redis)
    await counters.allocate([(sender, 1, 1), (recipient, 1, 1)])
    await redis.set(pts_key(sender), "not a number")
    before = await _counter_values(redis, recipient)
    with pytest.raises(ResponseError, match="not an integer"):
        await counters.claim_and_allocate(sender, recipient, 0, 1, 60_000, 1)
    assert await _counter_values(redis, recipient) == before
    assert await _committed_pts(db, recipient) == []
    assert not await counters.send_claimed(sender, 1)  # taken, given back
