"""The chat list's reactions to a read or a send, run after the message's commit."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

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


# The folder of the archive, where a chat's incoming message may find it.
ARCHIVE_FOLDER = 1


class Stored(Protocol):
    """What a send's transaction says of each message it stored (a text, an album's
    item, a forwarded copy)."""

    @property
    def duplicate(self) -> bool: ...  # an earlier send of this random id
    @property
    def recipient_box(self) -> int | None: ...  # None: the recipient got nothing
    @property
    def recipient_folder_id(self) -> int | None: ...
    @property
    def sender_bar_closed(self) -> bool | None: ...  # its action bar was closed before


@dataclass(frozen=True, slots=True)
class AfterSend:
    """What the chat list does once a send is stored, whatever it carried: a message
    into an archived chat brings it back (``after_delivery``), a send that asks for it
    clears the chat's draft, and writing in a chat closes the sender's action bar."""

    after_delivery: ChatHook | None = None
    after_clear_draft_send: ChatHook | None = None
    after_send: ChatHook | None = None

    async def __call__(
        self,
        sender: int,
        recipient: int,
        stored: Sequence[Stored],
        *,
        clear_draft: bool,
        now: int,
    ) -> None:
        fresh = [s for s in stored if not s.duplicate]
        if not fresh:
            return
        if any(s.recipient_box and s.recipient_folder_id == ARCHIVE_FOLDER for s in fresh):
            await run_hook(self.after_delivery, recipient, sender, now)
        if clear_draft:
            await run_hook(self.after_clear_draft_send, sender, recipient, now)
        if not all(s.sender_bar_closed for s in fresh):
            await run_hook(self.after_send, sender, recipient, now)
