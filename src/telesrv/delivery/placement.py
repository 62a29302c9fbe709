"""Where a push goes: the sessions of its user in this process, or, with several server
processes, wherever the cluster finds them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from telesrv.delivery.metrics import PUSHES

# (user_id, body, (auth_key_id, session_id) to skip) -> sessions reached
Push = Callable[[int, bytes, tuple[int, int] | None], int]


class Placement(Protocol):
    """Where one batch's users have sessions (several server processes)."""

    def online(self, user_id: int) -> bool: ...

    def reaches(self, user_id: int, exclude: tuple[int, int] | None) -> bool:
        """Whether a push would reach any session but ``exclude``."""
        ...

    def push(self, user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int: ...

    def flush(self) -> None:
        """Hand what ``push`` queued for sessions in other processes to whatever sends
        it (without waiting for it)."""
        ...


# The batch's target users -> their placement
Locate = Callable[[list[int]], Awaitable[Placement]]


class PushTargets:
    """How pushes find sessions: ``locate`` (several processes) when given, else
    ``online`` and ``push`` of this process's gateway."""

    def __init__(
        self, push: Push, online: Callable[[int], bool] | None, locate: Locate | None
    ) -> None:
        self._push = push
        self._online = online  # when given, offline users' rows skip rendering
        self._locate = locate

    async def resolve(
        self, user_ids: list[int]
    ) -> tuple[Callable[[int], bool] | None, Push, Placement | None]:
        """(who is online, how to push, the placement to flush) for these users."""
        if self._locate is None:
            return self._online, self._push, None
        placement = await self._locate(sorted(set(user_ids)))
        return placement.online, placement.push, placement


def reached(
    online: Callable[[int], bool] | None,
    placement: Placement | None,
    user_id: int,
    exclude: tuple[int, int] | None,
) -> bool:
    """Whether a push to the user would reach a session. A group for a user with no
    session, or only the session that caused it (the sender's own row, mostly), is
    done without loading or rendering: offline devices use updates.getDifference."""
    if online is not None and not online(user_id):
        return False
    return placement is None or placement.reaches(user_id, exclude)


def push_now(
    push: Push,
    placement: Placement | None,
    user_id: int,
    body: bytes,
    exclude: tuple[int, int] | None,
) -> None:
    """Queue ``body`` on the user's sessions (here, and through ``placement`` in other
    processes) and hand the latter on."""
    PUSHES.inc(push(user_id, body, exclude))
    if placement is not None:
        placement.flush()
