"""Send / read / difference on real PostgreSQL and Redis: dense pts, one event per side,
idempotent sends, blocked recipients untouched."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from typing import Any

import pytest
from conftest import MakeParts
from prometheus_client import REGISTRY

from telesrv.parts import Parts
from telesrv.rpc.errors import to_rpc_error
from telesrv.services.errors import (
    FloodWait,
    MediaInvalid,
    MessageEmpty,
    MessageTooLong,
    ReplyMessageIdInvalid,
)
from telesrv.services.history import History
from telesrv.services.messages import MessageService, Origin, OutgoingText
from telesrv.services.read_receipts import ReadReceipts
from telesrv.services.updates import UpdatesService, contiguous_pts
from telesrv.store import dialog_list as dialog_list_store
from telesrv.store import messages as messages_store
from telesrv.store import users as users_store
from telesrv.store.counters import Counters

from .test_albums import a_gone_document

ORIGIN = Origin(auth_key_id=11, session_id=22)
_ids = itertools.count(5_000_000)


def new_user() -> int:
    return next(_ids)


@pytest.fixture
async def services(parts: Parts) -> tuple[MessageService, UpdatesService, Counters]:
    return parts.messages, parts.updates, parts.counters


@pytest.fixture
def history(parts: Parts) -> History:
    return parts.history


@pytest.fixture
def read_receipts(parts: Parts) -> ReadReceipts:
    return parts.read_receipts


def text(
    sender: int, recipient: int, random_id: int, body: str = "hello", **kw: Any
) -> OutgoingText:
    return OutgoingText(sender=sender, recipient=recipient, random_id=random_id, text=body, **kw)


async def log_of(db: Any, user: int) -> list[tuple[int, str]]:
    rows = await db.pool.fetch(
        "SELECT pts, event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts", user
    )
    return [(r["pts"], r["event_type"]) for r in rows]


async def test_send_writes_both_sides(services: Any, db: Any, history: History) -> None:
    messages, updates, _ = services
    a, b = new_user(), new_user()
    sent = await messages.send_text(text(a, b, 1), ORIGIN, now=1000)
    assert sent.message.out and sent.message.box_id == 1 and sent.pts == 1
    assert await log_of(db, a) == [(1, "new_message")]
    assert await log_of(db, b) == [(1, "new_message")]
    inbox, count = await history.history(
        b, a, offset_id=0, offset_date=0, add_offset=0, limit=10, max_id=0, min_id=0
    )
    assert count == 1 and not inbox[0].out and inbox[0].message == "hello"
    rows = await dialog_list_store.get_peer_dialogs(db.pool, b, [a])
    assert rows[0].unread_count == 1 and rows[0].read_outbox_max_id == 0
    outbox = await db.pool.fetch(
        "SELECT target_user_id, exclude_auth_key_id, exclude_session_id FROM dispatch_outbox"
        " WHERE target_user_id = ANY($1::bigint[]) ORDER BY target_user_id",
        [a, b],
    )
    assert [tuple(r.values()) for r in outbox] == [(a, 11, 22), (b, None, None)]


async def test_text_limits(services: Any) -> None:
    messages, _, _ = services
    a, b = new_user(), new_user()
    await messages.send_text(text(a, b, 1, "x" * 4096), ORIGIN, now=1)
    await messages.send_text(text(a, b, 2, "😀" * 4096), ORIGIN, now=1)  # code points, not bytes
    with pytest.raises(MessageTooLong):
        await messages.send_text(text(a, b, 3, "x" * 4097), ORIGIN, now=1)
    with pytest.raises(MessageEmpty):
        await messages.send_text(text(a, b, 4, "  "), ORIGIN, now=1)


async def test_two_hundred_concurrent_sends_give_dense_pts(services: Any, db: Any) -> None:
    messages, updates, _ = services
    target = new_user()
    senders = [new_user() for _ in range(20)]
    await asyncio.gather(
        *(messages.send_text(text(senders[i % 20], target, i), ORIGIN, now=5) for i in range(200))
    )
    pts = [p for p, _ in await log_of(db, target)]
    assert pts == list(range(1, 201))
    assert (await updates.state(target, now=5)).pts == 200


async def test_crossing_sends_do_not_deadlock(services: Any, db: Any) -> None:
    messages, _, _ = services
    a, b = new_user(), new_user()
    await asyncio.wait_for(
        asyncio.gather(
            *(messages.send_text(text(a, b, i), ORIGIN, now=1) for i in range(40)),
            *(messages.send_text(text(b, a, i), ORIGIN, now=1) for i in range(40)),
        ),
        timeout=60,
    )
    assert [p for p, _ in await log_of(db, a)] == list(range(1, 81))


def deadlock_retries() -> float:
    """Transactions this process retried because PostgreSQL broke a deadlock."""
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        if metric.name == "telesrv_db_txn_retries"
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels.get("sqlstate") == "40P01"
    )


async def test_reads_crossing_sends_take_the_dialog_rows_in_one_order(
    services: Any, db: Any, read_receipts: ReadReceipts
) -> None:
    # B reads A's chat while A sends to B, and A reads B's chat while B sends to A: a
    # read that locked its own dialog row before its peer's would deadlock with the send
    # (which locks the lower user id first). PostgreSQL would break the cycle and the
    # transaction be retried, so the test counts those retries.
    messages, _, _ = services
    a, b = new_user(), new_user()
    await messages.send_text(text(a, b, 10_000), ORIGIN, now=1)
    await messages.send_text(text(b, a, 10_000), ORIGIN, now=1)
    before = deadlock_retries()
    for i in range(15):
        await asyncio.wait_for(
            asyncio.gather(
                messages.send_text(text(a, b, i), ORIGIN, now=2),
                messages.send_text(text(b, a, i), ORIGIN, now=2),
                read_receipts.read_history(b, a, 0, ORIGIN, now=2),
                read_receipts.read_history(a, b, 0, ORIGIN, now=2),
            ),
            timeout=60,
        )
    assert deadlock_retries() == before


async def test_concurrent_retries_of_one_random_id_create_one_message(
    services: Any, db: Any
) -> None:
    messages, updates, _ = services
    a, b = new_user(), new_user()
    results = await asyncio.gather(
        *(messages.send_text(text(a, b, 777), ORIGIN, now=1) for _ in range(10))
    )
    assert len({r.message.box_id for r in results}) == 1
    assert sum(not r.duplicate for r in results) == 1
    assert (
        await db.pool.fetchval("SELECT count(*) FROM private_messages WHERE sender_user_id = $1", a)
        == 1
    )
    # Whatever pts a retry took became a noop: the log stays dense, getDifference skips it.
    log = await log_of(db, b)
    assert [p for p, _ in log] == list(range(1, len(log) + 1))
    assert [t for _, t in log].count("new_message") == 1
    diff = await updates.difference(b, 0)
    assert [e.event_type for e in diff.events].count("new_message") == 1 and diff.pts == len(log)


async def test_failed_transaction_leaves_noop_and_difference_passes(services: Any, db: Any) -> None:
    messages, updates, _ = services
    a, b = new_user(), new_user()
    await messages.send_text(text(a, b, 1), ORIGIN, now=1)
    # Its document was removed after it was looked up: the send function refuses it
    # inside the transaction, after the pts were taken.
    gone = dataclasses.replace(text(a, b, 2), media=await a_gone_document(db))
    with pytest.raises(MediaInvalid):
        await messages.send_text(gone, ORIGIN, now=1)
    await messages.send_text(text(a, b, 3), ORIGIN, now=1)
    assert await log_of(db, a) == [(1, "new_message"), (2, "noop"), (3, "new_message")]
    diff = await updates.difference(a, 1)
    assert diff.kind == "full" and diff.pts == 3
    assert [e.event_type for e in diff.events] == ["noop", "new_message"]


async def test_a_refused_reply_takes_no_pts(services: Any, db: Any) -> None:
    # A reply to a message that is not in the chat is refused before the allocation:
    # neither log gets a noop for it.
    messages, _, _ = services
    a, b = new_user(), new_user()
    await messages.send_text(text(a, b, 1), ORIGIN, now=1)
    with pytest.raises(ReplyMessageIdInvalid):
        await messages.send_text(text(a, b, 2, reply_to=999), ORIGIN, now=1)
    await messages.send_text(text(a, b, 3, reply_to=1), ORIGIN, now=1)
    assert await log_of(db, a) == [(1, "new_message"), (2, "new_message")]
    assert await log_of(db, b) == [(1, "new_message"), (2, "new_message")]


async def test_difference_stops_at_a_hole_and_slices(services: Any, db: Any) -> None:
    _, updates, counters = services
    u = new_user()
    for pts in range(1, 251):
        await db.pool.execute(
            "INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date)"
            " VALUES ($1, $2, 1, 'noop', 0)",
            u,
            pts,
        )
    await db.pool.execute("DELETE FROM user_update_events WHERE user_id = $1 AND pts = 230", u)
    first = await updates.difference(u, 0)
    assert first.kind == "slice" and first.pts == 100 and len(first.events) == 100
    second = await updates.difference(u, 100)
    assert second.kind == "slice" and second.pts == 200
    third = await updates.difference(u, 200)
    assert third.kind == "full" and third.pts == 229  # stops before the in-flight pts 230
    assert (await updates.state(u, now=0)).pts == 229
    assert (await updates.difference(u, 229)).kind == "empty"


def test_contiguous_pts() -> None:
    def ones(*pts: int) -> list[tuple[int, int]]:
        return [(p, 1) for p in pts]

    assert contiguous_pts([], 10) == 0
    assert contiguous_pts(ones(3, 2, 1), 10) == 3
    assert contiguous_pts(ones(4, 2, 1), 10) == 2
    assert contiguous_pts(ones(3, 2), 10) == 0  # pts 1 still in flight
    assert contiguous_pts(ones(13, 12, 11), 3) == 13  # a full window: the rest is below it
    # a delete of 3 ids covers pts 3..5
    assert contiguous_pts([(6, 1), (5, 3), (2, 1), (1, 1)], 10) == 6
    assert contiguous_pts([(6, 1), (5, 2), (2, 1), (1, 1)], 10) == 2


async def test_new_account_state_starts_at_one(services: Any) -> None:
    _, updates, _ = services
    state = await updates.state(new_user(), now=0)
    assert state.pts == 1


async def test_a_send_racing_the_first_state_of_an_account(
    db: Any, services: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An account's pts 1 is taken with it, so a send racing its first updates.getState
    takes pts 2, and the state answer, which leaves that send out, is 1: never 0 (no
    state, to clients) nor the send's own pts before its answer."""
    _, racing, counters = services
    user = (await users_store.create_user(db.pool, "15557770001", "N")).user_id
    # The send's pts 2 is still on its way in this process.
    monkeypatch.setattr(racing, "_in_flight", lambda u: 2 if u == user else None)
    taken = (await counters.allocate([(user, 1, 0)]))[0]
    assert taken.first_pts == 2
    assert (await racing.state(user, now=0)).pts == 1


