"""The vendored layers' differences from the current one, rebuilt from the generated
change chain (``_generated/old_layers``) when first asked for."""

from __future__ import annotations

from dataclasses import dataclass

from telesrv.tl._generated.old_layers import CHAIN, CURRENT, LINES


@dataclass(frozen=True)
class LayerDiff:
    """What one vendored layer has that the current one lacks, and the reverse."""

    type_lines: tuple[str, ...]  # its constructors whose ids the current layer lacks
    function_lines: tuple[str, ...]  # likewise its functions
    lacking: frozenset[int]  # current constructor ids it does not have


VENDORED: tuple[int, ...] = tuple(sorted(entry[0] for entry in CHAIN))

_line_sets: dict[int, tuple[frozenset[int], frozenset[int]]] = {}
_diffs: dict[int, LayerDiff] = {}


def _walk() -> None:
    lines: set[int] = set()
    lacking: set[int] = set()
    previous = None
    for layer, added, removed, lack_added, lack_removed in CHAIN:
        if previous is not None and previous > CURRENT > layer:
            lines, lacking = set(), set()  # the older side starts from the current layer
        lines = (lines - set(removed)) | set(added)
        lacking = (lacking - set(lack_removed)) | set(lack_added)
        _line_sets[layer] = (frozenset(lines), frozenset(lacking))
        previous = layer


def layer_diff(layer: int) -> LayerDiff:
    """The differences of vendored ``layer`` (KeyError for a layer not vendored)."""
    diff = _diffs.get(layer)
    if diff is None:
        if not _line_sets:
            _walk()
        indexes, lacking = _line_sets[layer]
        chosen = [LINES[i] for i in sorted(indexes)]
        diff = _diffs[layer] = LayerDiff(
            type_lines=tuple(text for is_function, text in chosen if not is_function),
            function_lines=tuple(text for is_function, text in chosen if is_function),
            lacking=lacking,
        )
    return diff


def every_line() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(type lines, function lines) of every vendored layer together, each once."""
    return (
        tuple(text for is_function, text in LINES if not is_function),
        tuple(text for is_function, text in LINES if is_function),
    )
