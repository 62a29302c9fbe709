"""A retried send after Redis lost its claims (a flush, a restart) takes no pts when
the first copy committed: the retry is answered with the original message, neither
user's pts moves and neither log gets a noop. Real PostgreSQL and Redis."""

from __future__ import annotations

import itertools
from typing import Any

from telesrv.parts import Parts
from telesrv.services.messages import SEND_CLAIM_MS, Origin, OutgoingText
from telesrv.store.counters import Counters

ORIGIN = Origin(auth_key_id=11, session_id=22)
_ids = itertools.count(7_300_000)


async def log_of(db: Any, user: int) -> list[tuple[int, str]]:
    rows = await db.pool.fetch(
        "SELECT pts, event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts", user
    )
    return [(r["pts"], r["event_type"]) for r in rows]


def text(sender: int, recipient: int, random_id: int) -> OutgoingText:
    return OutgoingText(sender=sender, recipient=recipient, random_id=random_id, text="hello")


async def test_a_retry_after_a_flush_takes_no_pts(parts: Parts, db: Any, redis: Any) -> None:
    a, b = next(_ids), next(_ids)
    first = await parts.messages.send_text(text(a, b, 41), ORIGIN, now=1)
    await parts.messages.send_text(text(b, a, 42), ORIGIN, now=1)
    logs = await log_of(db, a), await log_of(db, b)
    await redis.flushall()  # every claim (and counter) is gone
    retry = await parts.messages.send_text(text(a, b, 41), ORIGIN, now=2)
    assert retry.duplicate and retry.message.box_id == first.message.box_id
    assert retry.message.message == "hello" and retry.pts == first.pts
    assert (await log_of(db, a), await log_of(db, b)) == logs
    assert all(kind == "new_message" for log in logs for _, kind in log)
    # A new send after the flush still goes through, at the next pts of each side.
    fresh = await parts.messages.send_text(text(a, b, 43), ORIGIN, now=3)
    assert not fresh.duplicate and fresh.pts == logs[0][-1][0] + 1
    assert (await log_of(db, b))[-1] == (logs[1][-1][0] + 1, "new_message")


async def test_a_retry_after_a_flush_of_many_sends_takes_no_pts(
    parts: Parts, db: Any, redis: Any
) -> None:
    a, b = next(_ids), next(_ids)
    firsts = [await parts.messages.send_text(text(a, b, r), ORIGIN, now=1) for r in range(20)]
    logs = await log_of(db, a), await log_of(db, b)
    await redis.flushall()
    retries = [await parts.messages.send_text(text(a, b, r), ORIGIN, now=2) for r in range(20)]
    assert [r.message.box_id for r in retries] == [f.message.box_id for f in firsts]
    assert all(r.duplicate for r in retries)
    assert (await log_of(db, a), await log_of(db, b)) == logs


async def test_claims_are_whole_only_a_claim_lifetime_after_they_began(
    parts: Parts, redis: Any
) -> None:
    counters: Counters = parts.counters
    user = next(_ids)
    claim = await counters.take_send_claim(user, 0, 1, SEND_CLAIM_MS)
    assert claim.claimed and not claim.whole  # this Redis has just begun keeping them
    again = await counters.take_send_claim(user, 0, 1, SEND_CLAIM_MS)
    assert not again.claimed and not again.whole
    # With a lifetime of 1 ms the claims soon cover a whole lifetime.
    whole = False
    for random_id in range(2, 100_000):
        claim = await counters.take_send_claim(user, 0, random_id, 1)
        assert claim.claimed
        if claim.whole:
            whole = True
            break
    assert whole
    await redis.flushall()  # lost: no longer whole
    claim = await counters.take_send_claim(user, 0, 1, 1)
    assert claim.claimed and not claim.whole


async def test_a_new_account_s_claims_are_whole_from_its_creation(parts: Parts, redis: Any) -> None:
    """An account made now has sent nothing, so no claim of its can have been lost: its
    first sends need no lookup of an earlier copy. A flush loses that mark too."""
    counters: Counters = parts.counters
    account = await parts.account.users.create(f"+1555{next(_ids)}", "New")
    claim = await counters.take_send_claim(account.user_id, 0, 1, SEND_CLAIM_MS)
    assert claim.claimed and claim.whole
    await redis.flushall()
    claim = await counters.take_send_claim(account.user_id, 0, 2, SEND_CLAIM_MS)
    assert claim.claimed and not claim.whole


async def test_the_new_account_mark_never_replaces_a_running_one(parts: Parts, redis: Any) -> None:
    """A mark set already (claims kept since then) stays as it is: only an account with
    no mark gets one from the epoch."""
    counters: Counters = parts.counters
    user = next(_ids)
    assert not (await counters.take_send_claim(user, 0, 1, SEND_CLAIM_MS)).whole
    await counters.new_sender(user)
    assert not (await counters.take_send_claim(user, 0, 2, SEND_CLAIM_MS)).whole