async def test_read_history_moves_both_watermarks(
    services: Any, db: Any, read_receipts: ReadReceipts
) -> None:
    messages, _, _ = services
    a, b = new_user(), new_user()
    for i in range(3):
        await messages.send_text(text(a, b, i), ORIGIN, now=1)
    # Nothing read before the peer reads: no read receipt is made up.
    assert (await dialog_list_store.get_peer_dialogs(db.pool, a, [b]))[0].read_outbox_max_id == 0
    outcome = await read_receipts.read_history(b, a, 2, ORIGIN, now=2)
    assert outcome is not None and outcome.pts_count == 1
    reader = (await dialog_list_store.get_peer_dialogs(db.pool, b, [a]))[0]
    assert (reader.read_inbox_max_id, reader.unread_count) == (2, 1)
    sender = (await dialog_list_store.get_peer_dialogs(db.pool, a, [b]))[0]
    assert sender.read_outbox_max_id == 2
    assert (await log_of(db, a))[-1] == (4, "read_history_outbox")
    assert (await log_of(db, b))[-1] == (4, "read_history_inbox")
    assert await read_receipts.read_history(b, a, 2, ORIGIN, now=3) is None  # nothing new: no pts


async def test_blocked_recipient_gets_nothing(services: Any, db: Any) -> None:
    messages, _, _ = services
    a, b = new_user(), new_user()
    await db.pool.execute(
        "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)", b, a
    )
    sent = await messages.send_text(text(a, b, 1), ORIGIN, now=1)
    assert sent.message.out and await log_of(db, a) == [(1, "new_message")]
    assert await log_of(db, b) == []
    assert await dialog_list_store.get_peer_dialogs(db.pool, b, [a]) == []


