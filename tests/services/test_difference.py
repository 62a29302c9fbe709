"""UpdatesService.get_difference: both logs in one answer, cut at a byte budget, the
device's two cursors moved to the end of what it was given. Real PostgreSQL/Redis;
a stand-in rendering (each event becomes its kind and pts, of a size the test picks),
as TL is the caller's."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from telesrv.parts import Parts
from telesrv.services.messages import MessageService, Origin, OutgoingText
from telesrv.services.update_log import UpdateEvent, UpdateLogEvents
from telesrv.services.updates import UpdatesService, cut_to_budget
from telesrv.store import auth_keys, state_log
from telesrv.store.counters import Counters

ORIGIN = Origin(auth_key_id=11, session_id=22)
_ids = itertools.count(7_800_000)
_keys = itertools.count(7_900_000_000)
SIZE = 10  # bytes of every rendered event here

Rendered = tuple[str, int]


class Rendering:
    """The caller's side: renders events and remembers what it was asked to render."""

    def __init__(self) -> None:
        self.calls: list[list[Rendered]] = []

    async def __call__(self, events: list[UpdateEvent]) -> list[Rendered]:
        rendered = [(e.event_type, e.pts) for e in events]
        self.calls.append(rendered)
        return rendered


def size(rendered: Rendered) -> int:
    return SIZE


@pytest.fixture
def counters(parts: Parts) -> Counters:
    return parts.counters


@pytest.fixture
def updates(parts: Parts) -> UpdatesService:
    return parts.updates


@pytest.fixture
def messages(parts: Parts) -> MessageService:
    return parts.messages


async def device(db: Any, updates: UpdatesService, user: int) -> tuple[int, int]:
    """A device that asked for its state (as updates.getState leaves it); its key and pts."""
    key = next(_keys)
    assert await auth_keys.save_auth_key(db.pool, key, b"k" * 256)
    head = await updates.state_head(user)
    state = await updates.state(user, 1000)
    await updates.save_device_state(key, user, state.pts, 1000)
    await updates.save_state_cursor(key, user, head)
    return key, state.pts


async def send(messages: MessageService, sender: int, recipient: int, count: int) -> None:
    for n in range(count):
        await messages.send_text(
            OutgoingText(sender=sender, recipient=recipient, random_id=n, text="hi"),
            ORIGIN,
            now=100,
        )


async def block(db: Any, counters: Counters, owner: int, peers: list[int]) -> list[int]:
    """One state event per peer; their ids."""
    events = UpdateLogEvents(counters)
    for peer in peers:
        async with db.pool.acquire() as conn, conn.transaction():
            await events.block_changed(conn, owner, peer, True, None)
    return [i for i, _ in await state_log.events_after(db.pool, owner, 0, 100)][-len(peers) :]


async def device_pts(db: Any, key: int, user: int) -> int:
    return int(
        await db.pool.fetchval(
            "SELECT pts FROM update_states WHERE auth_key_id = $1 AND user_id = $2", key, user
        )
    )


def test_cut_to_budget() -> None:
    assert cut_to_budget([10, 10, 10], 30) == 3  # at the budget: all
    assert cut_to_budget([10, 10, 10], 29) == 2  # past it: cut
    assert cut_to_budget([50, 10], 20) == 1  # one event always goes, so the client moves
    assert cut_to_budget([], 0) == 0


async def test_both_logs_in_one_answer(
    db: Any, counters: Counters, updates: UpdatesService, messages: MessageService
) -> None:
    owner, sender, peer = next(_ids), next(_ids), next(_ids)
    key, pts = await device(db, updates, owner)
    await send(messages, sender, owner, 2)
    ids = await block(db, counters, owner, [peer])
    render = Rendering()
    diff = await updates.get_difference(owner, key, pts, 1000, render, size)
    assert diff.kind == "full"
    assert [e.pts for e in diff.events] == [pts + 1, pts + 2]
    assert [e.event_type for e in diff.state_events] == ["peer_blocked"]
    # One rendering of the whole answer, pts events first.
    assert render.calls == [diff.rendered]
    assert diff.rendered == [
        ("new_message", pts + 1),
        ("new_message", pts + 2),
        ("peer_blocked", 0),
    ]
    assert diff.state.pts == pts + 2
    assert diff.state_cursor == ids[0]
    assert await device_pts(db, key, owner) == pts + 2
    assert await state_log.device_cursor(db.pool, key, owner) == ids[0]

    again = await updates.get_difference(owner, key, diff.state.pts, 1000, render, size)
    assert (again.kind, again.state.pts, again.rendered, again.state_cursor) == (
        "empty",
        pts + 2,
        [],
        None,
    )
    assert len(render.calls) == 1  # nothing to render


