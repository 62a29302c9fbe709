"""Which layer a client is served: the current one or the nearest vendored older one."""

from __future__ import annotations

from telesrv.tl._generated import layer as _layer
from telesrv.tl._generated.old_layers import DIFFS

LAYER: int = _layer.LAYER
OLD_LAYERS: tuple[int, ...] = tuple(sorted(DIFFS))


def served_layer(declared: int) -> int:
    """The layer whose objects a client declaring ``declared`` is sent."""
    if declared >= LAYER or not OLD_LAYERS:
        return LAYER
    candidates = (*OLD_LAYERS, LAYER)
    return min(candidates, key=lambda v: (abs(v - declared), v))