async def test_reply_ids_are_translated_to_the_recipient_view(
    services: Any, history: History
) -> None:
    messages, _, _ = services
    a, b, c = new_user(), new_user(), new_user()
    await messages.send_text(text(c, b, 1), ORIGIN, now=1)  # b's box 1 is from c
    first = await messages.send_text(text(a, b, 2, "question"), ORIGIN, now=1)  # b's box 2
    await messages.send_text(text(b, a, 3, "answer", reply_to=2), ORIGIN, now=1)
    a_view, _ = await history.history(
        a, b, offset_id=0, offset_date=0, add_offset=0, limit=1, max_id=0, min_id=0
    )
    assert a_view[0].message == "answer" and a_view[0].reply_to_msg_id == first.message.box_id == 1
    with pytest.raises(ReplyMessageIdInvalid):
        await messages.send_text(text(b, a, 4, "x", reply_to=1), ORIGIN, now=1)  # c's chat


async def test_history_paging_and_add_offset_clamp(services: Any, history: History) -> None:
    messages, _, _ = services
    a, b = new_user(), new_user()
    for i in range(30):
        await messages.send_text(text(a, b, i, f"m{i}"), ORIGIN, now=100 + i)

    async def page(**kw: Any) -> list[int]:
        args = dict(offset_id=0, offset_date=0, add_offset=0, limit=10, max_id=0, min_id=0)
        args.update(kw)
        got, _ = await history.history(a, b, **args)
        return [m.box_id for m in got]

    assert await page() == list(range(30, 20, -1))
    assert await page(offset_id=21) == list(range(20, 10, -1))
    assert await page(offset_id=21, add_offset=-5, limit=10) == list(range(25, 15, -1))
    assert await page(min_id=25) == [30, 29, 28, 27, 26]
    assert await page(max_id=5) == [4, 3, 2, 1]
    assert await page(offset_date=105) == [5, 4, 3, 2, 1]
    assert await page(add_offset=10**9) == []  # clamped to 100: past the 30 messages
    # clamped to -100: the window [30 - 100, 30 - 100 + limit) lies above the newest
    # message (empty) until the limit reaches into the chat (Telegram's offset rule)
    assert await page(add_offset=-(10**9), offset_id=1, limit=3) == []
    assert await page(add_offset=-(10**9), offset_id=1, limit=100) == list(range(30, 0, -1))
    assert await page(add_offset=-2, offset_id=10, limit=3) == [11, 10, 9]


