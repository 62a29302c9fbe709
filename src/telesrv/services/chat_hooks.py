"""The chat list's reactions to a read or a delivery, run after the message's commit."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

# (owner, peer, now) -> None: what the chat list does after a read or a delivery
ChatHook = Callable[[int, int, int], Awaitable[None]]


async def run_hook(hook: ChatHook | None, owner: int, peer: int, now: int) -> None:
    """A chat-list hook runs after the message's own commit: should it fail, the message
    stays sent (the client must not retry it) and the failure is logged."""
    if hook is None:
        return
    try:
        await hook(owner, peer, now)
    except Exception:
        log.exception("chat list hook %s failed for %d/%d", hook, owner, peer)
