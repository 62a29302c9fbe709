"""Forward, content read, outbox read date and search on real PostgreSQL and Redis:
pts_count rules, dense logs, owner views, gates, limits and the query plans."""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
from conftest import MakeParts
from delivery.test_outbox import SqlRecorder, scanned_partitions, seq_scans
from generic_plans import plan_nodes

from telesrv.parts import Parts
from telesrv.services.errors import (
    ChatForwardsRestricted,
    FloodWait,
    LimitInvalid,
    MessageIdInvalid,
    MessageIdsEmpty,
    MessageNotReadYet,
    RandomIdDuplicate,
    RandomIdInvalid,
    SearchQueryEmpty,
)
from telesrv.services.forwards import ForwardRequest, Forwards
from telesrv.services.history import MAX_ANSWER_BYTES as BUDGET
from telesrv.services.messages import Origin, OutgoingText
from telesrv.services.search import SearchQuery
from telesrv.store import dialog_list as dialog_list_store
from telesrv.store import history as history_store
from telesrv.store import messages as messages_store
from telesrv.store import read_receipts as read_receipts_store
from telesrv.store import search as search_store
from telesrv.store import update_log as update_log_store

ORIGIN = Origin(auth_key_id=11, session_id=22)
_ids = itertools.count(7_000_000)
_random = itertools.count(1)


def new_user() -> int:
    return next(_ids)


def header_for(author: int, date: int) -> bytes:
    """Stands in for the RPC layer's TL header: readable in assertions."""
    return f"fwd:{author}:{date}".encode()


class Env:
    """``forwards``: another process's, for forwards under other settings than ``parts``."""

    def __init__(self, db: Any, parts: Parts, *, forwards: Forwards | None = None) -> None:
        self.db = db
        self.messages = parts.messages
        self.forwards = forwards or parts.forwards
        self.content_reads = parts.content_reads
        self.search = parts.search
        self.chat_history = parts.history
        self.read_receipts = parts.read_receipts
        self.updates = parts.updates

    async def send(self, sender: int, recipient: int, body: str = "hello", **kw: Any) -> int:
        sent = await self.messages.send_text(
            OutgoingText(sender, recipient, next(_random), body, **kw), ORIGIN, now=1000
        )
        return sent.message.box_id

    async def forward(self, owner: int, src: int, dst: int, ids: list[int], **kw: Any) -> Any:
        random_ids = kw.pop("random_ids", None) or [next(_random) for _ in ids]
        req = ForwardRequest(owner, src, dst, ids, random_ids, **kw)
        return await self.forwards.forward(req, header_for, ORIGIN, now=2000)

    async def log(self, user: int) -> list[tuple[int, int, str]]:
        rows = await self.db.pool.fetch(
            "SELECT pts, pts_count, event_type FROM user_update_events WHERE user_id = $1"
            " ORDER BY pts",
            user,
        )
        return [(r["pts"], r["pts_count"], r["event_type"]) for r in rows]

    async def dense(self, user: int) -> bool:
        """Every pts 1..max is covered exactly once (events cover pts-count+1..pts)."""
        covered: list[int] = []
        for pts, count, _ in await self.log(user):
            covered.extend(range(pts - count + 1, pts + 1))
        return covered == list(range(1, len(covered) + 1))

    async def history(self, owner: int, peer: int) -> list[messages_store.BoxMessage]:
        got, _ = await self.chat_history.history(
            owner, peer, offset_id=0, offset_date=0, add_offset=0, limit=100, max_id=0, min_id=0
        )
        return got


@pytest.fixture
def env(db: Any, parts: Parts) -> Env:
    return Env(db, parts)


# -- forwardMessages ----------------------------------------------------------------------


