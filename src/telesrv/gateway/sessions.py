"""Live MTProto sessions: which connection currently carries each session.

A session (auth_key_id, session_id) outlives its TCP connection: when the
client reconnects with the same session id, unacknowledged answers are resent
on the new connection. Sessions without a connection expire after a while.

Unacknowledged answers are held per session within the session's own bounds, and
here within a byte budget per auth key (all its sessions together) and one for the
process. Past a budget the oldest held messages go first; past the process budget
those of sessions without a connection go before any other. A client that misses a
dropped answer re-requests it (msg_resend_req, msgs_state_req) or sends again.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from telesrv.gateway.auth_keys import AuthKeyRecord
from telesrv.mtproto.session import ServerSession
from telesrv.tl import LAYER
from telesrv.tl.errors import MsgWaitFailed

SESSION_IDLE_TTL = 30 * 60  # seconds a session is kept without a connection
MAX_SESSIONS_PER_KEY = 64
MAX_SESSIONS = 200_000
MAX_WAIT_MSGS = 1024  # msg_ids one invokeAfterMsgs may wait for
MAX_WAIT_SECONDS = 60.0  # how long a request may wait for others to finish
MAX_HELD_BYTES_PER_KEY = 16 << 20  # unacknowledged answers of all sessions of one auth key
MAX_HELD_BYTES = 256 << 20  # ... of the whole process
# Once the process budget is crossed, trim to this share of it so that the next
# answers do not each trigger another pass over all sessions.
HELD_TRIM_TO = 0.875
# While the process holds more than this share of its budget, sessions without a
# connection for DETACHED_HELD_SECONDS lose their held answers (long before they expire).
HELD_TIGHT = 0.5
DETACHED_HELD_SECONDS = 60.0
# A session without a message for this long gives back what it no longer needs
# (ServerSession.compact): by then a client may resend none of the msg_ids it
# remembers, up to a thousand of them, some 70 KB, the most an idle session held.
COMPACT_AFTER_SECONDS = 300.0


class Carrier(Protocol):
    """A connection as the session table uses it: the sessions it carries, the key it
    decrypts with, closing it. :class:`~telesrv.gateway.connection.ClientConnection`
    is one. Named here rather than imported because that module attaches its
    connections here; the table and its entries are generic in the connection type,
    so the gateway gets its own type back from ``entry.connection``."""

    @property
    def sessions(self) -> set[SessionEntry[Any]]: ...

    # Cleared when the sessions move to a permanent key (see key_bound).
    auth_key: AuthKeyRecord | None

    def close(self) -> None: ...


C = TypeVar("C", bound=Carrier)


@dataclass(eq=False)
class SessionEntry(Generic[C]):
    auth_key_id: int
    perm_auth_key_id: int
    session_id: int
    session: ServerSession
    connection: C | None = None
    last_seen: float = 0.0
    layer: int = LAYER
    # Whether ``layer`` is known to be the client's (from a sibling session, the
    # stored record, or a call); a new session with no sibling looks it up first.
    layer_known: bool = False
    layer_declared: bool = False  # by an invokeWithLayer on this session
    user_id: int | None = None
    user_known: bool = False  # user_id has been looked up for this session
    # Set by the first request not wrapped in invokeWithoutUpdates: only such sessions
    # are pushed updates.
    wants_updates: bool = False
    running: dict[int, asyncio.Task[None]] = field(default_factory=dict)  # msg_id -> RPC task
    # msg_id of a running request -> the msg_ids it waits for (invokeAfterMsg)
    waiting: dict[int, frozenset[int]] = field(default_factory=dict)
    max_wait: float = MAX_WAIT_SECONDS
    # Set while a flush of acks held back for the answers of running requests is due.
    ack_timer: asyncio.TimerHandle | None = None
    compacted: bool = False  # since its last message (see COMPACT_AFTER_SECONDS)

    @property
    def key(self) -> tuple[int, int]:
        return (self.auth_key_id, self.session_id)

    async def wait_for_msgs(self, msg_ids: list[int]) -> None:
        """invokeAfterMsg(s): wait until those requests of this session finished.

        Requests not running (finished, or never received) are not waited for. A
        wait on itself, directly or through other waiting requests, fails at once
        and any wait fails after ``max_wait`` seconds, with MSG_WAIT_FAILED: either
        would otherwise hold the request, and the session, forever.
        """
        targets = frozenset(msg_ids[:MAX_WAIT_MSGS])
        me = asyncio.current_task()
        my_id = next((mid for mid, task in self.running.items() if task is me), None)
        if my_id is not None and self._waits_for(targets, my_id):
            raise MsgWaitFailed()
        tasks = [t for mid in targets if (t := self.running.get(mid)) is not None]
        if not tasks:
            return
        if my_id is not None:
            self.waiting[my_id] = targets
        try:
            _, pending = await asyncio.wait(tasks, timeout=self.max_wait)
        finally:
            if my_id is not None:
                self.waiting.pop(my_id, None)
        if pending:
            raise MsgWaitFailed()

    def _waits_for(self, targets: frozenset[int], msg_id: int) -> bool:
        """Whether ``targets``, or what they wait for in turn, include ``msg_id``."""
        seen: set[int] = set()
        todo = list(targets)
        while todo:
            mid = todo.pop()
            if mid == msg_id:
                return True
            if mid not in seen:
                seen.add(mid)
                todo.extend(self.waiting.get(mid, ()))
        return False


class SessionManager(Generic[C]):
    def __init__(
        self,
        make_session: Callable[[bytes, int, int], ServerSession],
        *,
        max_held_bytes_per_key: int = MAX_HELD_BYTES_PER_KEY,
        max_held_bytes: int = MAX_HELD_BYTES,
        max_wait: float = MAX_WAIT_SECONDS,
    ) -> None:
        self._make_session = make_session
        self._entries: dict[tuple[int, int], SessionEntry[C]] = {}
        # perm_auth_key_id -> its sessions (on the key itself and on bound temporary keys)
        self._by_key: dict[int, dict[tuple[int, int], SessionEntry[C]]] = {}
        self._by_user: dict[int, set[SessionEntry[C]]] = {}
        self.max_held_bytes_per_key = max_held_bytes_per_key
        self.max_held_bytes = max_held_bytes
        self.max_wait = max_wait  # given to each new session (invokeAfterMsg)
        self.held_bytes = 0  # held by all sessions
        self._held_by_key: dict[int, int] = {}  # perm_auth_key_id -> bytes held
        self._trimming = False
        # Told (user_id, True) when a user's first session here appears and (user_id,
        # False) when the last one goes: where a user can be pushed to, for other processes.
        self.on_user_presence: Callable[[int, bool], None] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, auth_key_id: int, session_id: int) -> SessionEntry[C] | None:
        return self._entries.get((auth_key_id, session_id))

    def attach(
        self,
        auth_key: bytes,
        auth_key_id: int,
        perm_auth_key_id: int,
        session_id: int,
        connection: C,
        now: float,
    ) -> SessionEntry[C]:
        entry = self._entries.get((auth_key_id, session_id))
        if entry is None:
            entry = SessionEntry(
                auth_key_id=auth_key_id,
                perm_auth_key_id=perm_auth_key_id,
                session_id=session_id,
                session=self._make_session(auth_key, auth_key_id, session_id),
                max_wait=self.max_wait,
            )
            # The layer is per auth key too: a new session (clients open extra ones for
            # media or after a restart) starts at the one its key last declared.
            siblings = self._by_key.get(perm_auth_key_id)
            if siblings:
                entry.layer = max(siblings.values(), key=lambda e: e.last_seen).layer
                entry.session.layer = entry.layer
                entry.layer_known = True
            self._add(entry, now)
            entry.session.on_held_change = lambda delta, e=entry: self._held_changed(e, delta)
        if entry.connection is not connection:
            old = entry.connection
            entry.connection = connection
            connection.sessions.add(entry)
            if old is not None:
                old.sessions.discard(entry)
            entry.session.on_reconnect()
        entry.last_seen = now
        entry.compacted = False
        return entry

    def _add(self, entry: SessionEntry[C], now: float) -> None:
        per_key = self._by_key.setdefault(entry.perm_auth_key_id, {})
        if len(per_key) >= MAX_SESSIONS_PER_KEY:
            oldest = min(per_key.values(), key=lambda e: e.last_seen)
            self.remove(oldest)
            per_key = self._by_key.setdefault(entry.perm_auth_key_id, {})
        if len(self._entries) >= MAX_SESSIONS:
            self.expire(now, ttl=0)
        self._entries[entry.key] = entry
        per_key[entry.key] = entry

    def detach(self, connection: C, now: float) -> None:
        for entry in list(connection.sessions):
            if entry.connection is connection:
                entry.connection = None
                entry.last_seen = now
        connection.sessions.clear()

    def set_user(self, entry: SessionEntry[C], user_id: int | None) -> None:
        if entry.user_id is not None:
            peers = self._by_user.get(entry.user_id)
            if peers is not None:
                peers.discard(entry)
                if not peers:
                    del self._by_user[entry.user_id]
                    if self.on_user_presence is not None:
                        self.on_user_presence(entry.user_id, False)
        entry.user_id = user_id
        entry.user_known = True
        if user_id is not None:
            peers = self._by_user.get(user_id)
            if peers is None:
                peers = self._by_user[user_id] = set()
                if self.on_user_presence is not None:
                    self.on_user_presence(user_id, True)
            peers.add(entry)

    def sessions_of_user(self, user_id: int) -> list[SessionEntry[C]]:
        return list(self._by_user.get(user_id, ()))

    def sessions_of_key(self, perm_auth_key_id: int) -> list[SessionEntry[C]]:
        return list(self._by_key.get(perm_auth_key_id, {}).values())

    # SessionControl, for RPC handlers
    def authorization_changed(self, perm_auth_key_id: int, user_id: int | None) -> None:
        for entry in self.sessions_of_key(perm_auth_key_id):
            self.set_user(entry, user_id)

    def key_bound(self, temp_auth_key_id: int, perm_auth_key_id: int) -> None:
        """Sessions already on the temporary key switch to the permanent key's identity:
        indexed under it, user looked up again from its authorization. Their
        connections reload the key (now carrying the binding) on the next message."""
        for entry in list(self._by_key.get(temp_auth_key_id, {}).values()):
            if entry.auth_key_id != temp_auth_key_id:
                continue
            per_key = self._by_key[temp_auth_key_id]
            per_key.pop(entry.key, None)
            if not per_key:
                del self._by_key[temp_auth_key_id]
            held = entry.session.held_bytes
            self._add_key_held(temp_auth_key_id, -held)
            entry.perm_auth_key_id = perm_auth_key_id
            self._add_key_held(perm_auth_key_id, held)
            self._by_key.setdefault(perm_auth_key_id, {})[entry.key] = entry
            self.set_user(entry, None)
            entry.user_known = False
            if entry.connection is not None:
                entry.connection.auth_key = None

    def authorization_unknown(self, perm_auth_key_id: int) -> None:
        """Another process changed the key's login: its sessions here stop being pushed
        to and look the account up again on their next request."""
        for entry in self.sessions_of_key(perm_auth_key_id):
            self.set_user(entry, None)
            entry.user_known = False

    def close_key(self, perm_auth_key_id: int) -> None:
        for entry in self.sessions_of_key(perm_auth_key_id):
            conn = entry.connection
            self.remove(entry)
            if conn is not None:
                conn.close()

    def remove(self, entry: SessionEntry[C]) -> None:
        if self._entries.pop(entry.key, None) is None:
            return
        per_key = self._by_key.get(entry.perm_auth_key_id)
        if per_key is not None:
            per_key.pop(entry.key, None)
            if not per_key:
                del self._by_key[entry.perm_auth_key_id]
        self.set_user(entry, None)
        entry.session.drop_held()
        entry.session.on_held_change = None
        for task in entry.running.values():
            task.cancel()
        if entry.connection is not None:
            entry.connection.sessions.discard(entry)
            entry.connection = None

    def expire(self, now: float, ttl: float = SESSION_IDLE_TTL) -> int:
        stale = []
        for e in self._entries.values():
            idle = now - e.last_seen
            if e.connection is None and not e.running and idle >= ttl:
                stale.append(e)
            elif idle >= COMPACT_AFTER_SECONDS and not e.compacted and not e.running:
                self._compact(e, now)
        for entry in stale:
            self.remove(entry)
        if self.held_bytes > self.max_held_bytes * HELD_TIGHT:
            for e in self._entries.values():
                if e.connection is None and now - e.last_seen >= DETACHED_HELD_SECONDS:
                    e.session.drop_held()
        return len(stale)

    def compact_idle(self, now: float) -> int:
        """Compact every session idle for COMPACT_AFTER_SECONDS at ``now`` (expire does
        it as it goes); returns how many were."""
        idle = [
            e
            for e in self._entries.values()
            if now - e.last_seen >= COMPACT_AFTER_SECONDS and not e.compacted and not e.running
        ]
        for entry in idle:
            self._compact(entry, now)
        return len(idle)

    def _compact(self, entry: SessionEntry[C], now: float) -> None:
        entry.session.compact(now)
        entry.compacted = True

    # -- held answers -------------------------------------------------------------

    def _add_key_held(self, perm_auth_key_id: int, delta: int) -> int:
        total = self._held_by_key.get(perm_auth_key_id, 0) + delta
        if total:
            self._held_by_key[perm_auth_key_id] = total
        else:
            self._held_by_key.pop(perm_auth_key_id, None)
        return total

    def held_bytes_of_key(self, perm_auth_key_id: int) -> int:
        return self._held_by_key.get(perm_auth_key_id, 0)

    def _held_changed(self, entry: SessionEntry[C], delta: int) -> None:
        self.held_bytes += delta
        key_total = self._add_key_held(entry.perm_auth_key_id, delta)
        if delta <= 0 or self._trimming:
            return
        self._trimming = True  # drops below report back here
        try:
            if key_total > self.max_held_bytes_per_key:
                self._trim_key(entry.perm_auth_key_id)
            if self.held_bytes > self.max_held_bytes:
                self._trim_process()
        finally:
            self._trimming = False

    def _trim_key(self, perm_auth_key_id: int) -> None:
        sessions = [e.session for e in self._by_key.get(perm_auth_key_id, {}).values()]
        while self.held_bytes_of_key(perm_auth_key_id) > self.max_held_bytes_per_key:
            oldest = min(
                (s for s in sessions if s.oldest_held_id is not None),
                key=lambda s: s.oldest_held_id or 0,
                default=None,
            )
            if oldest is None:
                break
            oldest.drop_oldest_held()

    def _trim_process(self) -> None:
        target = int(self.max_held_bytes * HELD_TRIM_TO)
        # Sessions without a connection first, least recently seen first: their
        # clients may never come back for what is held.
        detached = sorted(
            (e for e in self._entries.values() if e.connection is None and e.session.held_count),
            key=lambda e: e.last_seen,
        )
        for e in detached:
            if self.held_bytes <= target:
                return
            e.session.drop_held()
        # Then the oldest held messages of any session.
        heap = [
            (oldest, i, e.session)
            for i, e in enumerate(self._entries.values())
            if (oldest := e.session.oldest_held_id) is not None
        ]
        heapq.heapify(heap)
        while heap and self.held_bytes > target:
            _, i, session = heapq.heappop(heap)
            session.drop_oldest_held()
            oldest = session.oldest_held_id
            if oldest is not None:
                heapq.heappush(heap, (oldest, i, session))
