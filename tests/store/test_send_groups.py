"""Group commit of lone sends (store/send_groups.py) on real PostgreSQL: sends that queue
while one is written commit together, each failing alone; a duplicate random_id in one
group is one message; a send that finds nothing in flight is written alone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from telesrv.store import refusals
from telesrv.store.db import Db
from telesrv.store.messages import SendResult
from telesrv.store.send_groups import GROUP_SIZES, SendGroups, send_bytes

from .test_send_function import boxes, events, params, users


def group_sizes() -> list[float]:
    """The group-size histogram's bucket counts, cumulative, by upper bound."""
    [metric] = GROUP_SIZES.collect()
    return [s.value for s in metric.samples if s.name.endswith("_bucket")]


async def write_all(groups: SendGroups, sends: list[Any]) -> list[SendResult | BaseException]:
    return await asyncio.gather(*(groups.write(p) for p in sends), return_exceptions=True)


async def test_a_send_that_finds_nothing_in_flight_is_written_alone(db: Db) -> None:
    groups = SendGroups(db)
    sender, recipient = users()
    before = group_sizes()
    result = await groups.write(params(sender, recipient, 1))
    assert not result.duplicate and result.sender_box == 1
    after = group_sizes()
    assert after[0] == before[0] + 1  # the bucket of groups of one


async def test_a_group_commits_together_and_a_refused_send_fails_alone(db: Db) -> None:
    groups = SendGroups(db)
    pairs = [users() for _ in range(3)]
    sends = [params(s, r, 1) for s, r in pairs]
    # The second replies to a message that is not in its chat: refused by the send
    # function, inside the group's statement.
    sends[1] = params(*pairs[1], 1, reply_to=99)
    before = group_sizes()
    outcomes = await write_all(groups, sends)
    assert isinstance(outcomes[1], refusals.ReplyMessageIdInvalid)
    for (sender, recipient), outcome in zip(pairs[::2], outcomes[::2], strict=True):
        assert isinstance(outcome, SendResult) and not outcome.duplicate
        assert [b[0] for b in await boxes(db, sender)] == [1]
        assert [e[0] for e in await events(db, recipient)] == [1]
    assert await boxes(db, pairs[1][0]) == [] and await events(db, pairs[1][1]) == []
    after = group_sizes()
    assert after[0] == before[0]  # none of them went alone: one group of three
    assert after[2] == before[2] + 1


async def test_one_random_id_twice_in_a_group_is_one_message(db: Db) -> None:
    groups = SendGroups(db)
    sender, recipient = users()
    first = params(sender, recipient, 1)
    again = params(sender, recipient, 2, random_id=first.random_id)
    outcomes = await write_all(groups, [first, again])
    assert isinstance(outcomes[0], SendResult) and not outcomes[0].duplicate
    assert isinstance(outcomes[1], SendResult) and outcomes[1].duplicate
    assert outcomes[1].sender_box == outcomes[0].sender_box
    assert [b[0] for b in await boxes(db, sender)] == [1]


@pytest.mark.parametrize(("max_sends", "groups_of_one", "groups_up_to_two"), [(1, 2, 2), (2, 1, 2)])
async def test_a_group_holds_at_most_its_bound_of_sends(
    db: Db, max_sends: int, groups_of_one: int, groups_up_to_two: int
) -> None:
    # max_sends + 1 sends queued at once: a group at the bound, then the one past it.
    groups = SendGroups(db, max_sends=max_sends)
    pairs = [users() for _ in range(max_sends + 1)]
    before = group_sizes()
    outcomes = await write_all(groups, [params(s, r, 1) for s, r in pairs])
    assert all(isinstance(o, SendResult) for o in outcomes)
    after = group_sizes()  # cumulative buckets: sizes <= 1, <= 2, ...
    assert after[0] - before[0] == groups_of_one
    assert after[1] - before[1] == groups_up_to_two


