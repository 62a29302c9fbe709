"""Reactions on private messages on real PostgreSQL and Redis: the per-user limit,
unknown reactions and messages, the author's unseen mark and its count, reading them,
the list of who reacted, concurrent reactions on one message, and the state-log events
(no pts) on both sides."""

from __future__ import annotations

import asyncio
import itertools
import json
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from delivery.test_outbox import SqlRecorder, scanned_partitions, seq_scans

from telesrv.parts import Parts
from telesrv.rpc.reactions_tl import message_reactions
from telesrv.services.errors import (
    MessageIdInvalid,
    PremiumAccountRequired,
    ReactionInvalid,
    YouBlockedUser,
)
from telesrv.services.messages import Origin, OutgoingText
from telesrv.services.reactions import (
    AVAILABLE_REACTIONS,
    MAX_REACTIONS_LIST_LIMIT,
    MAX_REACTIONS_PER_USER,
    MAX_READ_REACTIONS,
    MAX_RECENT_REACTIONS,
)
from telesrv.store import contacts as contacts_store
from telesrv.store import history as history_store
from telesrv.store import reactions as reactions_store
from telesrv.store import state_log
from telesrv.tl import types

ORIGIN = Origin(auth_key_id=11, session_id=22)
_ids = itertools.count(9_500_000)


class Env:
    def __init__(self, db: Any, parts: Parts) -> None:
        self.db = db
        self.counters = parts.counters
        self.messages = parts.messages
        self.reactions = parts.reactions
        self.deletes = parts.deletes
        self._rid = itertools.count(1)

    async def send(self, sender: int, recipient: int) -> tuple[int, int]:
        """(sender's box id, recipient's box id) of a new message."""
        msg = OutgoingText(sender=sender, recipient=recipient, random_id=next(self._rid), text="hi")
        sent = await self.messages.send_text(msg, ORIGIN, now=1000)
        [theirs] = await history_store.history_ids(
            self.db.pool, recipient, sender, above=0, below=None, limit=1, ascending=False
        )
        return sent.message.box_id, theirs

    async def reaction_events(self, user: int) -> list[dict[str, Any]]:
        return [
            e.payload
            for _, e in await state_log.events_after(self.db.pool, user, 0, 1000)
            if e.event_type == "message_reactions"
        ]

    async def pts(self, user: int) -> int:
        value = await self.db.pool.fetchval(
            "SELECT max(pts) FROM user_update_events WHERE user_id = $1", user
        )
        return int(value or 0)


@pytest.fixture
def env(db: Any, parts: Parts) -> Env:
    return Env(db, parts)


def users(n: int) -> list[int]:
    return [next(_ids) for _ in range(n)]


async def test_a_reaction_marks_the_authors_message_until_read(env: Env) -> None:
    a, b = users(2)
    mine, theirs = await env.send(a, b)
    pts_a, pts_b = await env.pts(a), await env.pts(b)
    state = await env.reactions.send_reaction(b, a, theirs, ["👍"], False, ORIGIN, 2000)
    assert [r[:3] for r in state.reactions] == [[b, "👍", False]] and not state.unread
    assert await env.reactions.unread_counts(a, [b]) == {b: 1}
    assert await env.reactions.unread_counts(b, [a]) == {}
    [seen_by_a] = await env.reaction_events(a)
    assert seen_by_a["box_id"] == mine and seen_by_a["unread"]
    [seen_by_b] = await env.reaction_events(b)
    assert seen_by_b["box_id"] == theirs and not seen_by_b["unread"]
    assert (await env.pts(a), await env.pts(b)) == (pts_a, pts_b)  # no pts taken

    # The author's own reaction does not mark anything.
    await env.reactions.send_reaction(a, b, mine, ["🔥"], False, ORIGIN, 2001)
    assert await env.reactions.unread_counts(b, [a]) == {}
    [(box, unread, summary)] = await reactions_store.summaries(env.db.pool, a, b, [mine])
    assert box == mine and unread and [r[1] for r in summary] == ["👍", "🔥"]

    boxes, count = await env.reactions.unread_reactions(
        a, b, offset_id=0, add_offset=0, limit=10, max_id=0, min_id=0
    )
    assert [m.box_id for m in boxes] == [mine] and count == 1
    assert boxes[0].reaction_unread and boxes[0].reactions is not None

    done = await env.reactions.read_reactions(a, b, 3000)
    assert (done.cleared, done.remaining) == (1, 0)
    assert await env.reactions.unread_counts(a, [b]) == {}
    assert not (await env.reaction_events(a))[-1]["unread"]
    again = await env.reactions.read_reactions(a, b, 3001)
    assert (again.cleared, again.remaining) == (0, 0)

    # A new reaction is unseen again; taking it back takes the mark with it.
    await env.reactions.send_reaction(b, a, theirs, ["🎉"], False, ORIGIN, 4000)
    assert await env.reactions.unread_counts(a, [b]) == {b: 1}
    await env.reactions.send_reaction(b, a, theirs, [], False, ORIGIN, 4001)
    assert await env.reactions.unread_counts(a, [b]) == {}
    [(_, _, summary)] = await reactions_store.summaries(env.db.pool, a, b, [mine])
    assert [r[:2] for r in summary] == [[a, "🔥"]]


