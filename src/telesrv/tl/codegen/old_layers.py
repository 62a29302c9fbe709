"""The generator of ``_generated/old_layers.py``: what the vendored older layers differ in."""

from __future__ import annotations

from telesrv.tl.codegen.names import HEADER
from telesrv.tl.parser import Combinator, load_old_layers, render_combinator


def old_layers_module(current: list[Combinator], layer: int) -> str:
    """What older layers differ in, as data: per vendored layer below ``layer``, the
    schema lines of its API combinators whose ids the current layer lacks, and the ids
    of current API constructors that layer lacks. Everything else is shared, so
    nothing else is stored (``telesrv.tl.layers`` builds the codecs from this)."""
    api = [c for c in current if c.schema == "api"]
    current_ids = {c.id for c in current}  # some vendored files repeat MTProto types
    lines = [HEADER, "# ruff: noqa", ""]
    lines.append("# layer -> (type lines, function lines, current constructor ids it lacks)")
    lines.append("DIFFS: dict[int, tuple[tuple[str, ...], tuple[str, ...], frozenset[int]]] = {")
    for old_layer, combinators in load_old_layers().items():
        if old_layer >= layer:
            continue
        old_ids = {c.id for c in combinators}
        changed = [c for c in combinators if c.id not in current_ids]
        lines.append(f"    {old_layer}: (")
        for is_function in (False, True):
            lines.append("        (")
            for c in changed:
                if c.is_function == is_function:
                    lines.append(f"            {render_combinator(c)!r},")
            lines.append("        ),")
        lacking = sorted(c.id for c in api if not c.is_function and c.id not in old_ids)
        lines.append("        frozenset({" + ", ".join(f"{i:#010x}" for i in lacking) + "}),")
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"
