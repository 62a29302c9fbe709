"""Values for any TL combinator, driven by the parsed schema.

One builder serves the seeded corpus (a ``random.Random``) and the hypothesis
tests (a ``draw``-backed source): every choice goes through ``Source``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import strategies as st

from telesrv.tl import CLASSES, TLObject
from telesrv.tl.parser import Combinator, Field, TLType, load_all

T = TypeVar("T")

COMBINATORS: list[Combinator] = load_all()
BY_ID: dict[int, Combinator] = {c.id: c for c in COMBINATORS}
BY_NAME: dict[str, Combinator] = {c.name: c for c in COMBINATORS if not c.is_function}
BY_TYPE: dict[str, list[Combinator]] = defaultdict(list)
for _c in COMBINATORS:
    if not _c.is_function:
        BY_TYPE[_c.result].append(_c)

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
EDGE_INTS = (0, 1, -1, 2**31 - 1, -(2**31))
EDGE_LONGS = (0, 1, -1, 2**63 - 1, -(2**63), 2**32, 5_000_000_123)
# Strings whose UTF-8 lengths sit on the TL length-prefix boundaries (253/254 bytes) and
# beyond, plus non-ASCII text of mixed widths.
STRINGS = (
    "",
    "a",
    "hello",
    "Привет, мир",
    "日本語のテキスト",
    "emoji 👍🏽🇺🇦 mix",
    "x" * 253,
    "y" * 254,
    "z" * 255,
    "ü" * 200,  # 400 bytes, long form
    "long " * 300,
)
BYTES_LENGTHS = (0, 1, 3, 4, 253, 254, 255, 1000)
# Telethon's Message "repairs" non-positive chat/channel ids in place when it parses one.
PEER_ID_FIELDS = frozenset({"chat_id", "channel_id"})


class Source:
    """Where the builder's choices come from."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, options: Sequence[T]) -> T:
        return options[self.integer(0, len(options) - 1)]

    def boolean(self) -> bool:
        return self.integer(0, 1) == 1

    def random_bytes(self, n: int) -> bytes:
        return bytes(self.integer(0, 255) for _ in range(n))

    def double(self) -> float:
        return self.choice((0.0, -1.5, 3.141592653589793, 1e300, -2.5e-300))


