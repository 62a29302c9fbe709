"""Keys seen once: a cache keeps a key only from its second sighting.

The projection's cache is keyed by (viewer, target) pairs, and the built TL users
are kept only for the pairs it keeps. Where most pairs come once and never again (an
outbox backlog whose every row is a new pair), keeping each one costs its insertion,
evicts pairs in use, and gives the garbage collector long-lived objects to walk on
every collection, for nothing. A pair seen twice is likely to be seen again, and
from then on it is kept.

What is remembered of a first sighting is the pair's hash, an int the collector
never walks, in a set emptied when full: a pair whose first sighting was emptied out
is kept from its next sighting but one. Two pairs with the same hash let the second be
kept at its first sighting; that costs a cache entry, never a wrong answer, since the
cache checks its own key.
"""

from __future__ import annotations

SIGHTINGS_SIZE = 65_536  # first sightings remembered per cache


class Sightings:
    """The keys seen once lately (at most ``size`` of them; emptied when full, which
    costs less per key than dropping the oldest one by one)."""

    def __init__(self, size: int = SIGHTINGS_SIZE) -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        self.size = size
        self._once: set[int] = set()

    def __len__(self) -> int:
        return len(self._once)

    def again(self, key: object) -> bool:
        """Whether ``key`` was seen once already: true lets the caller keep it (and the
        sighting is spent); false remembers this sighting. With ``size`` 0 every key
        counts as seen again, so the cache keeps everything at first sight."""
        if not self.size:
            return True
        once = self._once
        mark = hash(key)
        if mark in once:
            once.discard(mark)
            return True
        if len(once) >= self.size:
            once.clear()
        once.add(mark)
        return False
