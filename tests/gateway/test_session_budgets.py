"""Held-answer budgets across sessions, and invokeAfterMsg waits, in the session registry."""

from __future__ import annotations

import asyncio
import hashlib
import os
import resource
from typing import Any

import pytest

from telesrv.gateway.auth_keys import AuthKeyRecord
from telesrv.gateway.sessions import (
    COMPACT_AFTER_SECONDS,
    DETACHED_HELD_SECONDS,
    SessionEntry,
    SessionManager,
)
from telesrv.mtproto.held_messages import HELD_OVERHEAD, MAX_RESENDS
from telesrv.mtproto.session import ServerSession
from telesrv.tl.errors import MsgWaitFailed

NOW = 1_700_000_000.0
BODY = 1000
COST = BODY + HELD_OVERHEAD
KEY_A, KEY_B = 11, 22


class FakeConnection:
    def __init__(self) -> None:
        self.sessions: set[SessionEntry[Any]] = set()
        self.auth_key: AuthKeyRecord | None = None

    def close(self) -> None:
        raise AssertionError("the registry closes no connection in these tests")


def make_session(auth_key: bytes, auth_key_id: int, session_id: int) -> ServerSession:
    return ServerSession(auth_key, auth_key_id, session_id, b"secret", os.urandom)


def manager(**limits: int) -> SessionManager[FakeConnection]:
    return SessionManager(make_session, **limits)


AUTH_KEY = hashlib.sha256(b"k").digest() * 8


def attach(
    m: SessionManager[FakeConnection], key_id: int, session_id: int
) -> SessionEntry[FakeConnection]:
    return m.attach(AUTH_KEY, key_id, key_id, session_id, FakeConnection(), NOW)


def connection_of(entry: SessionEntry[FakeConnection]) -> FakeConnection:
    """The connection an attached entry is on."""
    assert entry.connection is not None
    return entry.connection


def hold(
    entry: SessionEntry[FakeConnection], count: int = 1, size: int = BODY, now: float = NOW
) -> None:
    for _ in range(count):
        entry.session.send_update(b"\0" * size)
    entry.session.flush(now)


def test_per_key_budget_at_and_past_the_limit() -> None:
    m = manager(max_held_bytes_per_key=10 * COST)
    first, second = attach(m, KEY_A, 1), attach(m, KEY_A, 2)
    other = attach(m, KEY_B, 1)
    hold(first, 5)
    hold(second, 5)
    hold(other, 8)
    assert m.held_bytes_of_key(KEY_A) == 10 * COST  # at the limit: all kept
    assert first.session.held_count == 5
    oldest = first.session.oldest_held_id
    hold(second, 1, now=NOW + 1)  # past it: the key's oldest message goes
    assert m.held_bytes_of_key(KEY_A) == 10 * COST
    assert first.session.held_count == 4 and first.session.oldest_held_id != oldest
    assert second.session.held_count == 6
    assert m.held_bytes_of_key(KEY_B) == 8 * COST  # other keys untouched
    assert m.held_bytes == 18 * COST


def test_process_budget_drops_detached_sessions_first() -> None:
    m = manager(max_held_bytes=16 * COST)
    gone, live, newest = attach(m, KEY_A, 1), attach(m, KEY_B, 1), attach(m, KEY_B, 2)
    hold(live, 6)
    hold(gone, 6, now=NOW + 1)
    m.detach(connection_of(gone), NOW + 1)
    hold(newest, 4, now=NOW + 2)
    assert m.held_bytes == 16 * COST  # at the limit
    hold(newest, 1, now=NOW + 3)  # past it: the session without a connection goes first
    assert gone.session.held_count == 0
    assert live.session.held_count == 6 and newest.session.held_count == 5
    # With nothing detached left, the oldest messages of any session go.
    hold(newest, 6, now=NOW + 4)
    assert m.held_bytes == 14 * COST  # trimmed a little below the budget
    assert live.session.held_count == 3 and newest.session.held_count == 11


def test_removed_and_rebound_sessions_keep_the_accounts_right() -> None:
    m = manager()
    a, b = attach(m, KEY_A, 1), attach(m, KEY_A, 2)
    hold(a, 3)
    hold(b, 2)
    m.key_bound(KEY_A, KEY_B)  # sessions of a temporary key move to the permanent one
    assert m.held_bytes_of_key(KEY_A) == 0 and m.held_bytes_of_key(KEY_B) == 5 * COST
    m.remove(a)
    assert m.held_bytes_of_key(KEY_B) == 2 * COST == m.held_bytes
    b.session.drop_held()
    assert m.held_bytes == 0


def test_detached_sessions_lose_held_answers_when_memory_is_tight() -> None:
    m = manager(max_held_bytes=10 * COST)
    gone, live = attach(m, KEY_A, 1), attach(m, KEY_B, 1)
    hold(gone, 3)
    hold(live, 3)
    m.detach(connection_of(gone), NOW)
    m.expire(NOW + DETACHED_HELD_SECONDS)  # 6 of 10 held: tight
    assert gone.session.held_count == 0 and live.session.held_count == 3
    assert m.get(KEY_A, 1) is gone  # the session itself stays until it expires
    loose = manager()
    kept = attach(loose, KEY_A, 1)
    hold(kept, 3)
    loose.detach(connection_of(kept), NOW)
    loose.expire(NOW + DETACHED_HELD_SECONDS)  # plenty of room: kept for a reconnect
    assert kept.session.held_count == 3


# -- invokeAfterMsg -------------------------------------------------------------------


