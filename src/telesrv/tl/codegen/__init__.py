"""Generate the TL codecs from the vendored schema.

Run ``python -m telesrv.tl.codegen`` after changing anything in
``telesrv/tl/schema`` or the error catalogue; the output in ``telesrv/tl/_generated``
and the refusals in ``telesrv/store/refusals.py`` are committed and never edited by
hand (a test checks they match this generator).

The generated readers are straight-line functions ``(data, pos, depth) ->
(object, pos)`` that read runs of fixed-size fields with one precompiled
``struct`` call; writers compute each flags word in one expression and pack
the constructor id together with the fixed fields that follow it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from telesrv.tl.codegen.errors import errors_module, refusals_module
from telesrv.tl.codegen.layer import LENIENT_ALIASES, Generator
from telesrv.tl.codegen.names import HEADER, pascal, py_field
from telesrv.tl.codegen.old_layers import old_layers_module
from telesrv.tl.parser import load_all, read_layer
from telesrv.tl.rpcerror import load_catalogue

__all__ = [
    "HEADER",
    "LENIENT_ALIASES",
    "OUT_DIR",
    "REFUSALS_PATH",
    "Generator",
    "errors_module",
    "generate",
    "old_layers_module",
    "pascal",
    "py_field",
    "refusals",
    "refusals_module",
    "write",
]

OUT_DIR = Path(__file__).parent.parent / "_generated"
# The catalogue's refusals as domain errors, in the lowest layer that raises them.
REFUSALS_PATH = Path(__file__).parents[2] / "store" / "refusals.py"


def generate(out_dir: Path = OUT_DIR) -> dict[str, str]:
    combinators = load_all()
    layer = read_layer()
    gen = Generator(combinators, layer)
    files = {"layer.py": gen.layer_module(), **gen.namespace_modules()}
    files["errors.py"] = errors_module(load_catalogue())
    files["old_layers.py"] = old_layers_module(combinators, layer)
    return files


def refusals() -> str:
    return refusals_module(load_catalogue())


def write(out_dir: Path = OUT_DIR, refusals_path: Path = REFUSALS_PATH) -> None:
    refusals_path.write_text(refusals())
    files = generate(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    for rel, text in files.items():
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