async def test_counters_recover_after_redis_loses_everything(
    services: Any, db: Any, redis: Any
) -> None:
    messages, updates, _ = services
    a, b = new_user(), new_user()
    for i in range(5):
        await messages.send_text(text(a, b, i), ORIGIN, now=1)
    await redis.flushdb()
    await asyncio.gather(
        *(messages.send_text(text(b, a, 100 + i), ORIGIN, now=1) for i in range(10))
    )
    for user in (a, b):
        assert [p for p, _ in await log_of(db, user)] == list(range(1, 16))
    boxes = await db.pool.fetch(
        "SELECT box_id FROM message_boxes WHERE owner_user_id = $1 ORDER BY box_id", a
    )
    assert [r["box_id"] for r in boxes] == list(range(1, 16))


async def test_a_stale_hole_is_filled_but_a_fresh_one_waits(services: Any, db: Any) -> None:
    _, updates, _ = services
    u = new_user()
    for pts, date in ((1, 100), (3, 100)):
        await db.pool.execute(
            "INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date)"
            " VALUES ($1, $2, 1, 'noop', $3)",
            u,
            pts,
            date,
        )
    # pts 2 may still be committing: within the grace nothing is filled
    assert (await updates.difference(u, 0, now=110)).pts == 1
    assert await updates.contiguous(u, now=110) == 1
    # long after, it is a dead transaction's pts: filled, and the log moves on
    assert (await updates.difference(u, 0, now=1000)).pts == 3
    assert await log_of(db, u) == [(1, "noop"), (2, "noop"), (3, "noop")]


