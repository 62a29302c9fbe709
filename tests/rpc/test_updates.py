"""updates.getDifference's answer bounds on real PostgreSQL/Redis: a slice is cut
short at a byte budget, with the intermediate state at the last event kept; state
events (no pts) come in other_updates without moving pts and share the budget."""

from __future__ import annotations

import itertools
from typing import Any, cast

import pytest

from telesrv.parts import Parts
from telesrv.rpc.context import AuthedContext
from telesrv.rpc.updates import UpdatesHandlers
from telesrv.services.messages import Origin, OutgoingText
from telesrv.services.update_log import UpdateLogEvents
from telesrv.store import auth_keys, state_log
from telesrv.store.counters import Counters
from telesrv.tl import functions, types

ORIGIN = Origin(auth_key_id=11, session_id=22)
_ids = itertools.count(7_500_000)
_keys = itertools.count(7_600_000_000)


@pytest.fixture
def counters(parts: Parts) -> Counters:
    return parts.counters


def handlers(parts: Parts, budget: int) -> UpdatesHandlers:
    """The handlers under test, on the server's parts, with their answers' byte budget."""
    return UpdatesHandlers(parts.updates, parts.renderer, difference_bytes=budget)


async def device_ctx(db: Any, user: int) -> AuthedContext:
    key = next(_keys)
    assert await auth_keys.save_auth_key(db.pool, key, b"k" * 256)
    return AuthedContext(
        auth_key_id=key, perm_auth_key_id=key, session_id=1, msg_id=3, now=1000.0, user_id=user
    )


def get_difference(pts: int) -> Any:
    return functions.updates.GetDifference(pts=pts, date=0, qts=0)


def texts(messages: list[types.TypeMessage]) -> list[str]:
    """The text of each message (plain messages, all of them, in these tests)."""
    return [cast(types.Message, m).message for m in messages]


async def test_difference_is_cut_at_the_byte_budget(
    db: Any, counters: Counters, parts: Parts
) -> None:
    a, b = next(_ids), next(_ids)
    messages = parts.messages
    for n in range(5):
        await messages.send_text(
            OutgoingText(sender=a, recipient=b, random_id=n, text=str(n) * (100 * (n + 1))),
            ORIGIN,
            now=100,
        )
    ctx = await device_ctx(db, b)
    whole = await handlers(parts, 10**9).get_difference(ctx, get_difference(0))
    assert isinstance(whole, types.updates.Difference) and len(whole.new_messages) == 5
    sizes = [
        len(bytes(types.UpdateNewMessage(message=m, pts=i + 1, pts_count=1)))
        for i, m in enumerate(whole.new_messages)
    ]
    at = await handlers(parts, sum(sizes[:3])).get_difference(ctx, get_difference(0))
    assert isinstance(at, types.updates.DifferenceSlice)
    assert texts(at.new_messages) == texts(whole.new_messages[:3])
    assert at.intermediate_state.pts == 3
    past = await handlers(parts, sum(sizes[:3]) - 1).get_difference(ctx, get_difference(0))
    assert isinstance(past, types.updates.DifferenceSlice)
    assert len(past.new_messages) == 2 and past.intermediate_state.pts == 2
    # The client goes on from the intermediate state; the bigger messages come fewer a time.
    rest = await handlers(parts, sum(sizes[:3]) - 1).get_difference(ctx, get_difference(2))
    assert isinstance(rest, types.updates.DifferenceSlice)
    assert texts(rest.new_messages) == texts([whole.new_messages[2]])
    assert rest.intermediate_state.pts == 3


async def test_state_events_come_in_other_updates_without_moving_pts(
    db: Any, counters: Counters, parts: Parts
) -> None:
    owner, peer = next(_ids), next(_ids)
    h = handlers(parts, 10**9)
    ctx = await device_ctx(db, owner)
    state = await h.get_state(ctx, functions.updates.GetState())
    assert isinstance(state, types.updates.State)
    events = UpdateLogEvents(counters)
    async with db.pool.acquire() as conn, conn.transaction():
        await events.block_changed(conn, owner, peer, True, ORIGIN)
    diff = await h.get_difference(ctx, get_difference(state.pts))
    assert isinstance(diff, types.updates.Difference)
    assert diff.other_updates == [
        types.UpdatePeerBlocked(peer_id=types.PeerUser(user_id=peer), blocked=True)
    ]
    assert diff.state.pts == state.pts
    empty = await h.get_difference(ctx, get_difference(state.pts))
    assert isinstance(empty, types.updates.DifferenceEmpty)


async def test_difference_too_long_moves_the_device_past_the_state_log(
    db: Any, counters: Counters, parts: Parts
) -> None:
    owner, peer = next(_ids), next(_ids)
    h = handlers(parts, 10**9)
    ctx = await device_ctx(db, owner)
    state = await h.get_state(ctx, functions.updates.GetState())
    assert isinstance(state, types.updates.State)
    events = UpdateLogEvents(counters)
    async with db.pool.acquire() as conn, conn.transaction():
        await events.block_changed(conn, owner, peer, True, None)
    # A client ahead of the log is sent back to reload everything, blocks included.
    too_long = await h.get_difference(ctx, get_difference(state.pts + 1000))
    assert isinstance(too_long, types.updates.DifferenceTooLong)
    after = await h.get_difference(ctx, get_difference(too_long.pts))
    assert isinstance(after, types.updates.DifferenceEmpty)


