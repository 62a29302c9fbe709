"""TL layer 229: generated codecs, the MTProto service types and the error catalogue.

Use ``from telesrv.tl import types, functions, mt``; ``decode`` parses any boxed
object (including requests) and ``obj.to_bytes()`` serializes one.
"""

from __future__ import annotations

import importlib.util
import os
import py_compile
import struct
import sys
from pathlib import Path


def _ensure_bytecode() -> None:
    # The generated module is ~3 MB of source: compiling it costs ~0.8 s per start,
    # loading its bytecode ~60 ms. Python skips writing the cache under
    # PYTHONDONTWRITEBYTECODE, so write it here (best effort; it is only a cache).
    if not sys.flags.dont_write_bytecode:
        return
    src = Path(__file__).parent / "_generated" / "layer.py"
    try:
        cache = importlib.util.cache_from_source(str(src))
        if os.path.exists(cache) and os.stat(cache).st_mtime >= os.stat(src).st_mtime:
            return
        py_compile.compile(str(src), cfile=cache, doraise=True)
    except (OSError, py_compile.PyCompileError, NotImplementedError):
        pass


_ensure_bytecode()

# Older layers' request ids join the decoder's maps (see telesrv.tl.layers).
from telesrv.tl import layers as _layers  # noqa: E402, F401
from telesrv.tl._generated import functions, mt, types  # noqa: E402
from telesrv.tl._generated.layer import ALL_READERS, CLASSES, LAYER  # noqa: E402
from telesrv.tl.core import (  # noqa: E402
    GZIP_PACKED_ID,
    DecodeError,
    TLObject,
    UnpackBudget,
    current_budget,
    read_boxed,
)

__all__ = [
    "ALL_READERS",
    "CLASSES",
    "LAYER",
    "DecodeError",
    "TLObject",
    "UnpackBudget",
    "decode",
    "functions",
    "mt",
    "read_object",
    "types",
]


_GZIP_PACKED = struct.pack("<I", GZIP_PACKED_ID)


def read_object(
    data: bytes, pos: int = 0, budget: UnpackBudget | None = None
) -> tuple[TLObject, int]:
    """Parse one boxed object (constructor or request) at ``pos``; return it and the end.

    ``gzip_packed`` inside it draws on ``budget`` (a fresh one when None).
    """
    # Bytes without the gzip_packed constructor id cannot hold one: skip the setup.
    token = None if _GZIP_PACKED not in data else current_budget.set(budget or UnpackBudget())
    try:
        return read_boxed(ALL_READERS, data, pos, 0)
    except DecodeError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError, RecursionError) as e:
        # Truncated input surfaces as struct.error/IndexError from the generated readers.
        raise DecodeError(f"malformed TL data: {type(e).__name__}: {e}") from None
    finally:
        if token is not None:
            current_budget.reset(token)


def decode(data: bytes, *, exact: bool = True) -> TLObject:
    """Parse ``data`` as one boxed object; with ``exact`` no bytes may follow it."""
    obj, end = read_object(data, 0)
    if exact and end != len(data):
        raise DecodeError(f"{len(data) - end} trailing bytes after {obj.TL_NAME}")
    return obj
