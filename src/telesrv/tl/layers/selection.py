"""Which layer a client is served: the one it declared where that layer is vendored."""

from __future__ import annotations

from telesrv.tl._generated import layer as _layer
from telesrv.tl.layers.vendored import VENDORED

LAYER: int = _layer.LAYER
# The oldest layer served; a client declaring an older one is refused at
# invokeWithLayer (its answers would hold objects it cannot parse).
MIN_LAYER = 133
# Every layer other than the current one whose schema is vendored.
OTHER_LAYERS: tuple[int, ...] = VENDORED
# The newest layer served: a client declaring a newer one gets this one.
NEWEST_LAYER: int = max((*VENDORED, LAYER))
_SERVED = frozenset((*VENDORED, LAYER))


def served_layer(declared: int) -> int:
    """The layer whose objects a client declaring ``declared`` is sent: that layer
    itself where vendored, the newest above it, else the nearest (the lower on a tie)."""
    if declared in _SERVED:
        return declared
    if declared >= NEWEST_LAYER:
        return NEWEST_LAYER
    return min(_SERVED, key=lambda v: (abs(v - declared), v))
