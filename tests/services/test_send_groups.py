"""Sends through the server's pipeline with group commit on (the default): under a
burst, groups form, and every owner's pts stay dense with every message written once."""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Any

from telesrv.parts import Parts
from telesrv.services.messages import Origin, OutgoingText, Sent
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


async def test_in_a_burst_each_failing_send_gets_its_own_error_and_the_rest_commit(
    parts: Parts, db: Any
) -> None:
    """Twenty concurrent sends, among them one to a user the sender has blocked, one
    replying to a message not in the chat, one to a user who has blocked the sender and
    one retry of a send made before: each of those is answered for itself, the others
    are written, and every owner's pts stay dense."""
    base = next(_ids)
    users = [base + i for i in range(40)]
    pairs = [(users[2 * i], users[2 * i + 1]) for i in range(20)]
    blocker, blocked_by_recipient = pairs[0], pairs[2]
    await db.pool.execute(
        "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2), ($3, $4)",
        blocker[0],
        blocker[1],
        blocked_by_recipient[1],
        blocked_by_recipient[0],
    )
    retried = pairs[3]
    earlier = await parts.messages.send_text(
        OutgoingText(*retried, random_id=77, text="before"), ORIGIN, now=1
    )
    sends = [OutgoingText(s, r, random_id=100 + k, text=f"m{k}") for k, (s, r) in enumerate(pairs)]
    sends[1] = OutgoingText(*pairs[1], random_id=101, text="reply", reply_to=12345)
    sends[3] = OutgoingText(*retried, random_id=77, text="before")
    outcomes = await asyncio.gather(
        *(parts.messages.send_text(m, ORIGIN, now=1) for m in sends), return_exceptions=True
    )
    assert type(outcomes[0]).__name__ == "YouBlockedUser"
    assert type(outcomes[1]).__name__ == "ReplyMessageIdInvalid"
    to_blocker = outcomes[2]
    assert isinstance(to_blocker, Sent) and not to_blocker.duplicate
    retry = outcomes[3]
    assert isinstance(retry, Sent) and retry.duplicate
    assert retry.message.box_id == earlier.message.box_id
    assert all(isinstance(o, Sent) and not o.duplicate for o in outcomes[4:])

    rows = await db.pool.fetch(
        "SELECT user_id, pts, event_type FROM user_update_events"
        " WHERE user_id = ANY($1::bigint[]) ORDER BY user_id, pts",
        users,
    )
    logs: dict[int, list[int]] = {u: [] for u in users}
    for r in rows:
        logs[r["user_id"]].append(r["pts"])
    for user, log in logs.items():
        assert log == list(range(1, len(log) + 1)), user
    boxes = await db.pool.fetch(
        "SELECT owner_user_id, count(*) AS n FROM message_boxes"
        " WHERE owner_user_id = ANY($1::bigint[]) GROUP BY owner_user_id",
        users,
    )
    count = {r["owner_user_id"]: r["n"] for r in boxes}
    for k, (sender, recipient) in enumerate(pairs):
        if k in (0, 1):
            assert sender not in count and recipient not in count, k
        elif k == 2:
            assert (count.get(sender), count.get(recipient)) == (1, None)
        else:  # the retry's pair holds the one earlier message
            assert (count[sender], count[recipient]) == (1, 1), k


async def test_concurrent_albums_and_texts_keep_pts_dense(parts: Parts, db: Any) -> None:
    """Albums go through the groups as units: sent at once with texts, every message is
    written once and every owner's log stays dense."""
    base = next(_ids)
    users = [base + i for i in range(20)]
    albums = [
        [
            OutgoingText(users[i], users[i + 1], random_id=10 * i + k, text=f"a{i}.{k}",
                         grouped_id=900 + i)
            for k in range(3)
        ]
        for i in range(0, 20, 2)
    ]  # fmt: skip
    texts = [
        OutgoingText(users[i], users[i - 1], random_id=7, text=f"t{i}") for i in range(1, 20, 2)
    ]
    sent_albums, _ = await asyncio.gather(
        asyncio.gather(*(parts.messages.send_album(a, ORIGIN, now=1) for a in albums)),
        asyncio.gather(*(parts.messages.send_text(t, ORIGIN, now=1) for t in texts)),
    )
    assert [len(s) for s in sent_albums] == [3] * len(albums)
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
        assert {t for _, t in log} == {"new_message"}, user
    count = await db.pool.fetchval(
        "SELECT count(*) FROM private_messages WHERE sender_user_id = ANY($1::bigint[])", users
    )
    assert count == 3 * len(albums) + len(texts)