async def test_send_rate_limit_answers_flood_wait(make_parts: MakeParts) -> None:
    messages = make_parts(send_rate_limit=3).messages
    a, b = new_user(), new_user()
    for i in range(3):  # at the limit
        await messages.send_text(text(a, b, i), ORIGIN, now=1)
    with pytest.raises(FloodWait) as info:  # one past it
        await messages.send_text(text(a, b, 99), ORIGIN, now=1)
    assert 1 <= info.value.seconds <= 60
    # The client is told FLOOD_WAIT_<seconds>.
    assert to_rpc_error(info.value).message == f"FLOOD_WAIT_{info.value.seconds}"


async def test_the_blocks_nobody_mark_saves_the_lookup_and_a_block_clears_it(
    services: Any, db: Any, redis: Any
) -> None:
    from telesrv.services.update_log import UpdateLogEvents
    from telesrv.store.counters import no_blocks_key

    messages, _, counters = services
    a, b = new_user(), new_user()
    await messages.send_text(text(a, b, 1), ORIGIN, now=1)
    assert await redis.exists(no_blocks_key(b))  # b blocks nobody: remembered
    # b blocks a; the account hook drops the mark, so the next send reads contact_blocks
    events = UpdateLogEvents(counters)
    async with db.pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)", b, a
        )
        await events.block_changed(conn, b, a, True, None)
    await events.blocks_committed(b)
    assert not await redis.exists(no_blocks_key(b))
    await messages.send_text(text(a, b, 2), ORIGIN, now=1)
    # the blocked send took no pts of b's; the block itself is a state event, no pts either
    assert [t for _, t in await log_of(db, b)] == ["new_message"]
    assert (
        await db.pool.fetchval("SELECT event_type FROM user_state_events WHERE user_id = $1", b)
        == "peer_blocked"
    )


async def test_a_stale_mark_never_delivers_to_a_blocker(services: Any, db: Any, redis: Any) -> None:
    from telesrv.store.counters import no_blocks_key

    messages, _, _ = services
    a, b = new_user(), new_user()
    await db.pool.execute(
        "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)", b, a
    )
    await redis.set(no_blocks_key(b), 1)  # wrong on purpose: a race left it behind
    await messages.send_text(text(a, b, 1), ORIGIN, now=1)
    # the transaction's own check wins: nothing for b but the unavoidable filler
    assert [t for _, t in await log_of(db, b)] == ["noop"]
    assert await dialog_list_store.get_peer_dialogs(db.pool, b, [a]) == []


async def test_sides_without_marks_are_read_together_and_marked(
    services: Any, db: Any, redis: Any
) -> None:
    from telesrv.store.counters import NO_BLOCKS_TTL, no_blocks_key

    messages, _, _ = services
    a, b, c, d = new_user(), new_user(), new_user(), new_user()
    # c blocks someone else: c still gets a's message, but no "blocks nobody" mark
    await db.pool.execute(
        "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)", c, d
    )
    await messages.send_text(text(a, b, 1), ORIGIN, now=1)
    await messages.send_text(text(a, c, 2), ORIGIN, now=1)
    for marked in (a, b):
        assert 0 < await redis.ttl(no_blocks_key(marked)) <= NO_BLOCKS_TTL
    assert not await redis.exists(no_blocks_key(c))
    assert await log_of(db, a) == [(1, "new_message"), (2, "new_message")]
    assert await log_of(db, b) == [(1, "new_message")]
    assert await log_of(db, c) == [(1, "new_message")]


