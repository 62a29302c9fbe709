"""Server salts, derived rather than stored.

The salt of an auth key for a time period is the first 8 bytes (a signed
little-endian int64) of ``HMAC-SHA256(secret, auth_key_id || period)``, with
``period = floor(now / SALT_PERIOD)``, so nothing needs to be stored. The secret
is drawn anew at each process start (the caller mixes a random nonce into it):
salts from before a restart are refused with ``bad_server_salt``, so a captured
message cannot be executed again by a process that no longer remembers its
msg_id. A salt is accepted during its own period and the next one, so messages in
flight survive a rotation.

Sans-io: ``now`` (unix seconds) is an argument.
"""

from __future__ import annotations

import hmac
import math
import struct

__all__ = [
    "MAX_FUTURE_SALTS",
    "SALT_PERIOD",
    "current_salt",
    "future_salts",
    "is_valid_salt",
    "salt_for",
    "salt_period",
]

SALT_PERIOD = 1800
MAX_FUTURE_SALTS = 64

_KEY_PERIOD = struct.Struct("<qq")
_SALT = struct.Struct("<q")


def salt_period(now: float) -> int:
    return math.floor(now / SALT_PERIOD)


def salt_for(secret: bytes, auth_key_id: int, period: int) -> int:
    """The salt of ``auth_key_id`` (signed int64) for ``period``."""
    digest = hmac.digest(secret, _KEY_PERIOD.pack(auth_key_id, period), "sha256")
    return int(_SALT.unpack_from(digest, 0)[0])


def current_salt(secret: bytes, auth_key_id: int, now: float) -> int:
    return salt_for(secret, auth_key_id, salt_period(now))


def is_valid_salt(secret: bytes, auth_key_id: int, salt: int, now: float) -> bool:
    """Whether ``salt`` is the salt of the current or of the previous period."""
    period = salt_period(now)
    return salt == salt_for(secret, auth_key_id, period) or salt == salt_for(
        secret, auth_key_id, period - 1
    )


def future_salts(
    secret: bytes, auth_key_id: int, now: float, num: int
) -> list[tuple[int, int, int]]:
    """``(valid_since, valid_until, salt)`` for ``num`` periods from the current one.

    ``num`` is clamped to 1..64. ``valid_until`` is the end of the period after the
    salt's own, since that is how long the server keeps accepting it.
    """
    count = min(max(num, 1), MAX_FUTURE_SALTS)
    first = salt_period(now)
    out = []
    for period in range(first, first + count):
        since = period * SALT_PERIOD
        out.append((since, since + 2 * SALT_PERIOD, salt_for(secret, auth_key_id, period)))
    return out