async def test_limits_and_errors(env: Env) -> None:
    a, b, c = users(3)
    mine, theirs = await env.send(a, b)
    at_limit = ["👍", "🔥", "🎉"][:MAX_REACTIONS_PER_USER]
    await env.reactions.send_reaction(b, a, theirs, at_limit, False, ORIGIN, 1)
    with pytest.raises(PremiumAccountRequired):
        await env.reactions.send_reaction(
            b, a, theirs, ["👍", "🔥", "🎉", "😁"][: MAX_REACTIONS_PER_USER + 1], False, ORIGIN, 2
        )
    # The same reaction twice counts once.
    await env.reactions.send_reaction(b, a, theirs, ["👍", "👍"], False, ORIGIN, 3)
    with pytest.raises(ReactionInvalid):
        await env.reactions.send_reaction(b, a, theirs, ["🦖"], False, ORIGIN, 4)
    with pytest.raises(MessageIdInvalid):
        await env.reactions.send_reaction(b, a, theirs + 1, ["👍"], False, ORIGIN, 5)
    with pytest.raises(MessageIdInvalid):  # the message is not in the chat with c
        await env.reactions.send_reaction(b, c, theirs, ["👍"], False, ORIGIN, 6)
    with pytest.raises(MessageIdInvalid):
        await env.reactions.reaction_list(a, b, mine + 1, reaction=None, offset=None, limit=10)
    with pytest.raises(ReactionInvalid):
        await env.reactions.set_default_reaction(a, "🦖")
    await env.reactions.set_default_reaction(a, "🔥")
    assert await env.reactions.default_reaction(a) == "🔥"
    assert await env.reactions.default_reaction(b) == "👍"


async def test_the_list_of_who_reacted_pages(env: Env) -> None:
    a, b = users(2)
    mine, theirs = await env.send(a, b)
    await env.reactions.send_reaction(a, b, mine, ["👍"], False, ORIGIN, 10)
    await env.reactions.send_reaction(b, a, theirs, ["🔥"], True, ORIGIN, 11)
    count, rows, offset = await env.reactions.reaction_list(
        a, b, mine, reaction=None, offset=None, limit=1
    )
    assert count == 2 and [r.user_id for r in rows] == [a] and offset
    count, rows, offset = await env.reactions.reaction_list(
        a, b, mine, reaction=None, offset=offset, limit=MAX_REACTIONS_LIST_LIMIT
    )
    assert [(r.user_id, r.reaction, r.big) for r in rows] == [(b, "🔥", True)] and offset is None
    count, rows, _ = await env.reactions.reaction_list(
        b, a, theirs, reaction="🔥", offset=None, limit=MAX_REACTIONS_LIST_LIMIT + 5
    )
    assert count == 1 and [r.user_id for r in rows] == [b]