async def test_counters_lost_with_the_marks_go_on_from_the_log(
    services: Any, db: Any, redis: Any
) -> None:
    from telesrv.store.counters import box_id_key, no_blocks_key, pts_key

    messages, _, _ = services
    a, b = new_user(), new_user()
    await messages.send_text(text(a, b, 1), ORIGIN, now=1)
    # Redis lost everything of both (a restart): the floors come with the block check
    await redis.delete(*(k(u) for u in (a, b) for k in (pts_key, box_id_key, no_blocks_key)))
    second = await messages.send_text(text(a, b, 2), ORIGIN, now=1)
    assert (second.pts, second.message.box_id) == (2, 2)
    # only the marks ran out: the floors read with them never lower a counter
    await redis.delete(no_blocks_key(a), no_blocks_key(b))
    third = await messages.send_text(text(b, a, 3), ORIGIN, now=1)
    assert (third.pts, third.message.box_id) == (3, 3)
    for user in (a, b):
        assert [pts for pts, _ in await log_of(db, user)] == [1, 2, 3]


async def test_an_unmarked_sender_who_blocked_the_recipient_leaves_both_logs_dense(
    services: Any, db: Any, redis: Any
) -> None:
    from telesrv.services.errors import YouBlockedUser
    from telesrv.store.counters import no_blocks_key

    messages, _, _ = services
    a, b, c = new_user(), new_user(), new_user()
    await messages.send_text(text(c, b, 1), ORIGIN, now=1)  # b has its mark
    await db.pool.execute(
        "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)", a, b
    )
    assert not await redis.exists(no_blocks_key(a))
    with pytest.raises(YouBlockedUser):
        await messages.send_text(text(a, b, 2), ORIGIN, now=1)
    # b's pts was taken under its mark before a's block was read: it is filled
    assert await log_of(db, b) == [(1, "new_message"), (2, "noop")]
    assert await log_of(db, a) == []
    assert not await redis.exists(no_blocks_key(a))


async def block_committed_during(
    monkeypatch: Any, db: Any, counters: Counters, owner: int, blocked: int
) -> None:
    """Commit owner's block of blocked (and run the hooks that drop owner's mark) right
    after the next send's unguarded_facts has read contact_blocks, before its Redis
    round trip: the race between reading "blocks nobody" and marking it."""
    from telesrv.services.update_log import UpdateLogEvents
    from telesrv.store import counters as counters_store

    real = counters_store.unguarded_facts
    events = UpdateLogEvents(counters)

    async def facts_then_block(*args: Any, **kw: Any) -> Any:
        facts = await real(*args, **kw)
        monkeypatch.setattr(counters_store, "unguarded_facts", real)
        async with db.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)",
                owner,
                blocked,
            )
            await events.block_changed(conn, owner, blocked, True, None)
        await events.blocks_committed(owner)
        return facts

    monkeypatch.setattr(counters_store, "unguarded_facts", facts_then_block)


async def test_a_block_committed_while_a_send_marks_its_sender_is_not_masked(
    services: Any, db: Any, monkeypatch: Any
) -> None:
    from telesrv.services.errors import YouBlockedUser

    messages, _, counters = services
    a, b = new_user(), new_user()
    await block_committed_during(monkeypatch, db, counters, a, b)
    # a's send read "a blocks nobody" before the block: it may still go through
    await messages.send_text(text(a, b, 1), ORIGIN, now=1)
    # but the mark it set must not outlive the block's forget: the next send is refused
    with pytest.raises(YouBlockedUser):
        await messages.send_text(text(a, b, 2), ORIGIN, now=1)
    for user in (a, b):  # the refused send's pts of b's is filled
        assert [pts for pts, _ in await log_of(db, user)] == list(range(1, 3 if user == b else 2))


async def test_a_block_committed_while_a_send_marks_its_recipient_is_not_masked(
    services: Any, db: Any, redis: Any, monkeypatch: Any
) -> None:
    from telesrv.store.counters import no_blocks_key

    messages, _, counters = services
    a, b = new_user(), new_user()
    await block_committed_during(monkeypatch, db, counters, b, a)
    await messages.send_text(text(a, b, 1), ORIGIN, now=1)
    # the transaction's own check caught the first send: only the filler for b
    assert await log_of(db, b) == [(1, "noop")]
    # b blocks a now: no mark of b's may be left to vouch that b blocks nobody
    assert not await redis.exists(no_blocks_key(b))
    await messages.send_text(text(a, b, 2), ORIGIN, now=1)
    # the second send read the block first and took no pts of b's at all
    assert await log_of(db, b) == [(1, "noop")]


