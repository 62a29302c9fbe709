"""Status and name changes pushed live: updateUserStatus and updateUserName to the
online sessions of the users who have the changed user in their contacts or chat list.

These updates carry no pts and are not logged (like typing): a device that was offline
learns the new status or name with the next user it fetches. Each viewer is sent the
user as the projection shows the user to them, so privacy holds: a viewer who may not
see the user's last-seen time (or who is on either side of a block) is sent no status
at all, as the approximation they see does not change with it.

The fan-out runs in its own task, a chunk of viewers at a time (one holder lookup and
one projection query per chunk, the loop yielded in between), so the request that
caused it answers at once and a user with many contacts stalls nobody. A newer change
of the same kind for the same user cancels a fan-out still running: it would only
send what is no longer true.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from telesrv.rpc.users_tl import UsersTl
from telesrv.services.origin import Origin
from telesrv.services.privacy import PrivacyService
from telesrv.tl import types

log = logging.getLogger(__name__)

# Viewers handled per holder lookup and projection query: a chunk costs the loop a
# few tens of milliseconds of building and encoding before it yields.
PUSH_CHUNK = 250
# At most this many viewers are told of one change (contacts and chats together).
MAX_AUDIENCE = 100_000
# The same status again (apps repeat account.updateStatus every minute or so, and
# send "offline" each time they go to the background) within this many seconds of the
# one pushed tells nobody anything new.
STATUS_REPEAT = 60.0
STATUS_MEMO_SIZE = 100_000  # users whose last pushed status is remembered per process


class Located(Protocol):
    """Where a chunk of users have sessions (delivery's Placement fits it)."""

    def online(self, user_id: int) -> bool: ...

    def push(self, user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int: ...

    def flush(self) -> None: ...


Locate = Callable[[list[int]], Awaitable[Located]]
# (viewer, the changed user as the viewer sees them) -> the update for that viewer
BuildUpdate = Callable[[int, types.User], "types.TypeUpdate | None"]


def _status_update(viewer: int, user: types.User) -> types.TypeUpdate | None:
    # Only an exact status is news: an approximation ("recently") or none (a block)
    # is what the viewer already shows.
    if isinstance(user.status, types.UserStatusOnline | types.UserStatusOffline):
        return types.UpdateUserStatus(user_id=user.id, status=user.status)
    return None


class ProfilePushes:
    def __init__(
        self,
        privacy: PrivacyService,
        users_tl: UsersTl,
        locate: Locate,
        *,
        chunk: int = PUSH_CHUNK,
        max_audience: int = MAX_AUDIENCE,
    ) -> None:
        self._privacy = privacy
        self._users_tl = users_tl
        self._locate = locate
        self._chunk = chunk
        self._max_audience = max_audience
        self._running: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._last_status: OrderedDict[int, tuple[bool, float]] = OrderedDict()

    # -- what handlers call -------------------------------------------------------------

    def status_changed(self, user_id: int, *, offline: bool, now: float) -> None:
        last = self._last_status.get(user_id)
        if last is not None and last[0] == (not offline) and now - last[1] < STATUS_REPEAT:
            return
        self._last_status[user_id] = (not offline, now)
        self._last_status.move_to_end(user_id)
        while len(self._last_status) > STATUS_MEMO_SIZE:
            self._last_status.popitem(last=False)
        self._start("status", user_id, self.push_status(user_id, now))

    def name_changed(
        self,
        user_id: int,
        first_name: str,
        last_name: str,
        username: str | None,
        origin: Origin | None,
        now: float,
    ) -> None:
        self._start(
            "name",
            user_id,
            self.push_name(user_id, first_name, last_name, username, origin, now),
        )

    def close(self) -> None:
        """Stop every fan-out still running (the server is stopping)."""
        for task in self._running.values():
            task.cancel()
        self._running.clear()

    async def wait_idle(self) -> None:
        """Until every fan-out started so far is over (tests, benchmarks)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    # -- the fan-outs (awaitable directly by tests and benchmarks) ---------------------

    async def push_status(self, user_id: int, now: float) -> int:
        """updateUserStatus to the audience's online sessions; the sessions reached here."""
        return await self._fan_out(user_id, _status_update, now)

    async def push_name(
        self,
        user_id: int,
        first_name: str,
        last_name: str,
        username: str | None,
        origin: Origin | None,
        now: float,
    ) -> int:
        """updateUserName with the user's own names (also to viewers who saved other
        names for them: their apps keep both), to the audience and to the user's other
        sessions."""

        def build(viewer: int, user: types.User) -> types.TypeUpdate:
            usernames = (
                [types.Username(username=username, active=True, editable=viewer == user_id)]
                if username
                else []
            )
            return types.UpdateUserName(
                user_id=user_id, first_name=first_name, last_name=last_name, usernames=usernames
            )

        exclude = (origin.auth_key_id, origin.session_id) if origin is not None else None
        return await self._fan_out(user_id, build, now, own_sessions=exclude or True)

    # -- internals ----------------------------------------------------------------------

    def _start(self, kind: str, user_id: int, work: Coroutine[Any, Any, int]) -> None:
        key = (kind, user_id)
        earlier = self._running.pop(key, None)
        if earlier is not None:
            earlier.cancel()
        task = asyncio.get_running_loop().create_task(self._run(work))
        self._running[key] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._running.get(key) is t:
                del self._running[key]

        task.add_done_callback(done)

    @staticmethod
    async def _run(work: Coroutine[Any, Any, int]) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await work
            except Exception:
                # Live pushes are a courtesy: apps fetch users again anyway.
                log.warning("profile push failed", exc_info=True)

    async def _fan_out(
        self,
        user_id: int,
        build: BuildUpdate,
        now: float,
        *,
        own_sessions: tuple[int, int] | bool = False,
    ) -> int:
        """Push ``build``'s update for each online viewer of the audience (and the
        user's own sessions but ``own_sessions`` when it is given), a chunk at a time."""
        audience = await self._privacy.profile_audience(user_id, self._max_audience)
        if own_sessions is not False:
            audience.insert(0, user_id)
        own_exclude = own_sessions if isinstance(own_sessions, tuple) else None
        reached = 0
        for start in range(0, len(audience), self._chunk):
            chunk = audience[start : start + self._chunk]
            placement = await self._locate(chunk)
            online = [viewer for viewer in chunk if placement.online(viewer)]
            if online:
                shown = await self._users_tl.many({viewer: [user_id] for viewer in online}, now)
                for viewer in online:
                    users = shown.get(viewer)
                    if not users or not isinstance(users[0], types.User):
                        continue
                    update = build(viewer, users[0])
                    if update is None:
                        continue
                    body = types.Updates(
                        updates=[update], users=[users[0]], chats=[], date=int(now), seq=0
                    ).to_bytes()
                    exclude = own_exclude if viewer == user_id else None
                    reached += placement.push(viewer, bytes(body), exclude)
                placement.flush()
            # Other requests run between chunks.
            await asyncio.sleep(0)
        return reached