async def test_two_reactions_on_one_message_at_once(env: Env) -> None:
    a, b = users(2)
    mine, theirs = await env.send(a, b)
    await asyncio.gather(
        env.reactions.send_reaction(a, b, mine, ["👍"], False, ORIGIN, 20),
        env.reactions.send_reaction(b, a, theirs, ["🔥"], False, ORIGIN, 20),
    )
    [(_, unread, summary)] = await reactions_store.summaries(env.db.pool, a, b, [mine])
    assert sorted((r[0], r[1]) for r in summary) == [(a, "👍"), (b, "🔥")] and unread
    # Each side's last event carries the whole result, whichever committed last.
    for user in (a, b):
        events = await env.reaction_events(user)
        assert len(events) == 2
        assert sorted((r[0], r[1]) for r in events[-1]["reactions"]) == [(a, "👍"), (b, "🔥")]
    # The same user changing their reaction twice at once ends with one of them.
    await asyncio.gather(
        *(
            env.reactions.send_reaction(b, a, theirs, [e], False, ORIGIN, 21)
            for e in ("😁", "🎉", "👏")
        )
    )
    [(_, _, summary)] = await reactions_store.summaries(env.db.pool, a, b, [mine])
    assert len([r for r in summary if r[0] == b]) == MAX_REACTIONS_PER_USER


async def test_read_reactions_clears_a_bounded_batch_per_call(env: Env) -> None:
    a, b = users(2)
    theirs = []
    for _ in range(MAX_READ_REACTIONS + 1):
        theirs.append((await env.send(a, b))[1])
    for box in theirs:
        await env.reactions.send_reaction(b, a, box, ["👍"], False, ORIGIN, 30)
    assert await env.reactions.unread_counts(a, [b]) == {b: MAX_READ_REACTIONS + 1}
    first = await env.reactions.read_reactions(a, b, 31)
    assert (first.cleared, first.remaining) == (MAX_READ_REACTIONS, 1)
    second = await env.reactions.read_reactions(a, b, 32)
    assert (second.cleared, second.remaining) == (1, 0)


# -- query plans ----------------------------------------------------------------------


async def explained(db: Any, call: Any) -> list[dict[str, Any]]:
    """The JSON plans of every statement ``call`` runs."""
    recorder = SqlRecorder()
    await call(recorder)
    plans = []
    for sql, args in recorder.calls:
        text = await db.pool.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args)
        plans.append(json.loads(text)[0]["Plan"])
    return plans


async def test_plan_reaction_queries_stay_in_one_partition(env: Env) -> None:
    # 4000 messages among users 1..40 (none of this module's), both boxes, a reaction
    # of each side on every message and an unseen one on every ninth; then ANALYZE.
    await env.db.pool.execute(
        """
        INSERT INTO private_messages (sender_user_id, recipient_user_id, random_id, date, message)
        SELECT 1 + g % 40, 1 + (g + 1) % 40, g, 1700000000 + g, 'hi'
          FROM generate_series(1, 4000) AS g;
        INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id,
                                   message_id, out, date, reaction_unread)
        SELECT o, row_number() OVER (PARTITION BY o ORDER BY m.id)::int, p, m.sender_user_id,
               m.id, o = m.sender_user_id, m.date, o = m.sender_user_id AND m.id % 9 = 0
          FROM private_messages m,
               LATERAL (VALUES (m.sender_user_id, m.recipient_user_id),
                               (m.recipient_user_id, m.sender_user_id)) AS v(o, p)
         WHERE m.sender_user_id <= 40;
        INSERT INTO message_reactions (sender_user_id, message_id, user_id, reaction, date)
        SELECT sender_user_id, id, u, '👍', date
          FROM private_messages, LATERAL (VALUES (sender_user_id), (recipient_user_id)) AS v(u)
         WHERE sender_user_id <= 40;
        ANALYZE private_messages, message_boxes, message_reactions;
        """
    )
    m = await env.db.pool.fetchrow(
        "SELECT sender_user_id, id FROM private_messages WHERE sender_user_id = 7 LIMIT 1"
    )
    plans = {
        "counts": await explained(env.db, lambda c: reactions_store.unread_counts(c, 7, [8, 9])),
        "unread": await explained(
            env.db,
            lambda c: reactions_store.unread_box_ids(c, 7, 8, above=0, below=None, limit=20),
        ),
        "summaries": await explained(
            env.db, lambda c: reactions_store.summaries(c, 7, 8, list(range(1, 101)))
        ),
        "list": await explained(
            env.db,
            lambda c: reactions_store.reaction_list(
                c, m["sender_user_id"], m["id"], viewer=7, reaction=None, after=None, limit=10
            ),
        ),
    }
    for name, found in plans.items():
        for plan in found:
            assert len(scanned_partitions(plan, "message_boxes")) <= 1, name
            assert len(scanned_partitions(plan, "message_reactions")) <= 1, name
            assert not [s for s in seq_scans(plan) if s.startswith(("message_", "private"))], name


