"""A text send's claim in Redis. A retried send after Redis lost its claims (a flush, a
restart) takes no pts when the first copy committed: the retry is answered with the
original message, neither user's pts moves and neither log gets a noop. A send whose
claim and allocation (one script on one Redis server) fail keeps another attempt's
claim, and pts handed to a send that did not check first become noops. Real
PostgreSQL and Redis."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from redis.exceptions import ResponseError

from telesrv.parts import Parts
from telesrv.services.messages import SEND_CLAIM_MS, Origin, OutgoingText
from telesrv.services.sends import SendBatch, SendKind
from telesrv.store.counters import Counters
from telesrv.store.rate_limits import send_rate_key

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


async def test_a_send_whose_script_fails_leaves_another_attempts_claim(
    parts: Parts, db: Any, redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script may have found the claim held by another attempt of the same send
    (one in flight): failing, it gives nothing back, so the retry after it still waits
    for that attempt rather than sending the message a second time."""
    if not parts.counters.claims_allocate:
        pytest.skip("a send's claim and allocation in one script need one Redis server")
    a, b = next(_ids), next(_ids)
    assert await parts.counters.claim_send(a, 9, SEND_CLAIM_MS)  # the attempt in flight
    monkeypatch.setattr(parts.sends, "send_rate_limit", 30)  # the script reads the log
    await redis.set(send_rate_key(a), "not a log")
    with pytest.raises(ResponseError):
        await parts.messages.send_text(text(a, b, 9), ORIGIN, now=1)
    assert await parts.counters.send_claimed(a, 9)
    assert (await log_of(db, a), await log_of(db, b)) == ([], [])


async def test_pts_handed_to_a_send_that_did_not_check_first_become_noops(
    parts: Parts, db: Any
) -> None:
    """Pts taken with the claim may only go to a send whose rate was checked by it and
    that has no reply to check: otherwise the send refuses them, as noops."""
    a, b = next(_ids), next(_ids)
    replying = OutgoingText(sender=a, recipient=b, random_id=1, text="re", reply_to=5)
    for msg, rate_checked in ((text(a, b, 2), False), (replying, True)):
        taken = await parts.counters.allocate([(a, 1, 1), (b, 1, 1)])
        with pytest.raises(ValueError, match="before the rate or the replies"):
            await parts.sends.send(
                SendBatch(SendKind.TEXT, [msg]), ORIGIN, 1, rate_checked=rate_checked,
                guarded=taken,
            )  # fmt: skip
    noops = [(1, "noop"), (2, "noop")]
    assert (await log_of(db, a), await log_of(db, b)) == (noops, noops)
