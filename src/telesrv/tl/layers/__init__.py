"""Older API layers: decode their requests, down-convert answers to them.

Constructor ids are hashes of their definitions, so an id from any vendored
layer names one definition whatever layer the client declared. Readers for the
ids older layers have and the current layer lacks are added to the current
layer's per-type reader maps; each upgrades what it read to the current object
of the same name, field by field (new fields take their defaults, renamed or
retyped fields go through the fixups in ``upgrade``). A current-layer request decodes
exactly as before: the maps only gained entries.

Answers and updates for a connection at an older layer are walked once before
serialization: every object whose id that layer lacks is replaced by its
same-name constructor of that layer (fields it lacks dropped, fields it requires
and we lack given defaults), or by a fallback when the layer has no such
constructor at all (``downgrade.FALLBACKS``). Objects the layer shares are written by the
generated writers. Only the differences are stored (``_generated/old_layers``).

Every layer from ``MIN_LAYER`` to the newest vendored one is vendored and served
as itself; a newer layer is served the newest vendored one. A layer below
``MIN_LAYER`` is refused at ``invokeWithLayer``. A layer newer than the current one
is converted the same way: by name, to that layer's constructors.
"""

from __future__ import annotations

from telesrv.tl.layers import adapters as _adapters  # noqa: F401  (fills ADAPTERS)
from telesrv.tl.layers.downgrade import ConversionError, downgrade, downgrade_bytes
from telesrv.tl.layers.install import install
from telesrv.tl.layers.old_objects import OldObject
from telesrv.tl.layers.selection import (
    LAYER,
    MIN_LAYER,
    NEWEST_LAYER,
    OTHER_LAYERS,
    served_layer,
)

__all__ = [
    "LAYER",
    "MIN_LAYER",
    "NEWEST_LAYER",
    "OTHER_LAYERS",
    "ConversionError",
    "OldObject",
    "downgrade",
    "downgrade_bytes",
    "install",
    "served_layer",
]

install()
