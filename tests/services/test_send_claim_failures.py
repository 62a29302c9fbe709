"""A text send whose Redis claim and allocation (one script on one Redis server) fail:
what stays claimed and what becomes a noop. Real PostgreSQL and Redis."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from redis.exceptions import ResponseError

from telesrv.parts import Parts
from telesrv.services.messages import SEND_CLAIM_MS, Origin, OutgoingText
from telesrv.services.sends import SendBatch, SendKind
from telesrv.store.counters import send_rate_key

ORIGIN = Origin(auth_key_id=11, session_id=22)
_ids = itertools.count(7_600_000)


async def log_of(db: Any, user: int) -> list[tuple[int, str]]:
    rows = await db.pool.fetch(
        "SELECT pts, event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts", user
    )
    return [(r["pts"], r["event_type"]) for r in rows]


def text(sender: int, recipient: int, random_id: int) -> OutgoingText:
    return OutgoingText(sender=sender, recipient=recipient, random_id=random_id, text="hello")


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
