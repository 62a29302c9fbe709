"""Sends through the server's pipeline with group commit on (the default): under a
burst, groups form, and every owner's pts stay dense with every message written once."""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Any

from telesrv.parts import Parts
from telesrv.services.messages import Origin, OutgoingText
from telesrv.store.send_groups import GROUP_SIZES

ORIGIN = Origin(auth_key_id=31, session_id=32)
_ids = itertools.count(6_100_000, 100)


def groups_of_more_than_one() -> float:
    [metric] = GROUP_SIZES.collect()
    buckets = {s.labels["le"]: s.value for s in metric.samples if s.name.endswith("_bucket")}
    return buckets["+Inf"] - buckets["1.0"]


async def test_a_thousand_concurrent_sends_from_fifty_users_keep_pts_dense(
    parts: Parts, db: Any
) -> None:
    base = next(_ids)
    users = [base + i for i in range(50)]
    rng = random.Random(7)
    sends = []
    for k in range(1000):
        sender = users[k % 50]
        recipient = rng.choice([u for u in users if u != sender])
        sends.append(OutgoingText(sender, recipient, random_id=k + 1, text=f"m{k}"))
    grouped_before = groups_of_more_than_one()
    sent = await asyncio.gather(*(parts.messages.send_text(m, ORIGIN, now=1) for m in sends))
    assert all(not s.duplicate for s in sent)
    assert groups_of_more_than_one() > grouped_before  # the burst was written in groups

    rows = await db.pool.fetch(
        "SELECT user_id, pts, event_type FROM user_update_events"
        " WHERE user_id = ANY($1::bigint[]) ORDER BY user_id, pts",
        users,
    )
    logs: dict[int, list[tuple[int, str]]] = {u: [] for u in users}
    for r in rows:
        logs[r["user_id"]].append((r["pts"], r["event_type"]))
    for user, log in logs.items():
        assert [p for p, _ in log] == list(range(1, len(log) + 1)), user
        sent_by = sum(1 for m in sends if m.sender == user)
        received = sum(1 for m in sends if m.recipient == user)
        assert [t for _, t in log].count("new_message") == sent_by + received, user
    count = await db.pool.fetchval(
        "SELECT count(*) FROM private_messages WHERE sender_user_id = ANY($1::bigint[])", users
    )
    assert count == 1000
