"""Teaching the decoder every vendored layer's request ids."""

from __future__ import annotations

import logging

from telesrv.tl._generated import layer as _layer
from telesrv.tl.layers.fields import CLASSES_BY_NAME
from telesrv.tl.layers.upgrade import make_reader, type_map
from telesrv.tl.layers.vendored import every_line
from telesrv.tl.parser import parse_schema

log = logging.getLogger(__name__)


_installed = False


def install() -> None:
    """Teach the decoder every vendored layer's ids (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    all_readers = _layer.ALL_READERS
    type_lines, function_lines = every_line()
    # Each distinct definition once, whichever layers share it.
    text = "\n".join((*type_lines, "---functions---", *function_lines))
    for c in parse_schema(text, "api"):
        if c.id in all_readers or (c.name, c.is_function) not in CLASSES_BY_NAME:
            continue
        try:
            reader = make_reader(c)
        except ValueError:
            log.debug("%s#%08x has fields the reader cannot take", c.name, c.id)
            continue
        if not c.is_function:
            type_map(c.result)[c.id] = reader
        all_readers[c.id] = reader