async def test_a_client_ahead_of_the_log_is_sent_back(services: Any) -> None:
    messages, updates, _ = services
    a, b = new_user(), new_user()
    await messages.send_text(text(a, b, 1), ORIGIN, now=1)
    assert (await updates.difference(b, 1)).kind == "empty"
    ahead = await updates.difference(b, 50)
    assert (ahead.kind, ahead.pts) == ("too_long", 1)


# -- paging stable under equal dates, Telegram's offset window, byte budget ---------------


async def history_ids(history: History, a: int, b: int, **kw: Any) -> list[int]:
    args = dict(offset_id=0, offset_date=0, add_offset=0, limit=10, max_id=0, min_id=0)
    args.update(kw)
    got, _ = await history.history(a, b, **args)
    return [m.box_id for m in got]


async def test_paging_by_id_keeps_messages_that_share_the_boundary_second(
    services: Any, history: History
) -> None:
    messages, _, _ = services
    a, b = new_user(), new_user()
    for i in range(35):
        await messages.send_text(text(a, b, i, f"m{i}"), ORIGIN, now=500)  # one second
    # Newest first, as Telethon pages: offset_id and offset_date of the last message.
    seen: list[int] = []
    offset_id = offset_date = 0
    while page := await history_ids(
        history, a, b, offset_id=offset_id, offset_date=offset_date, limit=10
    ):
        seen += page
        offset_id, offset_date = page[-1], 500
    assert seen == list(range(35, 0, -1))
    # Oldest first, as Telethon's reverse=True: offset_id = last + 1, add_offset = -limit.
    seen, offset_id, offset_date = [], 1, 0
    while page := await history_ids(
        history, a, b, offset_id=offset_id, offset_date=offset_date, add_offset=-10, limit=10
    ):
        assert page == sorted(page, reverse=True)
        seen += reversed(page)
        offset_id, offset_date = seen[-1] + 1, 500
    assert seen == list(range(1, 36))


async def test_negative_add_offset_without_offset_id_is_the_newest_page(
    services: Any, history: History
) -> None:
    messages, _, _ = services
    a, b = new_user(), new_user()
    for i in range(30):
        await messages.send_text(text(a, b, i, f"m{i}"), ORIGIN, now=100 + i)
    # Nothing is newer than the newest message: the window [-5, 15) keeps its newest part.
    assert await history_ids(history, a, b, add_offset=-5, limit=20) == list(range(30, 15, -1))
    assert await history_ids(history, a, b, add_offset=-5, limit=5) == []
    # offset_date alone is a position too; the window reaches above it.
    assert await history_ids(history, a, b, offset_date=110, add_offset=-2, limit=4) == [
        12,
        11,
        10,
        9,
    ]
    # A window end below the farthest newer message: its part next to the boundary.
    assert await history_ids(history, a, b, offset_id=10, add_offset=-5, limit=3) == [
        14,
        13,
        12,
    ]


BODY = "x" * 1000
BODY_SIZE = len(BODY) + messages_store.MESSAGE_OVERHEAD_BYTES


async def budget_chat(
    parts: Parts, monkeypatch: pytest.MonkeyPatch, budget: int, n: int = 8
) -> tuple[MessageService, History, int, int]:
    messages, history = parts.messages, parts.history
    monkeypatch.setattr(history, "_answer_bytes", budget)
    monkeypatch.setattr(history, "_by_id_bytes", budget)
    a, b = new_user(), new_user()
    for i in range(n):
        await messages.send_text(text(a, b, i, BODY), ORIGIN, now=100)
    return messages, history, a, b