async def test_unread_reactions_page_like_history(env: Env) -> None:
    a, b = users(2)
    pairs = [await env.send(a, b) for _ in range(6)]
    await env.send(b, a)  # a message of b's: never in a's unread reactions
    for _, theirs in pairs[1:]:  # all but the oldest get a reaction
        await env.reactions.send_reaction(b, a, theirs, ["👍"], False, ORIGIN, 40)
    ids = [mine for mine, _ in pairs[1:]]  # oldest first

    async def page(**kw: Any) -> list[int]:
        args = {"offset_id": 0, "add_offset": 0, "limit": 10, "max_id": 0, "min_id": 0}
        args.update(kw)
        boxes, count = await env.reactions.unread_reactions(a, b, **args)
        assert count == 5
        return [m.box_id for m in boxes]

    assert await page() == ids[::-1]
    assert await page(limit=2) == ids[:2:-1]
    assert await page(offset_id=ids[3]) == ids[2::-1]  # older than the offset
    assert await page(offset_id=ids[3], add_offset=1) == ids[1::-1]
    assert await page(offset_id=ids[2], add_offset=-2, limit=3) == [ids[3], ids[2], ids[1]]
    assert await page(max_id=ids[4], min_id=ids[0]) == [ids[3], ids[2], ids[1]]


async def test_crossed_reactions_at_once_all_land(env: Env) -> None:
    a, b = users(2)
    a_sent = [await env.send(a, b) for _ in range(5)]  # (a's id, b's id)
    b_sent = [await env.send(b, a) for _ in range(5)]  # (b's id, a's id)
    await asyncio.wait_for(
        asyncio.gather(
            *(env.reactions.send_reaction(b, a, t, ["👍"], False, ORIGIN, 50) for _, t in a_sent),
            *(env.reactions.send_reaction(a, b, t, ["🔥"], False, ORIGIN, 50) for _, t in b_sent),
        ),
        timeout=60,
    )
    assert await env.reactions.unread_counts(a, [b]) == {b: 5}
    assert await env.reactions.unread_counts(b, [a]) == {a: 5}
    assert len(await env.reaction_events(a)) == len(await env.reaction_events(b)) == 10


@pytest.mark.parametrize("plan", ["hash", "nested loop"])
async def test_read_reactions_batch_holds_under_any_join_plan(env: Env, plan: str) -> None:
    # A LIMIT ... FOR UPDATE subquery that the planner rescans (a nested loop) skips the
    # rows the statement already changed and takes more: the batch must stay exact.
    a, b = users(2)
    await env.db.pool.execute(
        """
        INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id,
                                   message_id, out, date, reaction_unread)
        SELECT $1, g, $2, $1, g, true, 1700000000 + g, true FROM generate_series(1, 30) AS g
        """,
        a,
        b,
    )
    async with env.db.pool.acquire() as conn, conn.transaction():
        if plan == "nested loop":  # the rows picked are rescanned per row updated
            for setting in ("hashjoin", "mergejoin", "hashagg", "material", "sort"):
                await conn.execute(f"SET LOCAL enable_{setting} = off")
        cleared = await reactions_store.clear_unread_txn(conn, a, b, 10)
    assert cleared == list(range(1, 11))
    assert await env.reactions.unread_counts(a, [b]) == {b: 20}