async def test_a_group_holds_at_most_its_bound_of_bytes(db: Db) -> None:
    pairs = [users() for _ in range(3)]
    sends = [params(s, r, 1, message="x" * 1000) for s, r in pairs]
    # Room for two of them: the third goes in a group of its own.
    groups = SendGroups(db, max_bytes=2 * send_bytes(sends[0]))
    before = group_sizes()
    outcomes = await write_all(groups, sends)
    assert all(isinstance(o, SendResult) for o in outcomes)
    after = group_sizes()
    assert (after[0] - before[0], after[1] - before[1]) == (1, 2)  # one alone, one of two


async def test_a_group_that_fails_as_a_whole_writes_its_sends_one_by_one(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    from telesrv.store import messages as messages_store
    from telesrv.store import send_halves

    async def broken(conn: Any, group: Any) -> Any:
        raise RuntimeError("the group's statement failed")

    # The group's writer on plain PostgreSQL, and on Citus (tests/citus runs this too).
    monkeypatch.setattr(messages_store, "send_group_txn", broken)
    monkeypatch.setattr(send_halves, "send_units_halves_txn", broken)
    groups = SendGroups(db)
    pairs = [users() for _ in range(3)]
    sends = [params(s, r, 1) for s, r in pairs]
    sends[2] = params(*pairs[2], 1, reply_to=99)
    outcomes = await write_all(groups, sends)
    assert [type(o).__name__ for o in outcomes] == [
        "SendResult",
        "SendResult",
        "ReplyMessageIdInvalid",
    ]
    assert [b[0] for b in await boxes(db, pairs[0][0])] == [1]


async def test_a_caller_cancelled_while_queued_still_has_its_send_written(db: Db) -> None:
    groups = SendGroups(db)
    first_pair, second_pair = users(), users()
    first = asyncio.ensure_future(groups.write(params(*first_pair, 1)))
    second = asyncio.ensure_future(groups.write(params(*second_pair, 1)))
    await asyncio.sleep(0)  # both queued
    second.cancel()
    await first
    with pytest.raises(asyncio.CancelledError):
        await second
    # Written all the same: the caller's pts are settled by what the group did.
    assert [b[0] for b in await boxes(db, second_pair[0])] == [1]


async def test_a_group_with_a_retry_a_block_and_a_bad_reply_commits_the_rest(db: Db) -> None:
    """One group of five: a send, a retry of a send committed before (same random_id), a
    send to a recipient who has blocked the sender since the caller looked, a reply to
    a message not in the chat, and a send. Each gets its own answer; the others commit."""
    groups = SendGroups(db)
    pairs = [users() for _ in range(5)]
    retried, blocked = pairs[1], pairs[2]
    original = await groups.write(params(*retried, 1))
    await db.pool.execute(
        "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)",
        blocked[1],
        blocked[0],
    )
    sends = [
        params(*pairs[0], 1),
        # The retry took pts and box 2 on both sides before it found the original.
        params(*retried, 2, random_id=params(*retried, 1).random_id),
        params(*blocked, 1),
        params(*pairs[3], 1, reply_to=99),
        params(*pairs[4], 1),
    ]
    before = group_sizes()
    outcomes = await write_all(groups, sends)
    after = group_sizes()
    assert (after[3] - before[3], after[2] - before[2]) == (1, 0)  # one group of five

    for i in (0, 4):
        outcome = outcomes[i]
        assert isinstance(outcome, SendResult) and not outcome.duplicate
        assert (outcome.sender_box, outcome.recipient_box) == (1, 1)
        assert [b[0] for b in await boxes(db, pairs[i][0])] == [1]
        assert [b[0] for b in await boxes(db, pairs[i][1])] == [1]

    # The retry: answered with the original; its own pts are given back as noops.
    retry = outcomes[1]
    assert isinstance(retry, SendResult) and retry.duplicate
    assert (retry.message_id, retry.sender_box) == (original.message_id, original.sender_box)
    assert [b[0] for b in await boxes(db, retried[0])] == [1]
    for user in retried:
        assert [(e[0], e[2]) for e in await events(db, user)] == [
            (1, "new_message"),
            (2, "noop"),
        ]

    # The block: the sender's copy only; the recipient's pts is a noop.
    to_blocker = outcomes[2]
    assert isinstance(to_blocker, SendResult) and not to_blocker.duplicate
    assert to_blocker.recipient_box is None and to_blocker.recipient_pts is None
    assert [b[0] for b in await boxes(db, blocked[0])] == [1]
    assert await boxes(db, blocked[1]) == []
    assert [e[2] for e in await events(db, blocked[1])] == ["noop"]

    # The bad reply: its own refusal, nothing written (its pts are the caller's to fill).
    assert isinstance(outcomes[3], refusals.ReplyMessageIdInvalid)
    assert await boxes(db, pairs[3][0]) == [] and await events(db, pairs[3][1]) == []


def unit(sender: int, recipient: int, first: int, count: int, **changes: Any) -> list[Any]:
    """An album of ``count`` sends (pts and box ids from ``first`` on both sides)."""
    return [
        params(sender, recipient, first + k, grouped_id=sender, **changes) for k in range(count)
    ]


async def test_albums_go_in_a_group_all_or_none(db: Db) -> None:
    """A group of a send, an album, an album one of whose items replies to a message not
    in the chat, and a send: the refused album writes nothing and gets its refusal; the
    rest commit, in one transaction."""
    groups = SendGroups(db)
    pairs = [users() for _ in range(4)]
    bad = unit(*pairs[2], 1, 2)
    bad[1] = params(*pairs[2], 2, grouped_id=pairs[2][0], reply_to=99)
    before = group_sizes()
    outcomes = await asyncio.gather(
        groups.write_unit("send_message", [params(*pairs[0], 1)]),
        groups.write_unit("send_album", unit(*pairs[1], 1, 3)),
        groups.write_unit("send_album", bad),
        groups.write_unit("send_message", [params(*pairs[3], 1)]),
        return_exceptions=True,
    )
    after = group_sizes()
    assert (after[3] - before[3], after[2] - before[2]) == (1, 0)  # 7 sends in one group
    assert isinstance(outcomes[2], refusals.ReplyMessageIdInvalid)
    assert await boxes(db, pairs[2][0]) == [] and await events(db, pairs[2][1]) == []
    for i, count in ((0, 1), (1, 3), (3, 1)):
        results = outcomes[i]
        assert isinstance(results, list) and len(results) == count
        assert all(not r.duplicate for r in results)
        for user in pairs[i]:
            assert [b[0] for b in await boxes(db, user)] == list(range(1, count + 1))
            assert [e[0] for e in await events(db, user)] == list(range(1, count + 1))


@pytest.mark.parametrize(("max_sends", "expected"), [(4, (1, 1, 2)), (3, (2, 2, 3))])
async def test_a_group_bounds_sends_not_units(
    db: Db, max_sends: int, expected: tuple[int, int, int]
) -> None:
    """Behind a send in flight, an album of three and a send: one group of four sends
    within a bound of four; past it, the album alone (a unit is never split) and the
    send in a group of its own."""
    groups = SendGroups(db, max_sends=max_sends)
    pairs = [users() for _ in range(3)]
    before = group_sizes()
    outcomes = await asyncio.gather(
        groups.write_unit("send_message", [params(*pairs[0], 1)]),
        groups.write_unit("send_album", unit(*pairs[1], 1, 3)),
        groups.write_unit("send_message", [params(*pairs[2], 1)]),
    )
    after = group_sizes()
    assert [len(o) for o in outcomes] == [1, 3, 1]
    # Cumulative buckets: groups of up to 1, 2 and 4 sends.
    assert tuple(after[i] - before[i] for i in range(3)) == expected
