"""Per-viewer access hashes of users: what a client must present with a user id."""

from __future__ import annotations

import hashlib
import hmac
import struct

ACCESS_HASH_MEMO_SIZE = 50_000  # (viewer, target) pairs kept per process


class AccessHashes:
    """Per-viewer access hashes: HMAC-SHA256(secret, viewer id, target id), 8 bytes.

    A client can only present a correct hash for a user it was shown by this server,
    and the hash it got means nothing to any other account.
    """

    def __init__(self, secret: bytes, *, memo_size: int = ACCESS_HASH_MEMO_SIZE) -> None:
        if len(secret) < 16:
            raise ValueError("the access hash secret must have at least 16 bytes")
        self._mac = hmac.new(secret, digestmod=hashlib.sha256)
        # A hash never changes, and the same few pairs are asked for again and again
        # (every send checks the peer's hash, then shows both users in its answer and
        # its push): an HMAC costs far more than a lookup. Emptied when full.
        self._memo: dict[tuple[int, int], int] = {}
        self._memo_size = memo_size

    def for_user(self, viewer_id: int, target_id: int) -> int:
        pair = (viewer_id, target_id)
        value = self._memo.get(pair)
        if value is None:
            mac = self._mac.copy()
            mac.update(struct.pack("<qq", viewer_id, target_id))
            value = int.from_bytes(mac.digest()[:8], "little", signed=True)
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