async def test_blocks_refuse_the_blocker_and_hide_the_blocked(env: Env) -> None:
    a, b = users(2)
    mine, theirs = await env.send(a, b)
    await contacts_store.block(env.db.pool, a, b, datetime.now(UTC))

    # The blocker may not react (as they may not write), but may take a reaction back.
    with pytest.raises(YouBlockedUser):
        await env.reactions.send_reaction(a, b, mine, ["👍"], False, ORIGIN, 10)
    await env.reactions.send_reaction(a, b, mine, [], False, ORIGIN, 11)

    # The blocked user's reaction stays on their side: stored and shown to them, while
    # the blocker gets no event, no unseen mark, no count and no entry in the list.
    state = await env.reactions.send_reaction(b, a, theirs, ["🔥"], True, ORIGIN, 12)
    assert [r[:2] for r in state.reactions] == [[b, "🔥"]]
    assert message_reactions(b, state.reactions, False) is not None
    assert await env.reaction_events(a) == []
    assert await env.reactions.unread_counts(a, [b]) == {}
    [(_, unread, summary)] = await reactions_store.summaries(env.db.pool, a, b, [mine])
    assert not unread and message_reactions(a, summary, unread) is None
    assert (await env.reactions.reaction_list(a, b, mine, reaction=None, offset=None, limit=10))[
        :2
    ] == (0, [])
    count, rows, _ = await env.reactions.reaction_list(
        b, a, theirs, reaction=None, offset=None, limit=10
    )
    assert count == 1 and [r.user_id for r in rows] == [b]

    # An unblock does not deliver what was put meanwhile; a new reaction is delivered.
    await contacts_store.unblock(env.db.pool, a, b)
    [(_, _, summary)] = await reactions_store.summaries(env.db.pool, a, b, [mine])
    assert message_reactions(a, summary, False) is None
    await env.reactions.send_reaction(b, a, theirs, ["👍"], False, ORIGIN, 13)
    assert await env.reactions.unread_counts(a, [b]) == {b: 1}
    [event] = await env.reaction_events(a)
    shown = message_reactions(a, event["reactions"], event["unread"])
    assert shown is not None
    assert [cast(types.ReactionEmoji, r.reaction).emoticon for r in shown.results] == ["👍"]


async def test_a_visible_reaction_taken_back_across_a_block_leaves_the_blocker(env: Env) -> None:
    a, b = users(2)
    mine, theirs = await env.send(a, b)
    await env.reactions.send_reaction(b, a, theirs, ["👍"], False, ORIGIN, 10)
    assert await env.reactions.unread_counts(a, [b]) == {b: 1}
    await contacts_store.block(env.db.pool, a, b, datetime.now(UTC))
    # Swapping it while blocked: the visible one goes, the new one is hidden.
    await env.reactions.send_reaction(b, a, theirs, ["🔥"], False, ORIGIN, 11)
    assert await env.reactions.unread_counts(a, [b]) == {}
    last = (await env.reaction_events(a))[-1]
    assert message_reactions(a, last["reactions"], last["unread"]) is None
    [(_, _, summary)] = await reactions_store.summaries(env.db.pool, a, b, [mine])
    assert message_reactions(a, summary, False) is None


@pytest.mark.parametrize(
    "offset",
    [
        "99999999999999999999:1:👍",
        f"{2**31}:1:👍",
        f"1:{2**63}:👍",
        "1:1:\x00",
        "1:1:" + "x" * 10_000,
        "-5:1:👍",
        " 1:1:👍",
        "1:2",
        ":::",
    ],
)
async def test_a_forged_list_offset_reads_as_the_first_page(env: Env, offset: str) -> None:
    a, b = users(2)
    mine, _ = await env.send(a, b)
    await env.reactions.send_reaction(a, b, mine, ["👍"], False, ORIGIN, 10)
    count, rows, next_offset = await env.reactions.reaction_list(
        a, b, mine, reaction=None, offset=offset, limit=10
    )
    assert count == 1 and [r.user_id for r in rows] == [a] and next_offset is None


