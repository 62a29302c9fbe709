"""The generator of ``_generated/old_layers.py``: what the vendored other layers differ in."""

from __future__ import annotations

from telesrv.tl.codegen.names import HEADER
from telesrv.tl.parser import Combinator, load_old_layers, render_combinator


def old_layers_module(current: list[Combinator], layer: int) -> str:
    """What every vendored layer other than ``layer`` differs in, as data.

    Per layer: the schema lines of its API combinators whose ids the current layer
    lacks, and the ids of current API constructors that layer lacks. Everything else
    is shared, so nothing else is stored (``telesrv.tl.layers`` builds the codecs from
    this). Neighbouring layers differ in a few lines, so each layer is stored as the
    change from the next newer vendored one (the newest: from the current layer), and
    each distinct line once."""
    api = [c for c in current if c.schema == "api"]
    current_ids = {c.id for c in current}  # some vendored files repeat MTProto types
    api_type_ids = [c.id for c in api if not c.is_function]
    vendored = {v: cs for v, cs in load_old_layers().items() if v != layer}

    pool: dict[tuple[bool, str], int] = {}
    chain: list[tuple[int, list[int], list[int], list[int], list[int]]] = []
    prev_lines: set[int] = set()
    prev_lacking: set[int] = set()
    # Newer layers first, then older ones from the current layer down: each one's
    # neighbour is the layer closest to the current one.
    order = sorted((v for v in vendored if v > layer), reverse=True)
    order += sorted((v for v in vendored if v < layer), reverse=True)
    for i, old_layer in enumerate(order):
        if i > 0 and order[i - 1] > layer > old_layer:
            prev_lines, prev_lacking = set(), set()  # the older half starts from current
        combinators = vendored[old_layer]
        old_ids = {c.id for c in combinators}
        lines: set[int] = set()
        for c in combinators:
            if c.id in current_ids:
                continue
            key = (c.is_function, render_combinator(c))
            lines.add(pool.setdefault(key, len(pool)))
        lacking = {cid for cid in api_type_ids if cid not in old_ids}
        chain.append(
            (
                old_layer,
                sorted(lines - prev_lines),
                sorted(prev_lines - lines),
                sorted(lacking - prev_lacking),
                sorted(prev_lacking - lacking),
            )
        )
        prev_lines, prev_lacking = lines, lacking

    out = [HEADER, "# ruff: noqa", ""]
    out.append(f"CURRENT = {layer}")
    out.append("")
    out.append("# Every distinct combinator line: (is a function, the line).")
    out.append("LINES: tuple[tuple[bool, str], ...] = (")
    for (is_function, text), _index in sorted(pool.items(), key=lambda kv: kv[1]):
        out.append(f"    ({is_function}, {text!r}),")
    out.append(")")
    out.append("")
    out.append("# (layer, lines added, lines removed, lacking ids added, lacking ids removed),")
    out.append("# each against the entry before it; the first entry of each side of CURRENT")
    out.append("# (newer layers first, then older) is against the current layer.")
    out.append(
        "CHAIN: tuple[tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...], "
        "tuple[int, ...]], ...] = ("
    )
    for old_layer, added, removed, lack_added, lack_removed in chain:
        out.append(
            f"    ({old_layer}, {_ints(added)}, {_ints(removed)}, "
            f"{_ints(lack_added, hexa=True)}, {_ints(lack_removed, hexa=True)}),"
        )
    out.append(")")
    return "\n".join(out) + "\n"


def _ints(values: list[int], *, hexa: bool = False) -> str:
    if not values:
        return "()"
    body = ", ".join(f"{v:#x}" if hexa else str(v) for v in values)
    return f"({body},)"