async def test_forward_keeps_order_and_builds_headers(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    first = await env.send(b, a, "from bob")  # a's box 1: incoming from b
    mine = await env.send(a, b, "my own")  # a's box 2: outgoing
    sent = await env.forward(a, b, c, [mine, first], silent=True)

    assert [s.message.message for _, s in sent] == ["my own", "from bob"]
    assert [s.message.box_id for _, s in sent] == [3, 4]  # source order
    assert [s.pts for _, s in sent] == [3, 4]
    assert all(s.message.silent and s.message.out for _, s in sent)
    assert [s.message.fwd_from for _, s in sent] == [
        header_for(a, 1000),  # the original author and date, not the forwarder's
        header_for(b, 1000),
    ]
    # The recipient sees them in its own ids, headers included, one pts each.
    inbox = await env.history(c, a)
    assert [(m.box_id, m.message, m.fwd_from) for m in inbox] == [
        (2, "from bob", header_for(b, 1000)),
        (1, "my own", header_for(a, 1000)),
    ]
    assert await env.log(c) == [(1, 1, "new_message"), (2, 1, "new_message")]
    assert await env.log(a) == [(p, 1, "new_message") for p in (1, 2, 3, 4)]
    outbox = await env.db.pool.fetch(
        "SELECT target_user_id, pts, exclude_session_id FROM dispatch_outbox"
        " WHERE target_user_id = ANY($1::bigint[]) AND pts > 2 OR target_user_id = $2"
        " ORDER BY target_user_id, pts",
        [a],
        c,
    )
    assert {(r["target_user_id"], r["pts"], r["exclude_session_id"]) for r in outbox} == {
        (a, 3, 22),
        (a, 4, 22),
        (c, 1, None),
        (c, 2, None),
    }


async def test_forward_keeps_an_existing_header_and_drop_author_removes_it(env: Env) -> None:
    a, b, c, d = new_user(), new_user(), new_user(), new_user()
    original = await env.send(a, b, "chain")
    [(_, to_c)] = await env.forward(b, a, c, [original])
    c_box = (await env.history(c, b))[0].box_id
    [(_, to_d)] = await env.forward(c, b, d, [c_box])
    assert to_d.message.fwd_from == header_for(a, 1000) == to_c.message.fwd_from
    [(_, dropped)] = await env.forward(c, b, d, [c_box], drop_author=True)
    assert dropped.message.fwd_from is None
    assert [m.fwd_from for m in await env.history(d, c)] == [None, header_for(a, 1000)]


async def test_protected_messages_cannot_be_forwarded(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    plain = await env.send(a, b, "fine")
    protected = await env.send(a, b, "secret", noforwards=True)
    before_b, before_c = await env.log(b), await env.log(c)
    b_ids = [m.box_id for m in await env.history(b, a)]
    for owner, src, ids in ((a, b, [plain, protected]), (b, a, b_ids)):
        with pytest.raises(ChatForwardsRestricted):
            await env.forward(owner, src, c, ids)
    # Nothing was sent and no pts was spent.
    assert await env.log(b) == before_b and await env.log(c) == before_c
    # A forward marked noforwards produces protected copies.
    [(_, copy)] = await env.forward(a, b, c, [plain], noforwards=True)
    assert copy.message.noforwards
    c_box = (await env.history(c, a))[0].box_id
    with pytest.raises(ChatForwardsRestricted):
        await env.forward(c, a, b, [c_box])


async def test_forward_is_idempotent_per_random_id(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    ids = [await env.send(a, b, f"m{i}") for i in range(3)]
    random_ids = [901, 902, 903]
    first = await env.forward(a, b, c, ids, random_ids=random_ids)
    again = await env.forward(a, b, c, ids, random_ids=random_ids)
    assert [s.message.box_id for _, s in again] == [s.message.box_id for _, s in first]
    assert all(s.duplicate for _, s in again) and not any(s.duplicate for _, s in first)
    assert [r for r, _ in again] == random_ids
    assert [s.pts for _, s in again] == [s.pts for _, s in first]
    assert len(await env.history(c, a)) == 3
    # A retry is answered before any pts is taken: neither log moves, not even by a noop.
    assert [t for _, _, t in await env.log(c)] == ["new_message"] * 3
    assert [t for _, _, t in await env.log(a)] == ["new_message"] * 6
    assert await env.dense(a) and await env.dense(c)


async def test_a_partly_retried_forward_sends_only_the_new_copies(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    ids = [await env.send(a, b, f"m{i}") for i in range(3)]
    first = await env.forward(a, b, c, ids[:2], random_ids=[911, 912])
    # A client retrying with one more message in the batch: two retries, one new copy.
    again = await env.forward(a, b, c, ids, random_ids=[911, 912, 913])
    assert [r for r, _ in again] == [911, 912, 913]
    assert [s.duplicate for _, s in again] == [True, True, False]
    assert [s.message.box_id for _, s in again][:2] == [s.message.box_id for _, s in first]
    assert [s.message.message for _, s in again] == ["m0", "m1", "m2"]
    assert [t for _, _, t in await env.log(c)] == ["new_message"] * 3
    assert await env.dense(a) and await env.dense(c)


async def test_forward_input_errors(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    box = await env.send(a, b)
    with pytest.raises(RandomIdInvalid):
        await env.forward(a, b, c, [box], random_ids=[1, 2])
    with pytest.raises(MessageIdsEmpty):
        await env.forwards.forward(ForwardRequest(a, b, c, [], []), header_for, ORIGIN, 1)
    with pytest.raises(LimitInvalid):
        await env.forward(a, b, c, [box] * 101)
    with pytest.raises(RandomIdDuplicate):
        await env.forward(a, b, c, [box, box], random_ids=[5, 5])
    for ids in ([999], [0, -1, 2**31], [box + 1]):
        with pytest.raises(MessageIdInvalid):
            await env.forward(a, b, c, ids)
    with pytest.raises(MessageIdInvalid):
        await env.forward(a, c, b, [box])  # the id is in another chat
    # Missing ids are skipped, the others go; 100 different ones at once are fine.
    sent = await env.forward(a, b, c, [999, box])
    assert [s.message.message for _, s in sent] == ["hello"]
    many = [box] + [await env.send(a, b, f"m{i}") for i in range(99)]
    assert len(await env.forward(a, b, c, many)) == 100
    assert await env.dense(a) and await env.dense(c)


async def test_forward_to_a_blocker_lands_on_the_sender_side_only(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    box = await env.send(a, b)
    await env.db.pool.execute(
        "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)", c, a
    )
    [(_, copy)] = await env.forward(a, b, c, [box])
    assert copy.message.out and await env.log(c) == []
    assert await dialog_list_store.get_peer_dialogs(env.db.pool, c, [a]) == []
    # Forwarding into saved messages writes one box.
    [(_, saved)] = await env.forward(a, b, a, [box])
    assert saved.message.peer_user_id == a and await env.dense(a)


async def test_a_failed_forward_fills_every_allocated_pts(env: Env, redis: Any) -> None:
    a, b, c = new_user(), new_user(), new_user()
    ids = [await env.send(a, b, f"m{i}") for i in range(3)]
    await env.send(a, c, "warm up c's counters")
    # Occupy c's next-but-one box id behind the allocator's back: the batch collides.
    await env.db.pool.execute(
        "INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id,"
        " message_id, out, date) VALUES ($1, 3, $2, $2, 0, false, 1)",
        c,
        a,
    )
    with pytest.raises(Exception, match="duplicate key"):
        await env.forward(a, b, c, ids)
    assert [t for _, _, t in await env.log(a)][-3:] == ["noop"] * 3
    assert [t for _, _, t in await env.log(c)] == ["new_message"] + ["noop"] * 3
    assert await env.dense(a) and await env.dense(c)
    boxes = await env.db.pool.fetchval(
        "SELECT count(*) FROM message_boxes WHERE owner_user_id = $1", c
    )
    assert boxes == 2  # the warm-up and the intruder only


async def test_each_forwarded_copy_counts_against_the_send_rate(
    db: Any, parts: Parts, make_parts: MakeParts
) -> None:
    # The messages are sent with no limit (PARTS_DEFAULTS), then forwarded by a process
    # whose limit is 5 a minute: only the copies count.
    limited = Env(db, parts, forwards=make_parts(send_rate_limit=5).forwards)
    a, b, c = new_user(), new_user(), new_user()
    ids = [await limited.send(a, b, f"m{i}") for i in range(3)]
    assert len(await limited.forward(a, b, c, ids)) == 3
    with pytest.raises(FloodWait):
        await limited.forward(a, b, c, ids)  # 6 copies in the minute: one past
    assert len(await limited.forward(a, b, c, ids[:2])) == 2  # 5: at the limit
    with pytest.raises(FloodWait):
        await limited.forward(a, b, c, ids[:1])
    assert await limited.dense(a) and await limited.dense(c)  # refusals spent no pts


async def test_a_repeated_id_is_refused_without_any_copy(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    first, second = await env.send(a, b, "one"), await env.send(a, b, "two")
    before = await env.log(c)
    with pytest.raises(MessageIdInvalid):
        await env.forward(a, b, c, [first] * 100)
    with pytest.raises(MessageIdInvalid):
        await env.forward(a, b, c, [first, second, first])
    assert await env.log(c) == before
    assert len(await env.forward(a, b, c, [first, second])) == 2


# -- readMessageContents ------------------------------------------------------------------


async def mark_unread(env: Env, owner: int, box_ids: list[int], column: str) -> None:
    await env.db.pool.execute(
        f"UPDATE message_boxes SET {column} = true"
        " WHERE owner_user_id = $1 AND box_id = ANY($2::integer[])",
        owner,
        box_ids,
    )


async def test_read_contents_clears_flags_with_one_pts(env: Env) -> None:
    a, b = new_user(), new_user()
    ids = [await env.send(a, b, f"m{i}") for i in range(4)]  # b's boxes 1..4
    await mark_unread(env, b, [1, 2], "media_unread")
    await mark_unread(env, b, [3], "reaction_unread")
    outcome = await env.content_reads.read_contents(
        b, [1, 2, 3, 4, 99, 0, -5, 2**40], ORIGIN, now=5
    )
    assert outcome is not None and (outcome.pts, outcome.pts_count) == (5, 1)
    [event] = [
        e
        for e in await update_log_store.events_after(env.db.pool, b, 4, 10)
        if e.pts == outcome.pts
    ]
    assert (event.event_type, event.pts_count, event.box_ids) == (
        "read_message_contents",
        1,
        [1, 2, 3],
    )
    row = await env.db.pool.fetchrow(
        "SELECT exclude_auth_key_id, exclude_session_id FROM dispatch_outbox"
        " WHERE target_user_id = $1 AND pts = $2",
        b,
        outcome.pts,
    )
    assert row is not None and tuple(row.values()) == (11, 22)
    flags = await env.db.pool.fetch(
        "SELECT media_unread OR reaction_unread AS unread FROM message_boxes"
        " WHERE owner_user_id = $1",
        b,
    )
    assert not any(r["unread"] for r in flags)
    # Repeat calls, unknown and foreign ids: nothing to clear, no pts.
    assert await env.content_reads.read_contents(b, [1, 2, 3], ORIGIN, now=6) is None
    assert await env.content_reads.read_contents(b, [], ORIGIN, now=6) is None
    await mark_unread(env, a, ids, "media_unread")  # a's own boxes: b cannot touch them
    assert await env.content_reads.read_contents(b, [100, 200], ORIGIN, now=6) is None
    assert (await env.updates.state(b, now=6)).pts == 5 and await env.dense(b)
    # getDifference brings it to an offline device.
    diff = await env.updates.difference(b, 4)
    assert [(e.event_type, e.box_ids) for e in diff.events] == [
        ("read_message_contents", [1, 2, 3])
    ]


async def test_read_contents_skips_deleted_boxes(env: Env) -> None:
    a, b = new_user(), new_user()
    await env.send(a, b)
    await mark_unread(env, b, [1], "media_unread")
    await env.db.pool.execute(
        "UPDATE message_boxes SET deleted = true WHERE owner_user_id = $1 AND box_id = 1", b
    )
    assert await env.content_reads.read_contents(b, [1], ORIGIN, now=6) is None
    assert await env.log(b) == [(1, 1, "new_message")]


async def test_read_contents_race_turns_the_pts_into_a_noop(env: Env) -> None:
    a, b = new_user(), new_user()
    await env.send(a, b)
    await mark_unread(env, b, [1], "media_unread")
    # Cleared between the plan and the transaction (what a concurrent call does).
    cleared = await env.db.run_txn(
        "t", read_receipts_store.read_contents_txn, b, [1], 2, 7, None, None
    )
    assert cleared == [1]
    nothing = await env.db.run_txn(
        "t", read_receipts_store.read_contents_txn, b, [1], 3, 7, None, None
    )
    assert nothing == [] and (await env.log(b))[-1] == (3, 1, "noop")


# -- getOutboxReadDate --------------------------------------------------------------------


async def test_outbox_read_date_from_the_durable_events(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    ids = [await env.send(a, b, f"m{i}") for i in range(3)]
    incoming = await env.send(b, a, "reply")
    other_chat = await env.send(a, c, "elsewhere")
    with pytest.raises(MessageNotReadYet):
        await env.content_reads.outbox_read_date(a, b, ids[0])
    await env.read_receipts.read_history(b, a, 2, ORIGIN, now=50)
    await env.read_receipts.read_history(b, a, 0, ORIGIN, now=60)
    assert [await env.content_reads.outbox_read_date(a, b, i) for i in ids] == [50, 50, 60]
    for peer, msg_id in ((b, incoming), (b, 999), (b, 0), (b, 2**31), (c, ids[0]), (b, other_chat)):
        with pytest.raises(MessageIdInvalid):
            await env.content_reads.outbox_read_date(a, peer, msg_id)
    with pytest.raises(MessageNotReadYet):
        await env.content_reads.outbox_read_date(a, c, other_chat)


# -- search -------------------------------------------------------------------------------


async def search(env: Env, owner: int, peer: int | None, text: str, **kw: Any) -> list[str]:
    page = await env.search.search(SearchQuery(owner, peer, text, **kw))
    return [m.message for m in page.messages]


async def test_search_matches_substrings_in_the_owners_view(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    await env.send(a, b, "Hello World")
    await env.send(b, a, "hello there, bob")
    await env.send(a, c, "HELLO carol")
    await env.send(c, a, "nothing here")
    await env.send(b, c, "hello from b to c")  # a is not part of it

    assert await search(env, a, b, "hello") == ["hello there, bob", "Hello World"]
    assert await search(env, a, None, "hel") == ["HELLO carol", "hello there, bob", "Hello World"]
    assert await search(env, a, None, "hello wor") == ["Hello World"]  # every word
    assert await search(env, a, None, "world hello") == ["Hello World"]  # in any order
    assert await search(env, a, c, "bob") == []
    # Substrings anywhere in a word.
    assert await search(env, a, None, "ello") == ["HELLO carol", "hello there, bob", "Hello World"]
    assert await search(env, a, None, "orl") == ["Hello World"]
    assert await search(env, b, None, "carol") == []  # a's chat with c is not b's
    # The same text, seen by the recipient, in the recipient's ids.
    page = await env.search.search(SearchQuery(b, a, "world"))
    assert [(m.box_id, m.out) for m in page.messages] == [(1, False)]
    # from_id narrows to one direction.
    assert await search(env, a, b, "hello", out=True) == ["Hello World"]
    assert await search(env, a, b, "hello", out=False) == ["hello there, bob"]


async def test_search_follows_edits_and_deletes(env: Env, parts: Parts) -> None:
    # The edit and the delete keep the search rows themselves (no triggers since 0031).
    a, b = new_user(), new_user()
    box = await env.send(a, b, "apple pie")
    await env.send(a, b, "apple juice")
    await parts.edits.edit_text(a, b, box, "banana split", None, ORIGIN, now=1001)
    for owner, peer in ((a, b), (b, a)):
        assert await search(env, owner, peer, "apple") == ["apple juice"]
        assert await search(env, owner, peer, "banana") == ["banana split"]
    await parts.deletes.delete_messages(a, [box], False, ORIGIN, now=1002)
    assert await search(env, a, b, "banana") == []
    assert await search(env, b, a, "banana") == ["banana split"]  # b's box is still there
    peer_box = (await env.history(b, a))[-1].box_id
    await parts.deletes.delete_messages(b, [peer_box], True, ORIGIN, now=1003)
    assert await search(env, b, a, "banana") == []
    assert await search(env, b, a, "apple") == ["apple juice"]
    assert await env.dense(a) and await env.dense(b)


async def test_search_offsets_bounds_and_count(env: Env) -> None:
    a, b = new_user(), new_user()
    for i in range(30):
        await env.messages.send_text(
            OutgoingText(a, b, next(_random), f"note {i}" if i % 3 == 0 else f"other {i}"),
            ORIGIN,
            now=100 + i,
        )
    # notes are boxes 1, 4, 7, ..., 28 (10 of them)

    async def ids(**kw: Any) -> list[int]:
        page = await env.search.search(SearchQuery(a, b, "note", **kw))
        return [m.box_id for m in page.messages]

    assert await ids() == [28, 25, 22, 19, 16, 13, 10, 7, 4, 1]
    assert await ids(limit=3) == [28, 25, 22]
    assert await ids(offset_id=22, limit=3) == [19, 16, 13]
    assert await ids(offset_id=22, add_offset=1, limit=3) == [16, 13, 10]
    # As in getHistory: a negative add_offset takes matches from offset_id upwards first.
    assert await ids(offset_id=16, add_offset=-2, limit=4) == [19, 16, 13, 10]
    assert await ids(max_id=10) == [7, 4, 1]
    assert await ids(min_id=19) == [28, 25, 22]
    assert await ids(min_date=115, max_date=124) == [22, 19]  # box k has date 99 + k
    assert await ids(add_offset=10**9) == []  # clamped to 100
    assert len(await ids(limit=10**9)) == 10  # clamped to 100
    page = await env.search.search(SearchQuery(a, b, "note", limit=3))
    assert page.count == 10
    page = await env.search.search(SearchQuery(a, None, "note", offset_id=4, limit=3))
    assert [m.box_id for m in page.messages] == [1] and page.count == 10


async def test_search_without_text(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    await env.send(a, b, "one")
    await env.send(b, a, "two")
    await env.send(a, c, "three")
    # A chat without text: its messages; with from_id: one direction.
    assert await search(env, a, b, "") == ["two", "one"]
    assert await search(env, a, b, "  ", out=False) == ["two"]
    assert await search(env, a, None, "", out=True) == ["three", "one"]
    assert await search(env, a, b, "", limit=1) == ["two"]
    with pytest.raises(SearchQueryEmpty):
        await env.search.search(SearchQuery(a, None, "   "))
    # Punctuation has no words: nothing matches (rather than everything).
    assert await search(env, a, b, "?!") == []


async def test_search_finds_substrings_in_any_script(env: Env) -> None:
    a, b = new_user(), new_user()
    await env.send(a, b, "你好世界，这是测试")
    await env.send(b, a, "日本語のテキストです")
    await env.send(a, b, "한국어 메시지입니다")
    await env.send(b, a, "Welcome to Telegram!")
    await env.send(a, b, "Привет, МИР")
    assert await search(env, a, b, "世界") == ["你好世界，这是测试"]  # two characters: scanned
    assert await search(env, a, b, "这是测试") == ["你好世界，这是测试"]  # trigram index
    assert await search(env, b, a, "世界") == ["你好世界，这是测试"]  # the recipient's view
    assert await search(env, a, None, "テキスト") == ["日本語のテキストです"]
    assert await search(env, a, None, "메시지") == ["한국어 메시지입니다"]
    assert await search(env, a, None, "legr") == ["Welcome to Telegram!"]
    assert await search(env, a, None, "TELEGRAM") == ["Welcome to Telegram!"]
    assert await search(env, a, None, "мир") == ["Привет, МИР"]  # case-insensitive beyond ASCII
    assert await search(env, a, None, "世界 테스트") == []  # every word must occur


async def test_search_finds_a_word_in_the_middle_of_a_long_message(env: Env) -> None:
    a, b = new_user(), new_user()
    filler = "lorem ipsum dolor sit amet " * 75
    body = filler + "needle" + filler
    assert len(body) > 4000
    await env.send(a, b, body)
    await env.send(a, b, filler)
    page = await env.search.search(SearchQuery(a, b, "needle"))
    assert [m.message for m in page.messages] == [body] and page.count == 1


async def test_search_wildcards_in_the_query_are_plain_characters(env: Env) -> None:
    a, b = new_user(), new_user()
    await env.send(a, b, "100% sure")
    await env.send(a, b, "1000 sure")
    await env.send(a, b, "snake_case name")
    await env.send(a, b, "snakeXcase name")
    await env.send(a, b, "back\\slash")
    assert await search(env, a, b, "100%") == ["100% sure"]
    assert await search(env, a, b, "0%") == ["100% sure"]
    assert await search(env, a, b, "snake_case") == ["snake_case name"]
    assert await search(env, a, b, "k\\s") == ["back\\slash"]


async def test_short_queries_scan_the_owners_newest_messages_only(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a run of three letters no trigram can serve the query: the newest
    # SHORT_QUERY_SCAN box ids of the owner are read instead.
    monkeypatch.setattr(search_store, "SHORT_QUERY_SCAN", 3)
    a, b = new_user(), new_user()
    for i in range(1, 6):
        await env.send(a, b, f"xy message{i}")
    # Newest box 5: boxes 3..5 are within the scan (at the limit), 2 and 1 past it.
    assert await search(env, a, b, "xy") == ["xy message5", "xy message4", "xy message3"]
    page = await env.search.search(SearchQuery(a, b, "xy", limit=2))
    assert page.count == 3
    # A query the index serves finds the older ones.
    assert await search(env, a, b, "message1") == ["xy message1"]
    assert await search(env, a, b, "message xy") == [f"xy message{i}" for i in range(5, 0, -1)]


async def test_paging_300_matches_of_one_second_returns_each_once(env: Env) -> None:
    a, b = new_user(), new_user()
    for i in range(300):
        await env.messages.send_text(
            OutgoingText(a, b, next(_random), f"same second {i}"), ORIGIN, now=1_700_000_000
        )
    await env.send(a, b, "unrelated")
    for peer in (b, None):
        seen: list[int] = []
        offset_id = 0
        while True:
            page = await env.search.search(
                SearchQuery(a, peer, "second", offset_id=offset_id, limit=70)
            )
            if not page.messages:
                break
            assert page.count == 300
            seen += [m.box_id for m in page.messages]
            offset_id = page.messages[-1].box_id
        assert seen == list(range(300, 0, -1))


# -- query plans --------------------------------------------------------------------------

PLAN_USERS = 40


@pytest.fixture(scope="module")
async def big_tables(db: Any) -> None:
    """40 users sharing 4 partitions, 12,000 messages over 2,000 words, a third of them
    from user 7 (so its partition is mostly its own rows); read receipts; ANALYZE only
    (no VACUUM: the GIN index's pending list is what it is between autovacuum runs)."""
    await db.pool.execute(
        f"""
        INSERT INTO private_messages (sender_user_id, recipient_user_id, random_id, date, message)
        SELECT CASE WHEN g % 3 = 0 THEN 7 ELSE 1 + g % {PLAN_USERS} END,
               1 + (g + 1 + g / {PLAN_USERS}) % {PLAN_USERS}, g, 1700000000 + g,
               'word' || (g % 2000) || ' common text tail' || (g % 7)
          FROM generate_series(1, 12000) AS g;
        INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id,
                                   message_id, out, date)
        SELECT m.sender_user_id, row_number() OVER (PARTITION BY m.sender_user_id ORDER BY m.id),
               m.recipient_user_id, m.sender_user_id, m.id, true, m.date
          FROM private_messages m WHERE m.sender_user_id <= {PLAN_USERS};
        -- What the send function writes for each box it creates.
        INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date, body)
        SELECT b.owner_user_id, b.box_id, b.peer_user_id, b.out, b.date, m.message
          FROM message_boxes b
          JOIN private_messages m ON m.sender_user_id = b.sender_user_id AND m.id = b.message_id
         WHERE b.owner_user_id <= {PLAN_USERS};
        INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date,
                                        peer_user_id, max_id)
        SELECT 1 + g % {PLAN_USERS}, g, 1,
               CASE WHEN g % 10 = 0 THEN 'read_history_outbox' ELSE 'new_message' END,
               1700000000 + g, 1 + (g / 3) % {PLAN_USERS}, g / 40
          FROM generate_series(1, 40000) AS g;
        ANALYZE private_messages, message_boxes, message_search, user_update_events;
        """
    )


class Recorder(SqlRecorder):
    async def fetchrow(self, sql: str, *args: Any) -> Any:
        self.calls.append((sql, args))
        return {"is_outgoing": False, "read_date": None}


async def plan_of(db: Any, call: Callable[[Any], Awaitable[object]]) -> dict[str, Any]:
    """The JSON plan of the one statement ``call`` runs (tests/delivery's helper, with
    fetchrow)."""
    recorder = Recorder()
    await call(cast(Any, recorder))
    [(sql, args)] = recorder.calls
    text = await db.pool.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args)
    return cast(dict[str, Any], json.loads(text)[0]["Plan"])


async def partition_indexes(db: Any, parent_index: str) -> set[str]:
    rows = await db.pool.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = $1::regclass",
        parent_index,
    )
    return {r["relname"] for r in rows}


def index_names(plan: dict[str, Any]) -> set[str]:
    return {n["Index Name"] for n in plan_nodes(plan) if "Index Name" in n}


def big_table_seq_scans(plan: dict[str, Any]) -> list[str]:
    big = ("message_search", "message_boxes", "private_messages", "user_update_events")
    return [name for name in seq_scans(plan) if name.startswith(big)]


def search_filter(peer: int | None) -> search_store.SearchFilter:
    return search_store.SearchFilter(7, peer, None, 0, 0, 0)


@pytest.mark.parametrize("peer", [8, None], ids=["one chat", "every chat"])
async def test_search_uses_the_owners_text_index(db: Any, big_tables: None, peer: Any) -> None:
    query = await search_store.text_query(db.pool, 7, "WORD123")
    assert query is not None and query.indexed and query.floor == 0
    page = await plan_of(
        db, lambda c: search_store.search(c, search_filter(peer), query, limit=20, budget=BUDGET)
    )
    count = await plan_of(
        db, lambda c: search_store.count_search(c, search_filter(peer), query, 10_000)
    )
    for plan in (page, count):
        assert len(scanned_partitions(plan, "message_search")) == 1
        assert index_names(plan) & await partition_indexes(db, "message_search_body")
        assert big_table_seq_scans(plan) == []
    # The page's boxes are read by primary key in the owner's partition.
    assert len(scanned_partitions(page, "message_boxes")) == 1


async def test_a_frequent_word_walks_the_owners_newest_rows(db: Any, big_tables: None) -> None:
    # "common" is in every message: reading the owner's newest rows until 20 match
    # beats intersecting posting lists; either way the owner's partition only.
    query = await search_store.text_query(db.pool, 7, "common")
    assert query is not None
    page = await plan_of(
        db, lambda c: search_store.search(c, search_filter(None), query, limit=20, budget=BUDGET)
    )
    assert len(scanned_partitions(page, "message_search")) == 1
    assert big_table_seq_scans(page) == []


async def test_a_short_query_reads_the_owners_rows_without_the_text_index(
    db: Any, big_tables: None
) -> None:
    # Two letters give no trigram: the owner's newest rows by primary key, bounded below.
    query = await search_store.text_query(db.pool, 7, "rd")
    assert query is not None and not query.indexed
    page = await plan_of(
        db, lambda c: search_store.search(c, search_filter(None), query, limit=20, budget=BUDGET)
    )
    count = await plan_of(
        db, lambda c: search_store.count_search(c, search_filter(None), query, 10_000)
    )
    for plan in (page, count):
        assert len(scanned_partitions(plan, "message_search")) == 1
        assert not index_names(plan) & await partition_indexes(db, "message_search_body")
    # The page reads the newest rows only; counting every match of a user owning most
    # of its partition may read the whole partition.
    assert big_table_seq_scans(page) == []


async def test_listing_without_text_uses_message_box_indexes(db: Any, big_tables: None) -> None:
    chat = await plan_of(
        db, lambda c: search_store.list_messages(c, search_filter(8), limit=20, budget=BUDGET)
    )
    everyone = await plan_of(
        db,
        lambda c: search_store.list_messages(
            c, search_store.SearchFilter(7, None, True, 0, 0, 0), limit=20, budget=BUDGET
        ),
    )
    for plan in (chat, everyone):
        assert len(scanned_partitions(plan, "message_boxes")) == 1
        assert big_table_seq_scans(plan) == []
    assert index_names(chat) & await partition_indexes(db, "message_boxes_history")


async def test_outbox_read_date_uses_the_partial_index(db: Any, big_tables: None) -> None:
    plan = await plan_of(db, lambda c: read_receipts_store.outbox_read_date(c, 7, 8, 100))
    assert index_names(plan) & await partition_indexes(db, "user_update_events_outbox_read")
    assert len(scanned_partitions(plan, "user_update_events")) == 1
    assert len(scanned_partitions(plan, "message_boxes")) == 1
    assert big_table_seq_scans(plan) == []


async def test_byte_bounded_reads_stay_in_the_owners_partition(db: Any, big_tables: None) -> None:
    plans = [
        await plan_of(db, lambda c: messages_store.get_boxes_within(c, 7, [5, 1, 900], BUDGET)),
        await plan_of(
            db,
            lambda c: history_store.history_page(
                c, 7, 8, above=10, below=400, limit=50, skip=20, budget=BUDGET, ascending=True
            ),
        ),
        await plan_of(
            db,
            lambda c: history_store.history_ids(
                c, 7, 8, above=10, below=None, limit=50, ascending=True
            ),
        ),
        await plan_of(db, lambda c: history_store.newest_id_before(c, 7, 8, 1700005000)),
    ]
    for plan in plans:
        assert len(scanned_partitions(plan, "message_boxes")) == 1
        assert big_table_seq_scans(plan) == []
    for plan in plans[1:]:
        assert index_names(plan) & await partition_indexes(db, "message_boxes_history")