async def test_recent_reactions_are_the_users_own_and_bounded(env: Env) -> None:
    a, b = users(2)
    mine, _ = await env.send(a, b)
    choices = list(AVAILABLE_REACTIONS[: MAX_RECENT_REACTIONS + 1])
    # Without add_to_recent nothing is remembered.
    await env.reactions.send_reaction(a, b, mine, [choices[0]], False, ORIGIN, 1)
    assert await env.reactions.recent_reactions(a, 100) == []
    for emoticon in choices[:MAX_RECENT_REACTIONS]:
        await env.reactions.send_reaction(
            a, b, mine, [emoticon], False, ORIGIN, 2, add_to_recent=True
        )
    newest_first = choices[:MAX_RECENT_REACTIONS][::-1]
    assert await env.reactions.recent_reactions(a, 1000) == newest_first  # at the bound
    assert await env.reactions.recent_reactions(a, 3) == newest_first[:3]
    # Past the bound the oldest goes; using one again moves it to the head.
    await env.reactions.send_reaction(
        a, b, mine, [choices[-1]], False, ORIGIN, 3, add_to_recent=True
    )
    await env.reactions.send_reaction(
        a, b, mine, [choices[5]], False, ORIGIN, 3, add_to_recent=True
    )
    recent = await env.reactions.recent_reactions(a, 1000)
    assert len(recent) == MAX_RECENT_REACTIONS and recent[:2] == [choices[5], choices[-1]]
    assert choices[0] not in recent and recent.count(choices[5]) == 1
    assert await env.reactions.recent_reactions(b, 1000) == []
    await env.reactions.clear_recent_reactions(a)
    assert await env.reactions.recent_reactions(a, 1000) == []


async def test_a_revoked_message_takes_its_reactions_and_mark_along(env: Env) -> None:
    a, b = users(2)
    deletes = env.deletes
    mine, theirs = await env.send(a, b)
    other, other_theirs = await env.send(a, b)
    await env.reactions.send_reaction(b, a, theirs, ["👍"], False, ORIGIN, 10)
    await env.reactions.send_reaction(b, a, other_theirs, ["🔥"], False, ORIGIN, 11)
    assert await env.reactions.unread_counts(a, [b]) == {b: 2}
    # The reactor revokes the author's message: gone from both sides with its mark.
    assert await deletes.delete_messages(b, [theirs], True, ORIGIN, now=12) is not None
    assert await env.reactions.unread_counts(a, [b]) == {b: 1}
    assert await reactions_store.summaries(env.db.pool, a, b, [mine]) == []
    assert await reactions_store.summaries(env.db.pool, b, a, [theirs]) == []
    boxes, count = await env.reactions.unread_reactions(
        a, b, offset_id=0, add_offset=0, limit=10, max_id=0, min_id=0
    )
    assert [m.box_id for m in boxes] == [other] and count == 1
    with pytest.raises(MessageIdInvalid):
        await env.reactions.send_reaction(b, a, theirs, ["🔥"], False, ORIGIN, 13)
    with pytest.raises(MessageIdInvalid):
        await env.reactions.reaction_list(a, b, mine, reaction=None, offset=None, limit=10)

    # A reaction racing the revoke of its message: whichever wins, nothing is left
    # marked or counted for a deleted message.
    reacted, deleted = await asyncio.gather(
        env.reactions.send_reaction(b, a, other_theirs, ["🎉"], False, ORIGIN, 14),
        deletes.delete_messages(a, [other], True, ORIGIN, now=14),
        return_exceptions=True,
    )
    assert deleted is not None and not isinstance(deleted, BaseException)
    assert not isinstance(reacted, BaseException) or isinstance(reacted, MessageIdInvalid)
    assert await env.reactions.unread_counts(a, [b]) == {}
    assert (await env.reactions.read_reactions(a, b, 15)).cleared == 0
