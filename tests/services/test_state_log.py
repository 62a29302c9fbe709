"""Retries that never touch the recipient, and the state log (updates with no pts):
dense ids, rollback, device cursors. Real PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from telesrv.parts import Parts
from telesrv.services.errors import RandomIdDuplicate
from telesrv.services.messages import MessageService, Origin, OutgoingText
from telesrv.services.sends import SendBatch, SendKind
from telesrv.services.update_log import UpdateLogEvents
from telesrv.store import state_log
from telesrv.store.counters import Counters

ORIGIN = Origin(auth_key_id=11, session_id=22)
_ids = itertools.count(7_000_000)


def new_user() -> int:
    return next(_ids)


@pytest.fixture
def counters(parts: Parts) -> Counters:
    return parts.counters


@pytest.fixture
def messages(parts: Parts) -> MessageService:
    return parts.messages


def text(sender: int, recipient: int, random_id: int) -> OutgoingText:
    return OutgoingText(sender=sender, recipient=recipient, random_id=random_id, text="hi")


async def pts_log(db: Any, user: int) -> list[tuple[Any, ...]]:
    rows = await db.pool.fetch(
        "SELECT pts, pts_count, event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts",
        user,
    )
    return [tuple(r.values()) for r in rows]


async def test_a_retry_storm_leaves_the_recipient_untouched(
    messages: MessageService, counters: Counters, db: Any
) -> None:
    a, b = new_user(), new_user()
    first = [await messages.send_text(text(a, b, rid), ORIGIN, now=10) for rid in range(50)]
    recipient_before, sender_before = await pts_log(db, b), await pts_log(db, a)
    outbox_before = await db.pool.fetchval(
        "SELECT count(*) FROM dispatch_outbox WHERE target_user_id = $1", b
    )
    # Every message re-sent, one after another and all at once.
    again = [await messages.send_text(text(a, b, rid), ORIGIN, now=11) for rid in range(50)]
    again += await asyncio.gather(
        *(messages.send_text(text(a, b, rid), ORIGIN, now=12) for rid in range(50))
    )
    assert all(s.duplicate for s in again)
    assert [s.message.box_id for s in again] == [s.message.box_id for s in first] * 2
    assert [s.pts for s in again] == [s.pts for s in first] * 2
    assert await pts_log(db, b) == recipient_before  # not even a noop
    assert await pts_log(db, a) == sender_before
    assert (
        await db.pool.fetchval("SELECT count(*) FROM dispatch_outbox WHERE target_user_id = $1", b)
        == outbox_before
    )
    # The counters did not move either: the next real send takes the next pts.
    nxt = await messages.send_text(text(b, a, 1), ORIGIN, now=13)
    assert nxt.pts == len(recipient_before) + 1


async def test_retries_racing_the_original_send_leave_no_noop(
    messages: MessageService, db: Any
) -> None:
    a, b = new_user(), new_user()
    results = await asyncio.gather(
        *(messages.send_text(text(a, b, 99), ORIGIN, now=10) for _ in range(20))
    )
    assert sum(not r.duplicate for r in results) == 1
    assert len({(r.message.box_id, r.pts) for r in results}) == 1
    assert await pts_log(db, b) == [(1, 1, "new_message")]
    assert await pts_log(db, a) == [(1, 1, "new_message")]


async def test_a_claim_lost_with_redis_still_gives_one_message_and_a_dense_log(
    messages: MessageService, parts: Parts, db: Any, redis: Any
) -> None:
    from telesrv.store.counters import send_claim_key

    a, b = new_user(), new_user()
    await messages.send_text(text(a, b, 5), ORIGIN, now=10)
    # Redis forgot the claim and the retry's probe raced the commit: the send function
    # is the last line (a noop keeps the log dense).
    await redis.delete(send_claim_key(a, 5))
    batch = SendBatch(SendKind.TEXT, [text(a, b, 5)])
    [(_, retry)] = await parts.sends.send(batch, ORIGIN, 11, rate_checked=True)
    assert retry.duplicate
    assert [t for _, _, t in await pts_log(db, b)] == ["new_message", "noop"]


async def test_a_retry_of_a_deleted_message_answers_random_id_duplicate(
    messages: MessageService, parts: Parts, db: Any
) -> None:
    a, b = new_user(), new_user()
    sent = await messages.send_text(text(a, b, 7), ORIGIN, now=10)
    deletes = parts.deletes
    await deletes.delete_messages(a, [sent.message.box_id], False, ORIGIN, now=11)
    recipient_before = await pts_log(db, b)
    with pytest.raises(RandomIdDuplicate):
        await messages.send_text(text(a, b, 7), ORIGIN, now=12)
    assert await pts_log(db, b) == recipient_before


async def test_state_events_take_no_pts_and_a_rollback_leaves_no_hole(
    db: Any, counters: Counters
) -> None:
    owner, peer = new_user(), new_user()
    events = UpdateLogEvents(counters)
    async with db.pool.acquire() as conn, conn.transaction():
        await events.contacts_changed(conn, owner, ORIGIN)
    with pytest.raises(RuntimeError):
        async with db.pool.acquire() as conn, conn.transaction():
            await events.block_changed(conn, owner, peer, True, None)
            raise RuntimeError("the block failed after its event was written")
    async with db.pool.acquire() as conn, conn.transaction():
        await events.block_changed(conn, owner, peer, False, None)
    rows = await state_log.events_after(db.pool, owner, 0, 10)
    assert [(i, e.event_type, e.payload) for i, e in rows] == [
        (1, "contacts_reset", None),
        (2, "peer_blocked", {"blocked": False}),
    ]
    assert await pts_log(db, owner) == []
    outbox = await db.pool.fetch(
        "SELECT pts, state_id, exclude_auth_key_id, exclude_session_id FROM dispatch_outbox"
        " WHERE target_user_id = $1 ORDER BY state_id",
        owner,
    )
    assert [tuple(r.values()) for r in outbox] == [(None, 1, 11, 22), (None, 2, None, None)]


async def test_concurrent_state_events_of_one_user_get_dense_ids(
    db: Any, counters: Counters
) -> None:
    owner = new_user()
    events = UpdateLogEvents(counters)

    async def change() -> None:
        async with db.pool.acquire() as conn, conn.transaction():
            await events.contacts_changed(conn, owner, None)

    await asyncio.gather(*(change() for _ in range(20)))
    rows = await state_log.events_after(db.pool, owner, 0, 100)
    assert [i for i, _ in rows] == list(range(1, 21))
    assert await state_log.head(db.pool, owner) == 20


async def test_device_cursor_in_the_state_log(db: Any, counters: Counters, parts: Parts) -> None:
    owner, device = new_user(), 7_123_456_789
    from telesrv.store import auth_keys

    assert await auth_keys.save_auth_key(db.pool, device, b"k" * 256)
    updates = parts.updates
    events = UpdateLogEvents(counters)
    for _ in range(3):
        async with db.pool.acquire() as conn, conn.transaction():
            await events.contacts_changed(conn, owner, None)
    # A device that never asked for its state starts at the head.
    fresh = await updates.state_difference(device, owner)
    assert (fresh.events, fresh.cursor, fresh.more) == ([], 3, False)
    await updates.save_state_cursor(device, owner, 1)
    for _ in range(2):
        async with db.pool.acquire() as conn, conn.transaction():
            await events.contacts_changed(conn, owner, None)
    # At the limit: everything, no more; past it: a slice and more.
    at = await updates.state_difference(device, owner, limit=4)
    assert (len(at.events), at.cursor, at.more) == (4, 5, False)
    past = await updates.state_difference(device, owner, limit=3)
    assert (len(past.events), past.cursor, past.more) == (3, 4, True)
    await updates.save_state_cursor(device, owner, 5)
    await updates.save_state_cursor(device, owner, 2)  # an older answer finishing late
    assert await state_log.device_cursor(db.pool, device, owner) == 5


async def test_the_state_leaves_out_a_write_still_on_its_way(
    db: Any, parts: Parts, messages: MessageService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A send's pts is in the log before its sender has the send's answer. A state
    # answer (getState, or the pts of a read that changed nothing) that included it
    # would send the device for the difference, which would give it its own message
    # back as a new one before the answer that names it as sent.
    a, b = new_user(), new_user()
    for n in range(3):
        await messages.send_text(text(a, b, n + 1), ORIGIN, now=1000)
    on_its_way: dict[int, int] = {}
    updates = parts.updates
    monkeypatch.setattr(updates, "_in_flight", on_its_way.get)
    assert (await updates.state(a, 1000)).pts == 3
    on_its_way[a] = 3  # the third send, committed, not yet answered
    assert (await updates.state(a, 1000)).pts == 2
    on_its_way[a] = 9  # taken past the committed log: nothing to leave out
    assert (await updates.state(a, 1000)).pts == 3
    assert (await updates.state(b, 1000)).pts == 3  # another user's write is theirs
