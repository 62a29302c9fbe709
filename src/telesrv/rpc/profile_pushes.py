"""Status and name changes pushed live: updateUserStatus and updateUserName to the
online sessions of the users who have the changed user in their contacts or chat list.

These updates carry no pts and are not logged (like typing): a device that was offline
learns the new status or name with the next user it fetches. Each viewer is sent the
user as the projection shows the user to them, so privacy holds: a viewer who may not
see the user's last-seen time (or who is on either side of a block) is sent no status
at all, as the approximation they see does not change with it.

Profile photo changes go the same way as updateUser (the viewer fetches the user
anew): one audience query serves all three kinds.

The fan-out runs in its own task, a chunk of viewers at a time (one holder lookup and
one projection query per chunk, the loop yielded in between), so the request that
caused it answers at once and a user with many contacts stalls nobody.

A client can ask for changes far faster than anyone needs to hear of them (a status
flipped on and off in a loop, a name set again and again), and each fan-out costs in
proportion to the audience. So each kind of change of one user fans out at most once
per FAN_OUT_INTERVAL seconds: the first at once, and the changes made meanwhile
become one fan-out when the interval is over, sending the latest state (the status
and photo are read then; the names are those of the last change). A large audience
(AUDIENCE_CACHE_MIN viewers or more) is kept for AUDIENCE_TTL seconds, so the three
kinds and repeated changes share one query; someone who starts a chat with such a
user meanwhile hears of a later change instead. A small one costs one index probe
and is read anew each time, so a new contact hears of the very next change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Protocol

from telesrv.rpc.users_tl import UsersTl
from telesrv.services.origin import Origin
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
# Each kind of change of one user fans out at most once in this many seconds.
FAN_OUT_INTERVAL = 3.0
# A user's audience is queried again after this many seconds.
AUDIENCE_TTL = 30.0
# Users whose audience is kept per process (the least recently used go first).
AUDIENCE_CACHE_SIZE = 1_000
# Only an audience of at least this many viewers is kept.
AUDIENCE_CACHE_MIN = PUSH_CHUNK


class Located(Protocol):
    """Where a chunk of users have sessions (delivery's Placement fits it)."""

    def online(self, user_id: int) -> bool: ...

    def push(self, user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int: ...

    def flush(self) -> None: ...


Locate = Callable[[list[int]], Awaitable[Located]]
# (user, at most this many) -> who has the user in their contacts or chat list
# (PrivacyService.profile_audience).
Audience = Callable[[int, int], Awaitable[list[int]]]
Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]
# (viewer, the changed user as the viewer sees them) -> the update for that viewer
BuildUpdate = Callable[[int, types.User], "types.TypeUpdate | None"]


def _status_update(viewer: int, user: types.User) -> types.TypeUpdate | None:
    # Only an exact status is news: an approximation ("recently") or none (a block)
    # is what the viewer already shows.
    if isinstance(user.status, types.UserStatusOnline | types.UserStatusOffline):
        return types.UpdateUserStatus(user_id=user.id, status=user.status)
    return None


def _photo_update(viewer: int, user: types.User) -> types.TypeUpdate:
    # The user rides along as the viewer sees them, photo included.
    return types.UpdateUser(user_id=user.id)


Kind = str
Work = Callable[[], Coroutine[object, object, int]]


class ProfilePushes:
    def __init__(
        self,
        audience: Audience,
        users_tl: UsersTl,
        locate: Locate,
        *,
        chunk: int = PUSH_CHUNK,
        max_audience: int = MAX_AUDIENCE,
        interval: float = FAN_OUT_INTERVAL,
        audience_ttl: float = AUDIENCE_TTL,
        audience_cache_size: int = AUDIENCE_CACHE_SIZE,
        audience_cache_min: int = AUDIENCE_CACHE_MIN,
        status_memo_size: int = STATUS_MEMO_SIZE,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
    ) -> None:
        self._audience = audience
        self._users_tl = users_tl
        self._locate = locate
        self._chunk = chunk
        self._max_audience = max_audience
        self._interval = interval
        self._audience_ttl = audience_ttl
        self._audience_cache_size = audience_cache_size
        self._audience_cache_min = audience_cache_min
        self._status_memo_size = status_memo_size
        self._sleep = sleep
        self._clock = clock
        # One task per (kind, user) that fanned out less than an interval ago, and the
        # latest change of that kind waiting for it.
        self._running: dict[tuple[Kind, int], asyncio.Task[None]] = {}
        self._pending: dict[tuple[Kind, int], Work] = {}
        self._last_status: OrderedDict[int, tuple[bool, float]] = OrderedDict()
        # user -> (when queried, the audience)
        self._audiences: OrderedDict[int, tuple[float, list[int]]] = OrderedDict()

    # -- what handlers call -------------------------------------------------------------

    def status_changed(self, user_id: int, *, offline: bool, now: float) -> None:
        last = self._last_status.get(user_id)
        if last is not None and last[0] == (not offline) and now - last[1] < STATUS_REPEAT:
            return
        self._last_status[user_id] = (not offline, now)
        self._last_status.move_to_end(user_id)
        while len(self._last_status) > self._status_memo_size:
            self._last_status.popitem(last=False)
        self._request("status", user_id, lambda: self.push_status(user_id, now))

    def name_changed(
        self,
        user_id: int,
        first_name: str,
        last_name: str,
        username: str | None,
        origin: Origin | None,
        now: float,
    ) -> None:
        self._request(
            "name",
            user_id,
            lambda: self.push_name(user_id, first_name, last_name, username, origin, now),
        )

    def photo_changed(self, user_id: int, now: float) -> None:
        self._request("photo", user_id, lambda: self.push_photo(user_id, now))

    def close(self) -> None:
        """Stop every fan-out still running or waiting (the server is stopping)."""
        self._pending.clear()
        for task in self._running.values():
            task.cancel()
        self._running.clear()

    async def wait_idle(self) -> None:
        """Until every fan-out started or waiting so far is over (tests, benchmarks)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    # -- the fan-outs (awaitable directly by tests and benchmarks) ---------------------

    async def push_status(self, user_id: int, now: float) -> int:
        """updateUserStatus to the audience's online sessions; the sessions reached here."""
        return await self._fan_out(user_id, _status_update, now)

    async def push_photo(self, user_id: int, now: float) -> int:
        """updateUser (with the user as each viewer sees them, photo included) to the
        audience's online sessions. The user's own devices learn of it from the state
        log (services/profile_photos.py)."""
        return await self._fan_out(user_id, _photo_update, now)

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

    def _request(self, kind: Kind, user_id: int, work: Work) -> None:
        key = (kind, user_id)
        # A change already waiting is replaced: only the latest state is worth sending.
        self._pending[key] = work
        if key in self._running:
            return  # the task fans out this one when its interval is over
        task = asyncio.get_running_loop().create_task(self._paced(key))
        self._running[key] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._running.get(key) is t:
                del self._running[key]

        task.add_done_callback(done)

    async def _paced(self, key: tuple[Kind, int]) -> None:
        """Fan out the latest change, then hold the slot for an interval; again while
        changes came meanwhile."""
        while (work := self._pending.pop(key, None)) is not None:
            await self._run(work())
            await self._sleep(self._interval)

    @staticmethod
    async def _run(work: Coroutine[object, object, int]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            # Live pushes are a courtesy: apps fetch users again anyway.
            log.warning("profile push failed", exc_info=True)

    async def audience(self, user_id: int) -> list[int]:
        """Who hears of the user's changes (a large audience kept for the TTL)."""
        now = self._clock()
        kept = self._audiences.get(user_id)
        if kept is not None and now - kept[0] < self._audience_ttl:
            self._audiences.move_to_end(user_id)
            return kept[1]
        found = await self._audience(user_id, self._max_audience)
        if len(found) < self._audience_cache_min:
            self._audiences.pop(user_id, None)
            return found
        self._audiences[user_id] = (now, found)
        self._audiences.move_to_end(user_id)
        while len(self._audiences) > self._audience_cache_size:
            self._audiences.popitem(last=False)
        return found

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
        audience = await self.audience(user_id)
        if own_sessions is not False:
            audience = [user_id, *audience]
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
