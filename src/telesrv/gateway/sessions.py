"""Live MTProto sessions: which connection currently carries each session.

A session (auth_key_id, session_id) outlives its TCP connection: when the
client reconnects with the same session id, unacknowledged answers are resent
on the new connection. Sessions without a connection expire after a while.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from telesrv.mtproto.session import ServerSession
from telesrv.tl import LAYER

if TYPE_CHECKING:
    from telesrv.gateway.connection import ClientConnection

SESSION_IDLE_TTL = 30 * 60  # seconds a session is kept without a connection
MAX_SESSIONS_PER_KEY = 64
MAX_SESSIONS = 200_000


@dataclass(eq=False)
class SessionEntry:
    auth_key_id: int
    perm_auth_key_id: int
    session_id: int
    session: ServerSession
    connection: ClientConnection | None = None
    last_seen: float = 0.0
    layer: int = LAYER
    user_id: int | None = None
    user_known: bool = False  # user_id has been looked up for this session
    # Set by the first request not wrapped in invokeWithoutUpdates: only such sessions
    # are pushed updates.
    wants_updates: bool = False
    running: dict[int, asyncio.Task[None]] = field(default_factory=dict)  # msg_id -> RPC task

    @property
    def key(self) -> tuple[int, int]:
        return (self.auth_key_id, self.session_id)

    async def wait_for_msgs(self, msg_ids: list[int]) -> None:
        """invokeAfterMsg(s): wait until those requests of this session finished."""
        tasks = [t for mid in msg_ids if (t := self.running.get(mid)) is not None]
        if tasks:
            await asyncio.wait(tasks)


class SessionManager:
    def __init__(self, make_session: Callable[[bytes, int, int], ServerSession]) -> None:
        self._make_session = make_session
        self._entries: dict[tuple[int, int], SessionEntry] = {}
        # perm_auth_key_id -> its sessions (on the key itself and on bound temporary keys)
        self._by_key: dict[int, dict[tuple[int, int], SessionEntry]] = {}
        self._by_user: dict[int, set[SessionEntry]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, auth_key_id: int, session_id: int) -> SessionEntry | None:
        return self._entries.get((auth_key_id, session_id))

    def attach(
        self,
        auth_key: bytes,
        auth_key_id: int,
        perm_auth_key_id: int,
        session_id: int,
        connection: ClientConnection,
        now: float,
    ) -> SessionEntry:
        entry = self._entries.get((auth_key_id, session_id))
        if entry is None:
            entry = SessionEntry(
                auth_key_id=auth_key_id,
                perm_auth_key_id=perm_auth_key_id,
                session_id=session_id,
                session=self._make_session(auth_key, auth_key_id, session_id),
            )
            self._add(entry, now)
        if entry.connection is not connection:
            old = entry.connection
            entry.connection = connection
            connection.sessions.add(entry)
            if old is not None:
                old.sessions.discard(entry)
            entry.session.on_reconnect()
        entry.last_seen = now
        return entry

    def _add(self, entry: SessionEntry, now: float) -> None:
        per_key = self._by_key.setdefault(entry.perm_auth_key_id, {})
        if len(per_key) >= MAX_SESSIONS_PER_KEY:
            oldest = min(per_key.values(), key=lambda e: e.last_seen)
            self.remove(oldest)
            per_key = self._by_key.setdefault(entry.perm_auth_key_id, {})
        if len(self._entries) >= MAX_SESSIONS:
            self.expire(now, ttl=0)
        self._entries[entry.key] = entry
        per_key[entry.key] = entry

    def detach(self, connection: ClientConnection, now: float) -> None:
        for entry in list(connection.sessions):
            if entry.connection is connection:
                entry.connection = None
                entry.last_seen = now
        connection.sessions.clear()

    def set_user(self, entry: SessionEntry, user_id: int | None) -> None:
        if entry.user_id is not None:
            peers = self._by_user.get(entry.user_id)
            if peers is not None:
                peers.discard(entry)
                if not peers:
                    del self._by_user[entry.user_id]
        entry.user_id = user_id
        entry.user_known = True
        if user_id is not None:
            self._by_user.setdefault(user_id, set()).add(entry)

    def sessions_of_user(self, user_id: int) -> list[SessionEntry]:
        return list(self._by_user.get(user_id, ()))

    def sessions_of_key(self, perm_auth_key_id: int) -> list[SessionEntry]:
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
            entry.perm_auth_key_id = perm_auth_key_id
            self._by_key.setdefault(perm_auth_key_id, {})[entry.key] = entry
            self.set_user(entry, None)
            entry.user_known = False
            if entry.connection is not None:
                entry.connection.auth_key = None

    def close_key(self, perm_auth_key_id: int) -> None:
        for entry in self.sessions_of_key(perm_auth_key_id):
            conn = entry.connection
            self.remove(entry)
            if conn is not None:
                conn.close()

    def remove(self, entry: SessionEntry) -> None:
        if self._entries.pop(entry.key, None) is None:
            return
        per_key = self._by_key.get(entry.perm_auth_key_id)
        if per_key is not None:
            per_key.pop(entry.key, None)
            if not per_key:
                del self._by_key[entry.perm_auth_key_id]
        self.set_user(entry, None)
        for task in entry.running.values():
            task.cancel()
        if entry.connection is not None:
            entry.connection.sessions.discard(entry)
            entry.connection = None

    def expire(self, now: float, ttl: float = SESSION_IDLE_TTL) -> int:
        stale = [
            e
            for e in self._entries.values()
            if e.connection is None and not e.running and now - e.last_seen >= ttl
        ]
        for entry in stale:
            self.remove(entry)
        return len(stale)
