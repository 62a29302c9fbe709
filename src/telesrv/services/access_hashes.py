"""Per-viewer access hashes of users: what a client must present with a user id."""

from __future__ import annotations

import hashlib
import hmac
import struct

ACCESS_HASH_MEMO_SIZE = 50_000  # (viewer, target) pairs kept per process
_BLOCK = hashlib.sha256().block_size  # HMAC pads the key to this many bytes
_PAIR = struct.Struct("<qq")


class AccessHashes:
    """Per-viewer access hashes: HMAC-SHA256(secret, viewer id, target id), 8 bytes.

    A client can only present a correct hash for a user it was shown by this server,
    and the hash it got means nothing to any other account.
    """

    def __init__(self, secret: bytes, *, memo_size: int = ACCESS_HASH_MEMO_SIZE) -> None:
        if len(secret) < 16:
            raise ValueError("the access hash secret must have at least 16 bytes")
        # HMAC's two keyed SHA-256 states, hashed once: each hash then costs two
        # copies, two updates and two digests, about two thirds of what copying
        # an ``hmac`` object and finishing it costs, for the same value.
        key = hashlib.sha256(secret).digest() if len(secret) > _BLOCK else secret
        key = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))
        # A hash never changes, and the same few pairs are asked for again and again
        # (every send checks the peer's hash, then shows both users in its answer and
        # its push): an HMAC costs far more than a lookup. Emptied when full.
        self._memo: dict[tuple[int, int], int] = {}
        self._memo_size = memo_size

    def for_user(self, viewer_id: int, target_id: int) -> int:
        pair = (viewer_id, target_id)
        value = self._memo.get(pair)
        if value is None:
            inner = self._inner.copy()
            inner.update(_PAIR.pack(viewer_id, target_id))
            outer = self._outer.copy()
            outer.update(inner.digest())
            value = int.from_bytes(outer.digest()[:8], "little", signed=True)
            if len(self._memo) >= self._memo_size:
                self._memo.clear()
            self._memo[pair] = value
        return value

    def check(self, viewer_id: int, target_id: int, access_hash: int) -> bool:
        expected = self.for_user(viewer_id, target_id)
        return hmac.compare_digest(
            expected.to_bytes(8, "little", signed=True),
            (access_hash & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"),
        )
