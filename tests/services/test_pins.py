"""Pinned messages on real PostgreSQL and Redis, built through the server's own wiring:
both sides pinned with one pts event each, one side only, nothing for a peer who
blocked the pinner, no pts for a change that changes nothing, unpinAll in pages, the
latest pin, the pinned search filter, and ids that are not the caller's messages."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from conftest import MakeSettings
from delivery.test_outbox import SqlRecorder, scanned_partitions, seq_scans

from telesrv.app import open_resources
from telesrv.server import Server
from telesrv.services.errors import FloodWait, MessageIdInvalid
from telesrv.services.origin import Origin
from telesrv.services.pins import UNPIN_ALL_BATCH
from telesrv.services.search import SearchQuery
from telesrv.services.sends import OutgoingText
from telesrv.store import contacts as contacts_store
from telesrv.store import history as history_store
from telesrv.store import pins as pins_store
from telesrv.store import users as users_store
from telesrv.store.log_payloads import MessagesPinned
from telesrv.wiring import build_server

ORIGIN = Origin(auth_key_id=11, session_id=22)
NOW = 1_800_000_000
_phones = itertools.count(15557310000)
_random_ids = itertools.count(1)


class Env:
    def __init__(self, server: Server) -> None:
        assert server.parts is not None
        self.parts = server.parts
        self.pool = server.resources.db.pool

    async def user(self, name: str = "U") -> int:
        return (await users_store.create_user(self.pool, str(next(_phones)), name)).user_id

    async def send(self, sender: int, recipient: int, text: str = "hi") -> tuple[int, int]:
        """(sender's box id, recipient's box id) of a new message."""
        msg = OutgoingText(
            sender=sender, recipient=recipient, random_id=next(_random_ids), text=text
        )
        sent = await self.parts.messages.send_text(msg, ORIGIN, now=NOW)
        [theirs] = await history_store.history_ids(
            self.pool, recipient, sender, above=0, below=None, limit=1, ascending=False
        )
        return sent.message.box_id, theirs

    async def pts(self, user: int) -> int:
        value = await self.pool.fetchval(
            "SELECT max(pts) FROM user_update_events WHERE user_id = $1", user
        )
        return int(value or 0)

    async def pin_events(self, user: int) -> list[tuple[int, int | None, list[int], Any]]:
        rows = await self.pool.fetch(
            """
            SELECT pts, peer_user_id, box_ids, payload FROM user_update_events
             WHERE user_id = $1 AND event_type = 'pinned_messages' ORDER BY pts
            """,
            user,
        )
        return [(r["pts"], r["peer_user_id"], list(r["box_ids"]), r["payload"]) for r in rows]

    async def pinned(self, owner: int, peer: int) -> list[int]:
        boxes = await self.parts.history.boxes(
            owner,
            await history_store.history_ids(
                self.pool, owner, peer, above=0, below=None, limit=500, ascending=False
            ),
        )
        return sorted((b.box_id for b in boxes if b.pinned), reverse=True)

    async def pin(self, owner: int, peer: int, box: int, **kw: Any) -> Any:
        kw.setdefault("pinned", True)
        kw.setdefault("one_side", False)
        return await self.parts.pins.update_pinned(owner, peer, box, origin=ORIGIN, now=NOW, **kw)


@pytest.fixture
async def env(make_settings: MakeSettings, tmp_path: Path) -> AsyncIterator[Env]:
    settings = make_settings(tmp_path, send_rate_limit=0)
    async with open_resources(settings, warm=False) as resources:
        yield Env(build_server(settings, resources))


async def test_a_pin_reaches_both_sides_with_one_pts_each(env: Env) -> None:
    alice, bob = await env.user("Alice"), await env.user("Bob")
    mine, theirs = await env.send(alice, bob)
    alice_pts, bob_pts = await env.pts(alice), await env.pts(bob)

    outcome = await env.pin(alice, bob, mine)

    assert outcome is not None and outcome.box_ids == [mine]
    assert outcome.pts == alice_pts + 1 == await env.pts(alice)
    assert await env.pts(bob) == bob_pts + 1
    pinned = MessagesPinned(True).to_json()
    assert await env.pin_events(alice) == [(alice_pts + 1, bob, [mine], pinned)]
    assert await env.pin_events(bob) == [(bob_pts + 1, alice, [theirs], pinned)]
    assert await env.pinned(alice, bob) == [mine]
    assert await env.pinned(bob, alice) == [theirs]
    assert await env.parts.pins.latest(bob, alice) == theirs
    # Only the pinner's session is spared the push of its own event.
    held = await env.pool.fetch(
        "SELECT target_user_id, exclude_session_id FROM dispatch_outbox"
        " WHERE target_user_id = ANY($1::bigint[])",
        [alice, bob],
    )
    assert {(r["target_user_id"], r["exclude_session_id"]) for r in held} >= {
        (alice, ORIGIN.session_id),
        (bob, None),
    }


async def test_a_change_that_changes_nothing_takes_no_pts(env: Env) -> None:
    alice, bob = await env.user(), await env.user()
    mine, _ = await env.send(alice, bob)
    assert await env.pin(alice, bob, mine, pinned=False) is None  # not pinned yet
    await env.pin(alice, bob, mine)
    alice_pts, bob_pts = await env.pts(alice), await env.pts(bob)

    assert await env.pin(alice, bob, mine) is None  # pinned already, on both sides
    assert (await env.pts(alice), await env.pts(bob)) == (alice_pts, bob_pts)


async def test_one_side_pins_only_the_pinners_side(env: Env) -> None:
    alice, bob = await env.user(), await env.user()
    mine, theirs = await env.send(alice, bob)
    bob_pts = await env.pts(bob)

    assert await env.pin(alice, bob, mine, one_side=True) is not None
    assert await env.pinned(alice, bob) == [mine]
    assert await env.pinned(bob, alice) == []
    assert await env.pts(bob) == bob_pts

    # Pinned for both now: only Bob's side changes, and Alice's pts stays.
    alice_pts = await env.pts(alice)
    assert await env.pin(alice, bob, mine) is None
    assert await env.pts(alice) == alice_pts
    assert await env.pinned(bob, alice) == [theirs]

    # Bob unpins on his side only.
    assert await env.pin(bob, alice, theirs, pinned=False, one_side=True) is not None
    assert await env.pinned(bob, alice) == []
    assert await env.pinned(alice, bob) == [mine]


async def test_a_peer_who_blocked_the_pinner_gets_no_pin(env: Env) -> None:
    alice, bob = await env.user(), await env.user()
    mine, _ = await env.send(alice, bob)
    await contacts_store.block(env.pool, bob, alice, datetime.now(UTC))
    bob_pts = await env.pts(bob)

    assert await env.pin(alice, bob, mine) is not None
    assert await env.pinned(alice, bob) == [mine]
    assert await env.pinned(bob, alice) == []
    assert await env.pts(bob) == bob_pts


async def test_own_notes_pin_once(env: Env) -> None:
    alice = await env.user()
    mine, _ = await env.send(alice, alice)
    pts = await env.pts(alice)
    outcome = await env.pin(alice, alice, mine)
    assert outcome is not None and outcome.pts == pts + 1 == await env.pts(alice)
    assert await env.pinned(alice, alice) == [mine]


@pytest.mark.parametrize("box", [0, -1, 2**31, 999_999])
async def test_ids_that_are_no_message_of_the_chat_are_refused(env: Env, box: int) -> None:
    alice, bob = await env.user(), await env.user()
    await env.send(alice, bob)
    pts = await env.pts(alice)
    with pytest.raises(MessageIdInvalid):
        await env.pin(alice, bob, box)
    assert await env.pts(alice) == pts


async def test_a_message_of_another_chat_is_refused(env: Env) -> None:
    alice, bob, carol = await env.user(), await env.user(), await env.user()
    to_carol, _ = await env.send(alice, carol)
    await env.send(alice, bob)
    with pytest.raises(MessageIdInvalid):
        await env.pin(alice, bob, to_carol)


async def pin_all(env: Env, owner: int, peer: int, n: int) -> list[int]:
    """n messages of the chat, pinned on both sides (set directly: fast)."""
    sent = [(await env.send(owner, peer, f"m{i}")) for i in range(n)]
    for user, boxes in ((owner, [m for m, _ in sent]), (peer, [t for _, t in sent])):
        await env.pool.execute(
            "UPDATE message_boxes SET pinned = true"
            " WHERE owner_user_id = $1 AND box_id = ANY($2::integer[])",
            user,
            boxes,
        )
    return sorted((m for m, _ in sent), reverse=True)


async def test_unpin_all_at_its_batch_takes_one_call(env: Env) -> None:
    alice, bob = await env.user(), await env.user()
    mine = await pin_all(env, alice, bob, UNPIN_ALL_BATCH)
    pts, bob_pts = await env.pts(alice), await env.pts(bob)

    done = await env.parts.pins.unpin_all(alice, bob, ORIGIN, NOW)

    assert done.outcome is not None and done.outcome.box_ids == mine and not done.more
    assert (await env.pts(alice), await env.pts(bob)) == (pts + 1, bob_pts + 1)
    assert await env.pinned(alice, bob) == [] and await env.pinned(bob, alice) == []
    again = await env.parts.pins.unpin_all(alice, bob, ORIGIN, NOW)
    assert again.outcome is None and not again.more
    assert await env.pts(alice) == pts + 1


async def test_unpin_all_past_its_batch_pages(env: Env) -> None:
    alice, bob = await env.user(), await env.user()
    mine = await pin_all(env, alice, bob, UNPIN_ALL_BATCH + 1)

    first = await env.parts.pins.unpin_all(alice, bob, ORIGIN, NOW)
    assert first.outcome is not None and first.more
    assert first.outcome.box_ids == mine[:UNPIN_ALL_BATCH]
    second = await env.parts.pins.unpin_all(alice, bob, ORIGIN, NOW)
    assert second.outcome is not None and not second.more
    assert second.outcome.box_ids == mine[UNPIN_ALL_BATCH:]
    assert await env.pinned(bob, alice) == []


async def test_the_latest_pin_and_the_pinned_filter(env: Env) -> None:
    alice, bob = await env.user(), await env.user()
    first, _ = await env.send(alice, bob, "first pinned")
    await env.send(alice, bob, "not pinned")
    last, theirs_last = await env.send(alice, bob, "last pinned")
    assert await env.parts.pins.latest(alice, bob) is None
    await env.pin(alice, bob, first)
    await env.pin(alice, bob, last)
    assert await env.parts.pins.latest(alice, bob) == last
    assert await env.parts.pins.latest(bob, alice) == theirs_last

    search = env.parts.search
    page = await search.search(SearchQuery(owner=alice, peer=bob, text="", pinned=True))
    assert [m.box_id for m in page.messages] == [last, first] and page.count == 2
    assert all(m.pinned for m in page.messages)
    everywhere = await search.search(SearchQuery(owner=alice, peer=None, text="", pinned=True))
    assert [m.box_id for m in everywhere.messages] == [last, first]
    texts = await search.search(SearchQuery(owner=alice, peer=bob, text="last", pinned=True))
    assert [m.box_id for m in texts.messages] == [last]
    media = await search.search(
        SearchQuery(owner=alice, peer=bob, text="", pinned=True, media_kinds=("photo",))
    )
    assert media.messages == []
    assert await search.count(alice, bob, None, pinned=True) == 2
    assert await search.count(alice, bob, None) == 3

    await env.pin(alice, bob, last, pinned=False)
    assert await env.parts.pins.latest(alice, bob) == first


class RowRecorder(SqlRecorder):
    async def fetchrow(self, sql: str, *args: Any) -> None:
        self.calls.append((sql, args))


async def test_pin_queries_read_one_partition_of_boxes(env: Env) -> None:
    alice, bob = await env.user(), await env.user()
    mine, _ = await env.send(alice, bob)
    recorder = RowRecorder()
    spy = cast(Any, recorder)
    await pins_store.pin_target(spy, alice, bob, mine)
    await pins_store.pinned_box_ids(spy, alice, bob, UNPIN_ALL_BATCH)
    await pins_store.latest_pinned(spy, alice, bob)
    await pins_store.peer_copies(spy, alice, bob, [mine])
    for sql, args in recorder.calls:
        # What is checked is that an index can serve each read: with the few rows a
        # test database holds, a sequential scan may be cheaper and the planner would
        # take it whatever the query's shape. Past this setting it still takes one
        # where no index applies.
        async with env.pool.acquire() as conn, conn.transaction():
            await conn.execute("SET LOCAL enable_seqscan = off")
            text = await conn.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args)
        plan = json.loads(text)[0]["Plan"]
        # The pinner's partition, and for the copies the peer's: one each.
        assert len(scanned_partitions(plan, "message_boxes")) <= 2, sql
        assert not [t for t in seq_scans(plan) if t.startswith("message_boxes")], sql


async def test_concurrent_pins_change_once_and_keep_the_log_dense(env: Env) -> None:
    alice, bob = await env.user(), await env.user()
    mine, theirs = await env.send(alice, bob)
    before = await env.pts(alice), await env.pts(bob)

    # The same pin twice at once, and both users pinning the message at once (their
    # writes lock the two sides' rows in the same order).
    outcomes = await asyncio.gather(
        env.pin(alice, bob, mine), env.pin(alice, bob, mine), env.pin(bob, alice, theirs)
    )

    assert await env.pinned(alice, bob) == [mine] and await env.pinned(bob, alice) == [theirs]
    assert sum(o is not None for o in outcomes) >= 1
    for user, start in zip((alice, bob), before, strict=True):
        events = await env.pin_events(user)
        assert len(events) == 1  # one side changes once; every other pts taken is a noop
        rows = await env.pool.fetch(
            "SELECT pts FROM user_update_events WHERE user_id = $1 AND pts > $2 ORDER BY pts",
            user,
            start,
        )
        assert [r["pts"] for r in rows] == list(range(start + 1, start + 1 + len(rows)))


async def test_pins_count_against_the_send_rate(
    make_settings: MakeSettings, tmp_path: Path
) -> None:
    # A pin writes to the peer's log and wakes their devices, as a message does.
    settings = make_settings(tmp_path, send_rate_limit=3)
    async with open_resources(settings, warm=False) as resources:
        env = Env(build_server(settings, resources))
        alice, bob = await env.user("Alice"), await env.user("Bob")
        mine, _ = await env.send(alice, bob)  # 1 of 3
        assert await env.pin(alice, bob, mine) is not None  # 2
        assert await env.pin(alice, bob, mine, pinned=False) is not None  # 3: at the rate
        before = await env.pts(bob)
        with pytest.raises(FloodWait):  # one past it
            await env.pin(alice, bob, mine)
        assert await env.pts(bob) == before  # refused before any pts was taken
        # A pin that changes nothing is not counted (and not refused).
        assert await env.pin(alice, bob, mine, pinned=False) is None
