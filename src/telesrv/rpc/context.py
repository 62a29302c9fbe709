"""What a handler knows about the request it serves."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from telesrv.tl import LAYER


async def _no_wait(msg_ids: list[int]) -> None:
    return None


class SessionControl(Protocol):
    """What handlers may ask of the live sessions (implemented by the gateway)."""

    def authorization_changed(self, perm_auth_key_id: int, user_id: int | None) -> None:
        """The key logged in (``user_id``) or out (None): its sessions follow at once."""

    def close_key(self, perm_auth_key_id: int) -> None:
        """Forget every session of the key (its authorization was reset elsewhere)."""

    def key_bound(self, temp_auth_key_id: int, perm_auth_key_id: int) -> None:
        """auth.bindTempAuthKey succeeded: sessions on the temporary key now stand for
        the permanent key."""


class _NoSessions:
    def authorization_changed(self, perm_auth_key_id: int, user_id: int | None) -> None:
        return None

    def close_key(self, perm_auth_key_id: int) -> None:
        return None

    def key_bound(self, temp_auth_key_id: int, perm_auth_key_id: int) -> None:
        return None


@dataclass
class RequestContext:
    """One RPC call: who sent it, on which key and session, at which layer.

    ``auth_key_id`` is the key the message was encrypted with; ``perm_auth_key_id``
    is the permanent key it stands for (itself, or the key a temporary key is bound
    to): authorizations and device state hang off the permanent key.
    """

    auth_key_id: int
    perm_auth_key_id: int
    session_id: int
    msg_id: int
    now: float
    user_id: int | None = None
    layer: int = LAYER
    layer_declared: bool = False  # set by an invokeWithLayer in this call
    without_updates: bool = False
    # Set by the gateway: resolves once the given requests of this session finished
    # (invokeAfterMsg/invokeAfterMsgs).
    wait_for_msgs: Callable[[list[int]], Awaitable[None]] = field(default=_no_wait)
    sessions: SessionControl = field(default_factory=_NoSessions)
    # The client's address as the connection saw it (for the audit log); None when
    # not over a socket (tests calling handlers directly).
    client_ip: str | None = None


@dataclass
class AuthedContext(RequestContext):
    """The context of a method that needs login: the caller is a known user.

    The registry builds it for such methods once the dispatcher has refused calls
    without a user, so their handlers read ``user_id`` as an ``int``.
    """

    user_id: int

    @classmethod
    def of(cls, ctx: RequestContext, user_id: int) -> AuthedContext:
        """A copy of ``ctx`` with its signed-in user (the same call, key and session);
        the wrappers have set layer and flags on ``ctx`` before it is taken."""
        # A copy of the fields without re-running __init__: this runs on every call.
        authed = cls.__new__(cls)
        authed.__dict__.update(ctx.__dict__)
        authed.user_id = user_id
        return authed
