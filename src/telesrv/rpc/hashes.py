"""Telegram's hash rules for cached lists: how a list's hash is made, and when the
not-modified form answers."""

from __future__ import annotations

from collections.abc import Iterable

_U64 = (1 << 64) - 1


def list_hash(ids: Iterable[int]) -> int:
    """The documented 64-bit hash over a list's ids, as a signed long; 0 for an empty list."""
    h = 0
    for i in ids:
        h ^= h >> 21
        h = (h ^ (h << 35)) & _U64
        h ^= h >> 4
        h = (h + (i & _U64)) & _U64
    return h - (1 << 64) if h >> 63 else h


def not_modified(client_hash: int, ours: int) -> bool:
    """Whether to answer the NotModified form. A hash of 0 means the client holds nothing
    (Telegram's rule): an empty list, whose hash is 0, is always sent in full. Web K keeps
    no cache for a 0-hash answer and fails on a NotModified it has nothing for."""
    return client_hash != 0 and client_hash == ours