async def test_an_empty_difference_moves_nothing(
    db: Any, counters: Counters, updates: UpdatesService
) -> None:
    owner = next(_ids)
    key, pts = await device(db, updates, owner)
    render = Rendering()
    diff = await updates.get_difference(owner, key, pts, 2000, render, size)
    assert (diff.kind, diff.state.pts, diff.events, diff.state_events) == ("empty", pts, [], [])
    assert render.calls == []
    # The device's date stays that of its last state: an empty answer saves nothing.
    date = await db.pool.fetchval(
        "SELECT date FROM update_states WHERE auth_key_id = $1 AND user_id = $2", key, owner
    )
    assert date == 1000


async def test_the_budget_cuts_across_both_logs(
    db: Any, counters: Counters, updates: UpdatesService, messages: MessageService
) -> None:
    owner, sender = next(_ids), next(_ids)
    peers = [next(_ids) for _ in range(2)]
    key, pts = await device(db, updates, owner)
    other, _ = await device(db, updates, owner)
    head = await state_log.head(db.pool, owner)
    await send(messages, sender, owner, 2)
    ids = await block(db, counters, owner, peers)

    # Room for the pts events and one state event: the cursor stops after that one.
    first = await updates.get_difference(owner, key, pts, 1000, Rendering(), size, budget=3 * SIZE)
    assert first.kind == "slice"
    assert [e.pts for e in first.events] == [pts + 1, pts + 2]
    assert len(first.state_events) == 1 and len(first.rendered) == 3
    assert (first.state.pts, first.state_cursor) == (pts + 2, ids[0])
    assert await state_log.device_cursor(db.pool, key, owner) == ids[0]
    rest = await updates.get_difference(
        owner, key, first.state.pts, 1000, Rendering(), size, budget=3 * SIZE
    )
    assert (rest.kind, rest.events, rest.rendered) == ("full", [], [("peer_blocked", 0)])
    assert rest.state_cursor == ids[1]

    # Room for less than the pts events: no state event, and the cursor stays put.
    cut = await updates.get_difference(
        owner, other, pts, 1000, Rendering(), size, budget=SIZE + SIZE // 2
    )
    assert cut.kind == "slice"
    assert [e.pts for e in cut.events] == [pts + 1] and cut.state_events == []
    assert (cut.state.pts, cut.state_cursor, len(cut.rendered)) == (pts + 1, None, 1)
    assert await device_pts(db, other, owner) == pts + 1
    assert await state_log.device_cursor(db.pool, other, owner) == head


async def test_too_long_moves_the_device_to_the_state_log_head(
    db: Any, counters: Counters, updates: UpdatesService
) -> None:
    owner, peer = next(_ids), next(_ids)
    key, pts = await device(db, updates, owner)
    ids = await block(db, counters, owner, [peer])
    render = Rendering()
    diff = await updates.get_difference(owner, key, pts + 1000, 1000, render, size)
    assert (diff.kind, diff.state.pts, diff.state_cursor) == ("too_long", pts, ids[0])
    assert render.calls == []
    assert await state_log.device_cursor(db.pool, key, owner) == ids[0]


async def test_a_stale_hole_is_filled_before_the_answer(
    db: Any, counters: Counters, updates: UpdatesService
) -> None:
    owner = next(_ids)
    key = next(_keys)
    assert await auth_keys.save_auth_key(db.pool, key, b"k" * 256)
    await updates.save_state_cursor(key, owner, 0)
    for pts in (1, 3):
        await db.pool.execute(
            "INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date)"
            " VALUES ($1, $2, 1, 'noop', 100)",
            owner,
            pts,
        )
    # pts 2 may still be committing: the answer stops before it, and it stays a hole.
    fresh = await updates.get_difference(owner, key, 0, 110, Rendering(), size)
    assert (fresh.kind, fresh.state.pts) == ("full", 1)
    again = await updates.get_difference(owner, key, 1, 110, Rendering(), size)
    assert (again.kind, again.state.pts) == ("empty", 1)
    # Long after, it is a dead transaction's pts: filled, and the answer goes past it.
    later = await updates.get_difference(owner, key, 1, 1000, Rendering(), size)
    assert (later.kind, later.state.pts) == ("full", 3)
    assert [e.event_type for e in later.events] == ["noop", "noop"]