async def block_events(db: Any, counters: Counters, owner: int, peers: list[int]) -> None:
    events = UpdateLogEvents(counters)
    for peer in peers:
        async with db.pool.acquire() as conn, conn.transaction():
            await events.block_changed(conn, owner, peer, True, None)


def blocked(peer: int) -> types.UpdatePeerBlocked:
    return types.UpdatePeerBlocked(peer_id=types.PeerUser(user_id=peer), blocked=True)


async def test_state_events_are_cut_at_the_byte_budget(
    db: Any, counters: Counters, parts: Parts
) -> None:
    owner = next(_ids)
    peers = [next(_ids) for _ in range(3)]
    size = len(bytes(blocked(peers[0])))  # the same for every peer id
    at_ctx, past_ctx = await device_ctx(db, owner), await device_ctx(db, owner)
    for ctx in (at_ctx, past_ctx):
        state = await handlers(parts, 10**9).get_state(ctx, functions.updates.GetState())
    assert isinstance(state, types.updates.State)
    await block_events(db, counters, owner, peers)
    ids = [i for i, _ in await state_log.events_after(db.pool, owner, 0, 10)]
    assert len(ids) == 3

    at = await handlers(parts, 3 * size).get_difference(at_ctx, get_difference(state.pts))
    assert isinstance(at, types.updates.Difference)
    assert at.other_updates == [blocked(p) for p in peers]
    assert await state_log.device_cursor(db.pool, at_ctx.perm_auth_key_id, owner) == ids[2]

    past_handlers = handlers(parts, 3 * size - 1)
    past = await past_handlers.get_difference(past_ctx, get_difference(state.pts))
    assert isinstance(past, types.updates.DifferenceSlice)
    assert past.other_updates == [blocked(p) for p in peers[:2]]
    assert past.intermediate_state.pts == state.pts
    # The cursor stops at the last event given, so the rest comes next, once.
    assert await state_log.device_cursor(db.pool, past_ctx.perm_auth_key_id, owner) == ids[1]
    rest = await past_handlers.get_difference(past_ctx, get_difference(state.pts))
    assert isinstance(rest, types.updates.Difference)
    assert rest.other_updates == [blocked(peers[2])]
    assert await state_log.device_cursor(db.pool, past_ctx.perm_auth_key_id, owner) == ids[2]
    empty = await past_handlers.get_difference(past_ctx, get_difference(state.pts))
    assert isinstance(empty, types.updates.DifferenceEmpty)

    # A budget below one event still gives one, so the client moves.
    tiny_ctx = await device_ctx(db, owner)
    await handlers(parts, 10**9).get_state(tiny_ctx, functions.updates.GetState())
    await block_events(db, counters, owner, peers[:2])
    tiny = await handlers(parts, 1).get_difference(tiny_ctx, get_difference(state.pts))
    assert isinstance(tiny, types.updates.DifferenceSlice)
    assert tiny.other_updates == [blocked(peers[0])]


async def test_pts_and_state_events_share_the_byte_budget(
    db: Any, counters: Counters, parts: Parts
) -> None:
    owner, sender, peer = next(_ids), next(_ids), next(_ids)
    h = handlers(parts, 10**9)
    ctx = await device_ctx(db, owner)
    state = await h.get_state(ctx, functions.updates.GetState())
    assert isinstance(state, types.updates.State)
    messages = parts.messages
    await messages.send_text(
        OutgoingText(sender=sender, recipient=owner, random_id=1, text="x" * 300), ORIGIN, now=100
    )
    await block_events(db, counters, owner, [peer])
    head = await state_log.head(db.pool, owner)
    whole = await handlers(parts, 10**9).get_difference(
        await device_ctx(db, owner), get_difference(state.pts)
    )
    assert isinstance(whole, types.updates.Difference)
    message_size = len(
        bytes(types.UpdateNewMessage(message=whole.new_messages[0], pts=state.pts + 1, pts_count=1))
    )
    # The message fills the budget: the state event waits for the next call.
    first = await handlers(parts, message_size).get_difference(ctx, get_difference(state.pts))
    assert isinstance(first, types.updates.DifferenceSlice)
    assert len(first.new_messages) == 1 and first.other_updates == []
    assert first.intermediate_state.pts == state.pts + 1
    assert await state_log.device_cursor(db.pool, ctx.perm_auth_key_id, owner) == head - 1
    second = await h.get_difference(ctx, get_difference(first.intermediate_state.pts))
    assert isinstance(second, types.updates.Difference)
    assert second.new_messages == [] and second.other_updates == [blocked(peer)]
    assert await state_log.device_cursor(db.pool, ctx.perm_auth_key_id, owner) == head