async def test_wait_for_itself_or_a_cycle_fails_at_once() -> None:
    entry = attach(manager(), KEY_A, 1)
    release = asyncio.Event()
    outcomes: dict[int, str] = {}

    async def request(msg_id: int, after: list[int]) -> None:
        try:
            await entry.wait_for_msgs(after)
            await release.wait()
            outcomes[msg_id] = "ran"
        except MsgWaitFailed:
            outcomes[msg_id] = "MSG_WAIT_FAILED"

    loop = asyncio.get_running_loop()
    entry.running[4] = loop.create_task(request(4, [4]))
    await asyncio.sleep(0)
    assert outcomes == {4: "MSG_WAIT_FAILED"}
    entry.running[8] = loop.create_task(request(8, []))
    entry.running[12] = loop.create_task(request(12, [8]))  # 12 waits for 8
    await asyncio.sleep(0)
    entry.running[16] = loop.create_task(request(16, [12]))  # 16 -> 12 -> 8
    await asyncio.sleep(0)
    # 8 waiting for 16 would close the cycle: refused, while the rest is unaffected.
    assert entry._waits_for(frozenset({16}), 8)
    assert entry.waiting == {12: frozenset({8}), 16: frozenset({12})}
    release.set()
    await asyncio.gather(*entry.running.values())
    assert outcomes == {4: "MSG_WAIT_FAILED", 8: "ran", 12: "ran", 16: "ran"}
    assert entry.waiting == {}


async def test_wait_gives_up_after_its_bound() -> None:
    m: SessionManager[FakeConnection] = SessionManager(make_session, max_wait=0.01)
    entry = attach(m, KEY_A, 1)

    async def never() -> None:
        await asyncio.Event().wait()

    stuck = asyncio.get_running_loop().create_task(never())
    entry.running[4] = stuck
    with pytest.raises(MsgWaitFailed):
        await entry.wait_for_msgs([4, 8])
    await entry.wait_for_msgs([8])  # nothing running by that id: no wait
    stuck.cancel()


# -- memory -----------------------------------------------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


@pytest.mark.slow
def test_never_acknowledged_answers_keep_memory_bounded() -> None:
    """3 keys x 64 sessions, each sent 32 answers of 64 KiB that are never acknowledged:
    384 MiB unbounded. The per-key budget holds it to 3 x 16 MiB."""
    m = manager()
    before = _rss()
    peak = 0
    for key in range(3):
        for session_id in range(64):
            entry = attach(m, 100 + key, session_id)
            for _ in range(4):
                hold(entry, 8, size=64 << 10)
            peak = max(peak, _rss() - before)
            if session_id % 2:
                m.detach(connection_of(entry), NOW)
    assert m.held_bytes <= 3 * m.max_held_bytes_per_key
    print(f"RSS growth peak {peak >> 20} MiB, held {m.held_bytes >> 20} MiB")
    assert peak < 3 * m.max_held_bytes_per_key + (64 << 20)
    m.expire(NOW + DETACHED_HELD_SECONDS)  # under half the process budget: nothing to do
    m.max_held_bytes = 32 << 20  # a smaller process budget binds at once
    hold(entry, 1, size=64 << 10)
    assert m.held_bytes <= m.max_held_bytes


def test_new_session_starts_at_the_layer_of_its_key() -> None:
    m = manager()
    first = attach(m, KEY_A, 1)
    first.layer = 158
    assert attach(m, KEY_A, 2).layer == 158
    assert attach(m, KEY_B, 1).layer == 229  # another key: the current layer


def test_reattaching_after_every_resend_stops_resending_it() -> None:
    # Each attach to a new connection is a reconnect: the held update is sent again
    # MAX_RESENDS times, then dropped, and the registry's held bytes follow.
    m = manager()
    entry = attach(m, KEY_A, 1)
    hold(entry, 1)
    sent = []
    for k in range(MAX_RESENDS + 1):
        again = m.attach(AUTH_KEY, KEY_A, KEY_A, 1, FakeConnection(), NOW + k)
        assert again is entry
        sent.append(len(entry.session.flush(NOW + k)))
    assert sent == [1] * MAX_RESENDS + [0]
    assert entry.session.held_count == 0
    assert m.held_bytes_of_key(KEY_A) == 0


def test_idle_sessions_are_compacted_once_at_the_limit() -> None:
    m = manager()
    entry = attach(m, KEY_A, 1)
    compacted: list[float] = []
    entry.session.compact = compacted.append  # type: ignore[method-assign,assignment]
    m.expire(NOW + COMPACT_AFTER_SECONDS - 1)
    assert compacted == [] and not entry.compacted  # just before the limit
    m.expire(NOW + COMPACT_AFTER_SECONDS)
    assert compacted == [NOW + COMPACT_AFTER_SECONDS] and entry.compacted  # at it
    m.expire(NOW + COMPACT_AFTER_SECONDS + 1)
    assert len(compacted) == 1  # once while it stays idle
    m.attach(AUTH_KEY, KEY_A, KEY_A, 1, connection_of(entry), NOW + 400)
    assert not entry.compacted  # a message: compacted again after the next idle spell
    m.expire(NOW + 400 + COMPACT_AFTER_SECONDS)
    assert len(compacted) == 2


def test_compact_idle_compacts_the_sessions_idle_long_enough() -> None:
    m = manager()
    old, recent = attach(m, KEY_A, 1), attach(m, KEY_B, 2)
    recent.last_seen = NOW + 1
    assert m.compact_idle(NOW + COMPACT_AFTER_SECONDS) == 1
    assert old.compacted and not recent.compacted
    assert m.compact_idle(NOW + COMPACT_AFTER_SECONDS) == 0  # not twice
