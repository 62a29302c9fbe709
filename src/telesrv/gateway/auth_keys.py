"""What the gateway needs of auth keys, as small protocols.

The gateway looks keys up and stores the ones key exchanges make; it does not know
who implements that (the auth key service, wired in ``wiring.py``; a test double).
"""

from __future__ import annotations

from typing import Protocol


class AuthKeyRecord(Protocol):
    """A stored key as the gateway uses it to decrypt and to attach sessions."""

    @property
    def auth_key_id(self) -> int: ...

    @property
    def auth_key(self) -> bytes: ...

    @property
    def perm_auth_key_id(self) -> int | None:
        """The permanent key a temporary key is bound to (None: unbound or permanent)."""
        ...

    @property
    def expires_at(self) -> float | None:
        """Unix time a temporary key stops working (None: a permanent key)."""
        ...


class AuthKeys(Protocol):
    async def get(self, auth_key_id: int, now: float) -> AuthKeyRecord | None:
        """The key, or None when there is none or it expired before ``now``."""
        ...

    async def create(
        self, auth_key_id: int, auth_key: bytes, *, is_temp: bool, expires_at: float | None
    ) -> bool:
        """Store a key a key exchange made; False when its id is already taken."""
        ...

    async def client_layer(self, perm_auth_key_id: int) -> int | None:
        """The layer the key's client last declared (None: it never said), so that a
        session it opens after a restart, or on another process, is served that layer
        before the client declares it again (clients do not repeat it on reconnect)."""
        ...

    async def delete_unused(self, now: float, unused_ttl: float) -> int:
        """Delete expired temporary keys and permanent keys nobody logged in with for
        ``unused_ttl`` seconds; the number deleted."""
        ...