class DrawSource(Source):
    """Choices drawn by hypothesis, so failures shrink."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return int(self.draw(st.integers(lo, hi)))

    def random_bytes(self, n: int) -> bytes:
        return bytes(self.draw(st.binary(min_size=n, max_size=n)))

    def double(self) -> float:
        return float(self.draw(st.floats(allow_nan=False, allow_infinity=False)))


def _min_depths() -> dict[str, int]:
    """Fewest nesting levels any value of each boxed type needs (optional fields absent)."""
    depth: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for c in COMBINATORS:
            if c.is_function:
                continue
            need = 1
            ok = True
            for f in c.fields:
                t = f.type
                if t.flag_field or t.vector or t.is_primitive or t.is_flags:
                    continue
                inner = BY_NAME[t.name].result if t.is_bare_constructor else t.name
                if t.name in ("Object", "X"):
                    continue
                if inner not in depth:
                    ok = False
                    break
                need = max(need, depth[inner] + 1)
            if ok and need < depth.get(c.result, 10**9):
                depth[c.result] = need
                changed = True
    return depth


MIN_DEPTH = _min_depths()


def combinator_depth(c: Combinator) -> int:
    need = 1
    for f in c.fields:
        t = f.type
        if t.flag_field or t.vector or t.is_primitive or t.is_flags or t.name in ("Object", "X"):
            continue
        inner = BY_NAME[t.name].result if t.is_bare_constructor else t.name
        need = max(need, MIN_DEPTH[inner] + 1)
    return need


# Small requests used where the schema says ``!X`` (invokeWithLayer's query ...).
SIMPLE_QUERIES = ("help.getConfig", "updates.getState", "help.getNearestDc")
FUNCTIONS = {c.name: c for c in COMBINATORS if c.is_function}


@dataclass
class Builder:
    source: Source
    max_depth: int = 4
    max_vector: int = 3
    # Telethon drops an optional Bool that is False (it tests truthiness), so the
    # byte-exact corpus only uses True for those.
    telethon_safe: bool = False

    def build(self, c: Combinator, depth: int = 0, all_present: bool | None = None) -> TLObject:
        """An instance of ``c``; ``all_present`` forces every optional field on or off."""
        cls: type[TLObject] = CLASSES[c.id]
        groups: dict[tuple[str, int], list[Field]] = defaultdict(list)
        for f in c.fields:
            if f.type.flag_field:
                groups[(f.type.flag_field, f.type.flag_bit)].append(f)
        present = {
            key: (all_present if all_present is not None else self.source.boolean())
            for key in groups
        }
        kwargs: dict[str, Any] = {}
        for f in c.fields:
            t = f.type
            if t.is_flags:
                continue
            name = py_name(f.name)
            if t.flag_field:
                on = present[(t.flag_field, t.flag_bit)]
                if t.is_true:
                    kwargs[name] = on
                    continue
                if not on:
                    kwargs[name] = None
                    continue
                if t.name == "Bool" and t.vector is None and self.telethon_safe:
                    kwargs[name] = True
                    continue
            if (
                self.telethon_safe
                and f.name in PEER_ID_FIELDS
                and t.name == "long"
                and not t.vector
            ):
                kwargs[name] = self.source.integer(1, 2**40)
                continue
            kwargs[name] = self.value(t, depth, c)
        return cls(**kwargs)

    def value(self, t: TLType, depth: int, owner: Combinator) -> Any:
        if t.vector:
            if t.is_bare_constructor:
                n = self.source.integer(0, self.max_vector)
            else:
                n = self.source.integer(0, self.max_vector if depth < self.max_depth else 0)
            return [self.value(TLType(t.name), depth + 1, owner) for _ in range(n)]
        s = self.source
        name = t.name
        if name == "int":
            return s.choice(EDGE_INTS) if s.boolean() else s.integer(*INT32)
        if name == "long":
            return s.choice(EDGE_LONGS) if s.boolean() else s.integer(*INT64)
        if name == "double":
            return s.double()
        if name == "int128":
            return s.integer(-(2**127), 2**127 - 1)
        if name == "int256":
            return s.integer(-(2**255), 2**255 - 1)
        if name == "string":
            return s.choice(STRINGS)
        if name == "bytes":
            return s.random_bytes(s.choice(BYTES_LENGTHS))
        if name == "Bool":
            return s.boolean()
        if t.generic_ref or name == "X":
            return self.build(FUNCTIONS[s.choice(SIMPLE_QUERIES)], depth + 1)
        if name == "Object":
            return self.build(BY_NAME["peerUser"], depth + 1, all_present=False)
        if t.is_bare_constructor:
            return self.build(BY_NAME[name], depth + 1)
        return self.build_of_type(name, depth + 1)

    def build_of_type(self, type_name: str, depth: int) -> TLObject:
        options = BY_TYPE[type_name]
        if depth >= self.max_depth:
            # Out of depth budget: only the shallowest constructors, all optionals absent.
            shallow = min(combinator_depth(c) for c in options)
            options = [c for c in options if combinator_depth(c) == shallow]
            return self.build(self.source.choice(options), depth, all_present=False)
        return self.build(self.source.choice(options), depth)


def py_name(name: str) -> str:
    import keyword

    return name + "_" if keyword.iskeyword(name) or name == "self" else name


@st.composite
def any_object(draw: st.DrawFn) -> TLObject:
    """Any constructor or request from the schema, with drawn field values."""
    c = draw(st.sampled_from(COMBINATORS))
    return draw(object_of(c))


def object_of(c: Combinator, max_depth: int = 3) -> st.SearchStrategy[TLObject]:
    @st.composite
    def strategy(draw: st.DrawFn) -> TLObject:
        return Builder(DrawSource(draw), max_depth=max_depth, max_vector=2).build(c)

    return strategy()