@pytest.mark.parametrize("budget, fits", [(3 * BODY_SIZE, 3), (3 * BODY_SIZE - 1, 2), (1, 1)])
async def test_a_history_page_is_cut_to_the_byte_budget(
    parts: Parts, monkeypatch: pytest.MonkeyPatch, budget: int, fits: int
) -> None:
    messages, history, a, b = await budget_chat(parts, monkeypatch, budget)
    page, count = await history.history(
        a, b, offset_id=0, offset_date=0, add_offset=0, limit=100, max_id=0, min_id=0
    )
    assert [m.box_id for m in page] == list(range(8, 8 - fits, -1)) and count == 8
    assert messages_store.box_size(page[0]) == BODY_SIZE
    # Oldest first (negative add_offset) a cut keeps the messages next to the offset.
    assert await history_ids(history, a, b, offset_id=2, add_offset=-5, limit=5) == list(
        range(1 + fits, 1, -1)
    )
    # Around a message: the newer part and the older part share one budget.
    around = await history_ids(history, a, b, offset_id=5, add_offset=-2, limit=4)
    # (the newer part is read from the offset up, so a cut of it keeps message 5 first)
    assert around == ([6, 5, 4, 3][:fits] if fits > 1 else [5])
    # A client paging on by ids still gets every message.
    seen: list[int] = []
    offset_id = 0
    while page_ids := await history_ids(history, a, b, offset_id=offset_id, limit=100):
        seen += page_ids
        offset_id = page_ids[-1]
    assert seen == list(range(8, 0, -1))


@pytest.mark.parametrize("budget, fits", [(3 * BODY_SIZE, 3), (3 * BODY_SIZE - 1, 2)])
async def test_messages_by_id_and_dialog_tops_stop_at_the_byte_budget(
    parts: Parts, monkeypatch: pytest.MonkeyPatch, budget: int, fits: int
) -> None:
    messages, history, a, b = await budget_chat(parts, monkeypatch, budget, n=5)
    got = await history.messages_by_id(a, [5, 1, 4, 2, 3, 1])
    assert [m.box_id for m in got] == [5, 1, 4, 2, 3][:fits]
    others = [new_user() for _ in range(4)]
    for i, peer in enumerate(others):
        await messages.send_text(text(a, peer, 100 + i, BODY), ORIGIN, now=200 + i)
    # The listing that serves messages.getDialogs.
    listing = parts.dialogs
    monkeypatch.setattr(listing, "_answer_bytes", budget)
    page = await listing.dialogs(
        a,
        folder_id=None,
        exclude_pinned=False,
        offset_date=None,
        offset_id=None,
        offset_peer=None,
        limit=10,
        now=300,
    )
    assert len(page.rows) == 5  # every dialog is listed; only the messages are cut
    assert [m.box_id for m in page.tops] == [d.top_message for d in page.rows][:fits]


async def test_read_receipt_when_the_sender_deleted_the_newest_read_message(
    services: Any, db: Any, read_receipts: ReadReceipts, parts: Parts
) -> None:
    messages, _, _ = services
    deletes = parts.deletes
    a, b, c = new_user(), new_user(), new_user()
    await messages.send_text(text(a, b, 1), ORIGIN, now=1)  # a's box 1
    await messages.send_text(text(a, c, 2), ORIGIN, now=1)  # a's box 2: another chat
    await messages.send_text(text(a, b, 3), ORIGIN, now=1)  # a's box 3
    await messages.send_text(text(a, b, 4), ORIGIN, now=1)  # a's box 4
    await deletes.delete_messages(a, [4], False, ORIGIN, 2)  # a deletes it for itself only
    outcome = await read_receipts.read_history(b, a, 0, ORIGIN, now=3)
    assert outcome is not None
    sender = (await dialog_list_store.get_peer_dialogs(db.pool, a, [b]))[0]
    assert sender.read_outbox_max_id == 3  # a's highest own box at or below what b read
    assert (await log_of(db, a))[-1] == (6, "read_history_outbox")
    event = await db.pool.fetchval(
        "SELECT max_id FROM user_update_events WHERE user_id = $1 AND pts = 6", a
    )
    assert event == 3
    # The newest read message deleted again, nothing of a's newer than the watermark
    # left: it does not move, and a's pts becomes a noop.
    await messages.send_text(text(a, b, 5), ORIGIN, now=5)  # a's box 5
    await deletes.delete_messages(a, [5], False, ORIGIN, 6)
    await read_receipts.read_history(b, a, 0, ORIGIN, now=7)
    assert (await dialog_list_store.get_peer_dialogs(db.pool, a, [b]))[0].read_outbox_max_id == 3
    assert (await log_of(db, a))[-1][1] == "noop"
