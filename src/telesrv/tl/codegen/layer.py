"""The generator of ``_generated/layer.py`` (every constructor's class, reader and
writer, and the per-type reader maps) and of the public namespace modules over it
(``types/``, ``functions/``, ``mt.py``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from telesrv.tl.codegen.names import (
    HEADER,
    alias_name,
    class_name,
    map_name,
    public_alias,
    public_name,
    py_field,
)
from telesrv.tl.parser import FIXED_FORMATS, Combinator, Field, TLType

_FIXED_SIZES = {"i": 4, "q": 8, "d": 8, "I": 4}
_VECTOR_READERS = {
    "int": "read_vector_int",
    "long": "read_vector_long",
    "double": "read_vector_double",
    "string": "read_vector_string",
    "bytes": "read_vector_bytes",
    "Bool": "read_vector_bool",
}
_VECTOR_WRITERS = {k: v.replace("read_", "write_") for k, v in _VECTOR_READERS.items()}
_SCALAR_READERS = {
    "string": "read_string",
    "bytes": "read_bytes",
    "Bool": "read_bool",
    "int128": "read_int128",
    "int256": "read_int256",
}

# Telegram's servers accept an InputPeer where the schema asks for an InputUser or an
# InputChannel, and Pyrogram-family clients rely on it (users.getUsers with resolved peers).
# Each peer constructor is read with the reader of the input constructor of the same layout,
# so handlers only ever see the declared type.
LENIENT_ALIASES: dict[str, dict[str, str]] = {
    "InputUser": {
        "inputPeerSelf": "inputUserSelf",
        "inputPeerUser": "inputUser",
        "inputPeerUserFromMessage": "inputUserFromMessage",
    },
    "InputChannel": {
        "inputPeerChannel": "inputChannel",
        "inputPeerChannelFromMessage": "inputChannelFromMessage",
    },
}


# TL primitive -> the Python type its reader returns (and its writer takes).
_PY_TYPES = {
    "int": "int",
    "long": "int",
    "double": "float",
    "int128": "int",
    "int256": "int",
    "string": "str",
    "bytes": "bytes",
    "Bool": "bool",
    "true": "bool",
}


class Generator:
    def __init__(self, combinators: list[Combinator], layer: int) -> None:
        self.combinators = combinators
        self.layer = layer
        self.by_type: dict[str, list[Combinator]] = defaultdict(list)
        for c in combinators:
            if not c.is_function:
                self.by_type[c.result].append(c)
        self.by_name = {c.name: c for c in combinators if not c.is_function}
        self.structs: dict[str, str] = {}  # format -> identifier
        self.bare_written: set[str] = set()
        for c in combinators:
            for f in c.fields:
                if f.type.is_bare_constructor:
                    self.bare_written.add(f.type.name)
        names = [class_name(c) for c in combinators]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise SystemExit(f"generated names collide: {sorted(dupes)}")

    # -- helpers -------------------------------------------------------------------

    def struct_id(self, fmt: str) -> str:
        ident = self.structs.get(fmt)
        if ident is None:
            ident = self.structs[fmt] = f"_S{len(self.structs)}"
        return ident

    def type_map(self, t: TLType) -> str:
        if t.generic_ref or t.name in ("Object", "X") or t.name not in self.by_type:
            return "_ALL"
        return map_name(t.name)

    def py_type(self, t: TLType, shadowed: set[str]) -> str:
        """The annotation of a field of TL type ``t`` (``shadowed``: the class's field names,
        which hide builtins of the same name inside the class body)."""
        if t.vector is not None:
            inner = self.py_type(TLType(t.name), shadowed)
            lst = "builtins.list" if "list" in shadowed else "list"
            return f"{lst}[{inner}]"
        if t.name in _PY_TYPES:
            py = _PY_TYPES[t.name]
            return f"builtins.{py}" if py in shadowed else py
        if t.is_bare_constructor and t.name in self.by_name:
            return class_name(self.by_name[t.name])
        if t.generic_ref or t.name not in self.by_type:
            return "TLObject"
        return alias_name(t.name)

    def field_annotation(self, f: Field, shadowed: set[str]) -> str:
        py = self.py_type(f.type, shadowed)
        if f.type.flag_field is not None and not f.type.is_true:
            return f"{py} | None"
        return py

    def alias_lines_typing(self) -> list[str]:
        """``_T_X = A | B`` for every boxed type; read by type checkers only."""
        lines = []
        for tl_type, cons in sorted(self.by_type.items()):
            union = " | ".join(class_name(c) for c in cons)
            lines.append(f"    {alias_name(tl_type)} = {union}")
        return lines

    # -- writer --------------------------------------------------------------------

    def writer_lines(self, c: Combinator, bare: bool = False) -> list[str]:
        # Flags words are written as 0 and patched at the end, so each optional field is
        # looked at once: present -> set its bit and write it.
        lines: list[str] = []
        flag_vars: dict[str, str] = {}
        used_flags = {f.type.flag_field for f in c.fields if f.type.flag_field}
        for f in c.fields:
            if f.type.is_flags:
                flag_vars[f.name] = f"f{len(flag_vars)}"
        for name in flag_vars:
            if name in used_flags:
                lines.append(f"{flag_vars[name]} = 0")
        lines += self.shared_bit_checks(c)
        for g in c.fields:
            if g.type.is_true and g.type.flag_field:
                fv = flag_vars[g.type.flag_field]
                lines.append(f"if self.{py_field(g.name)}: {fv} |= {1 << g.type.flag_bit}")

        fmt = "" if bare else "I"
        args = [] if bare else [f"{c.id:#010x}"]
        flag_offsets: list[tuple[str, int]] = []  # (flags var, byte offset in the group)
        patches: list[tuple[str, str]] = []  # (flags var, position variable)

        def flush() -> None:
            nonlocal fmt, args, flag_offsets
            if fmt:
                if flag_offsets:
                    lines.append("_p = len(buf)")
                    for var, off in flag_offsets:
                        lines.append(f"_p{var} = _p + {off}")
                        patches.append((var, f"_p{var}"))
                lines.append(f"buf += {self.struct_id('<' + fmt)}.pack({', '.join(args)})")
            fmt, args, flag_offsets = "", [], []

        for i, f in enumerate(c.fields):
            t = f.type
            attr = f"self.{py_field(f.name)}"
            if t.is_flags:
                if f.name in used_flags:
                    flag_offsets.append((flag_vars[f.name], sum(_FIXED_SIZES[x] for x in fmt)))
                fmt += "I"
                args.append("0")
                continue
            if t.is_true:
                continue
            if t.flag_field is None and t.vector is None and t.name in FIXED_FORMATS:
                fmt += FIXED_FORMATS[t.name]
                args.append(attr)
                continue
            flush()
            if t.flag_field is not None:
                var = f"v{i}"
                lines.append(f"{var} = {attr}")
                lines.append(f"if {var} is not None:")
                lines.append(f"    {flag_vars[t.flag_field]} |= {1 << t.flag_bit}")
                lines += ["    " + x for x in self.write_value(t, var)]
            else:
                lines += self.write_value(t, attr)
        flush()
        for var, pos in patches:
            lines.append(f"if {var}: {self.struct_id('<I')}.pack_into(buf, {pos}, {var})")
        return lines

    def shared_bit_checks(self, c: Combinator) -> list[str]:
        """Reject objects whose fields on one flag bit disagree (``views``/``forwards``)."""
        groups: dict[tuple[str, int], list[Field]] = defaultdict(list)
        for f in c.fields:
            if f.type.flag_field:
                groups[(f.type.flag_field, f.type.flag_bit)].append(f)
        lines = []
        for group in groups.values():
            if len(group) < 2:
                continue
            absent = [
                f"(not self.{py_field(f.name)})"
                if f.type.is_true
                else f"(self.{py_field(f.name)} is None)"
                for f in group
            ]
            cond = " or ".join(f"{absent[0]} != {a}" for a in absent[1:])
            names = ", ".join(py_field(f.name) for f in group)
            lines.append(f"if {cond}: mixed_flag_fields(self, {names!r})")
        return lines

    def write_value(self, t: TLType, v: str) -> list[str]:
        if t.vector == "Vector":
            if t.name in _VECTOR_WRITERS:
                return [f"{_VECTOR_WRITERS[t.name]}(buf, {v})"]
            if t.is_bare_constructor:
                raise SystemExit(f"boxed vector of bare {t.name} is not supported")
            return [f"write_vector_boxed(buf, {v})"]
        if t.vector == "vector":
            inner = TLType(t.name)
            return [
                f"buf += pack_i(len({v}))",
                f"for _x in {v}:",
                *["    " + x for x in self.write_value(inner, "_x")],
            ]
        if t.name in FIXED_FORMATS:
            return [f"buf += {self.struct_id('<' + FIXED_FORMATS[t.name])}.pack({v})"]
        if t.name == "string":
            return [f"write_string(buf, {v})"]
        if t.name == "bytes":
            return [f"write_bytes(buf, {v})"]
        if t.name == "Bool":
            return [f"buf += BOOL_TRUE if {v} else BOOL_FALSE"]
        if t.name == "int128":
            return [f"write_int128(buf, {v})"]
        if t.name == "int256":
            return [f"write_int256(buf, {v})"]
        if t.is_bare_constructor:
            return [f"{v}._write_bare(buf)"]
        return [f"{v}._write(buf)"]

    # -- reader --------------------------------------------------------------------

    def reader_lines(self, c: Combinator) -> list[str]:
        lines: list[str] = []
        nested = any(
            not (f.type.is_primitive or f.type.is_flags) or f.type.generic_ref for f in c.fields
        )
        if nested:
            lines.append("if d > MAX_DEPTH: too_deep()")
        lines.append(f"o = _new({class_name(c)})")
        flag_vars: dict[str, str] = {}
        n_flags = 0
        group_fmt = ""
        group_targets: list[str] = []

        def flush() -> None:
            nonlocal group_fmt, group_targets
            if group_fmt:
                size = sum(_FIXED_SIZES[ch] for ch in group_fmt)
                sid = self.struct_id("<" + group_fmt)
                targets = ", ".join(group_targets) + ("," if len(group_targets) == 1 else "")
                lines.append(f"{targets} = {sid}.unpack_from(b, p)")
                lines.append(f"p += {size}")
            group_fmt, group_targets = "", []

        pending_true: list[Field] = []
        for f in c.fields:
            t = f.type
            attr = f"o.{py_field(f.name)}"
            if t.is_flags:
                var = f"f{n_flags}"
                n_flags += 1
                flag_vars[f.name] = var
                group_fmt += "I"
                group_targets.append(var)
                continue
            if t.is_true:
                pending_true.append(f)
                continue
            if t.flag_field is None and t.vector is None and t.name in FIXED_FORMATS:
                group_fmt += FIXED_FORMATS[t.name]
                group_targets.append(attr)
                continue
            flush()
            body = self.read_value(t, attr)
            if t.flag_field is not None:
                fv = flag_vars[t.flag_field]
                lines.append(f"if {fv} & {1 << t.flag_bit}:")
                lines += ["    " + x for x in body]
                lines.append("else:")
                lines.append(f"    {attr} = None")
            else:
                lines += body
        flush()
        for f in pending_true:
            fv = flag_vars[f.type.flag_field or ""]
            lines.append(f"o.{py_field(f.name)} = ({fv} & {1 << f.type.flag_bit}) != 0")
        lines.append("return o, p")
        return lines

    def read_value(self, t: TLType, target: str) -> list[str]:
        if t.vector == "Vector":
            if t.name in _VECTOR_READERS:
                return [f"{target}, p = {_VECTOR_READERS[t.name]}(b, p)"]
            return [f"{target}, p = read_vector_boxed({self.type_map(t)}, b, p, d)"]
        if t.vector == "vector":
            return [f"{target}, p = read_bare_vector({self.element_reader(t)}, b, p, d)"]
        if t.name in FIXED_FORMATS:
            size = _FIXED_SIZES[FIXED_FORMATS[t.name]]
            sid = self.struct_id("<" + FIXED_FORMATS[t.name])
            return [f"{target}, = {sid}.unpack_from(b, p)", f"p += {size}"]
        if t.name in _SCALAR_READERS:
            return [f"{target}, p = {_SCALAR_READERS[t.name]}(b, p)"]
        if t.is_bare_constructor:
            return [f"{target}, p = _r_{class_name(self.by_name[t.name])}(b, p, d + 1)"]
        m = self.type_map(t)
        return [
            "_c, = _U_I(b, p)",
            f"_f = {m}.get(_c)",
            "if _f is None:",
            f"    unexpected(_c, p + 4, {m})",
            f"{target}, p = _f(b, p + 4, d + 1)",
        ]

    def element_reader(self, t: TLType) -> str:
        if t.is_bare_constructor:
            return f"_r_{class_name(self.by_name[t.name])}"
        return f"_boxed_reader({self.type_map(t)})"

    # -- output ---------------------------------------------------------------------

    def class_source(self, c: Combinator) -> list[str]:
        name = class_name(c)
        fields = [f for f in c.fields if not f.type.is_flags]
        slots = ", ".join(repr(py_field(f.name)) for f in fields)
        qual = (c.namespace + "." if c.namespace else "") + public_name(c)
        out = [
            "",
            f"class {name}(TLObject):",
            f"    __slots__ = ({slots}{',' if len(fields) == 1 else ''})",
            f"    __qualname__ = {qual!r}",
            f"    CONSTRUCTOR_ID = {c.id:#010x}",
            f"    TL_NAME = {c.name!r}",
            f"    TL_TYPE = {c.result!r}",
            f"    FIELDS = ({slots}{',' if len(fields) == 1 else ''})",
        ]
        if c.is_function:
            out.append("    IS_FUNCTION = True")
        # Type checkers take each field's type from its annotated __init__ parameter; class
        # level annotations would say the same and cost a dict per class at import.
        shadowed = {py_field(f.name) for f in fields}
        required = [f for f in fields if f.type.flag_field is None]
        optional = [f for f in fields if f.type.flag_field is not None]
        params = [f"{py_field(f.name)}: {self.field_annotation(f, shadowed)}" for f in required]
        for f in optional:
            default = "False" if f.type.is_true else "None"
            params.append(f"{py_field(f.name)}: {self.field_annotation(f, shadowed)} = {default}")
        if params:
            out.append(f"    def __init__(self, *, {', '.join(params)}) -> None:")
            for f in fields:
                out.append(f"        self.{py_field(f.name)} = {py_field(f.name)}")
        out.append("    def _write(self, buf):")
        out += ["        " + x for x in self.writer_lines(c)]
        if c.name in self.bare_written:
            out.append("    def _write_bare(self, buf):")
            out += ["        " + x for x in (self.writer_lines(c, bare=True) or ["pass"])]
        out.append("")
        out.append(f"def _r_{name}(b, p, d):")
        out += ["    " + x for x in self.reader_lines(c)]
        return out

    def layer_module(self) -> str:
        body: list[str] = []
        for c in self.combinators:
            body += self.class_source(c)
        body.append("")
        body.append("_ALL = name_map({}, 'object')")
        for tl_type, cons in sorted(self.by_type.items()):
            entries = ", ".join(f"{c.id:#010x}: _r_{class_name(c)}" for c in cons)
            body.append(f"{map_name(tl_type)} = name_map({{{entries}}}, {tl_type!r})")
            body.append(f"{map_name(tl_type)}[GZIP_PACKED_ID] = gzip_reader({map_name(tl_type)})")
            body.append(f"_ALL.update({map_name(tl_type)})")
        fentries = ", ".join(
            f"{c.id:#010x}: _r_{class_name(c)}" for c in self.combinators if c.is_function
        )
        body.append(f"_ALL.update({{{fentries}}})")
        body.append("_ALL[GZIP_PACKED_ID] = gzip_reader(_ALL)")
        body.append("ALL_READERS = _ALL")
        # After _ALL is complete: there a peer constructor must stay a peer.
        body += self.alias_lines()
        # Annotated: a type inferred from thousands of entries is not known yet when
        # mypyc checks a module of the same import cycle (telesrv.tl.layers.fields).
        body.append(
            "CLASSES: dict[int, type[TLObject]] = {"
            + ", ".join(f"{c.id:#010x}: {class_name(c)}" for c in self.combinators)
            + "}"
        )
        # Type checkers see each boxed type as the union of its constructors; at run time
        # the aliases do not exist, so importing the module costs nothing for them.
        body.append("")
        body.append("if TYPE_CHECKING:")
        body += self.alias_lines_typing()
        structs = [f"{ident} = struct.Struct({fmt!r})" for fmt, ident in self.structs.items()]
        head = [
            HEADER,
            "# ruff: noqa",
            # Annotations stay strings: the classes and unions they name need not exist yet
            # (or at all, at run time).
            "from __future__ import annotations",
            "import builtins",
            "import struct",
            "from typing import TYPE_CHECKING",
            "from telesrv.tl.core import (",
            "    TLObject, MAX_DEPTH, GZIP_PACKED_ID, BOOL_TRUE, BOOL_FALSE, too_deep, unexpected,",
            "    mixed_flag_fields,",
            "    name_map, gzip_reader, read_string, read_bytes, read_bool, read_int128,",
            "    read_int256, read_vector_int, read_vector_long, read_vector_double,",
            "    read_vector_string, read_vector_bytes, read_vector_bool, read_vector_boxed,",
            "    read_bare_vector, read_boxed, write_string, write_bytes, write_int128,",
            "    write_int256, write_vector_int, write_vector_long, write_vector_double,",
            "    write_vector_string, write_vector_bytes, write_vector_bool, write_vector_boxed,",
            "    pack_i,",
            ")",
            "",
            f"LAYER = {self.layer}",
            "_new = object.__new__",
            "_U_I = struct.Struct('<I').unpack_from",
            "",
            "",
            "def _boxed_reader(m):",
            "    return lambda b, p, d: read_boxed(m, b, p, d)",
            "",
            *structs,
        ]
        return "\n".join(head + body) + "\n"

    def alias_lines(self) -> list[str]:
        lines = []
        for tl_type, aliases in sorted(LENIENT_ALIASES.items()):
            if tl_type not in self.by_type:
                continue
            for alias, target in sorted(aliases.items()):
                src, dst = self.by_name.get(alias), self.by_name.get(target)
                if src is None or dst is None:
                    continue
                if src.fields != dst.fields:
                    raise SystemExit(f"alias {alias} -> {target}: the fields differ")
                if dst.result != tl_type:
                    raise SystemExit(f"alias target {target} is not a {tl_type}")
                lines.append(f"{map_name(tl_type)}[{src.id:#010x}] = _r_{class_name(dst)}")
        return lines

    def namespace_modules(self) -> dict[str, str]:
        """Public modules: types/, functions/ (packages with one module per namespace), mt."""
        files: dict[str, str] = {}
        for kind, want_fn in (("types", False), ("functions", True)):
            groups: dict[str | None, list[Combinator]] = defaultdict(list)
            for c in self.combinators:
                if c.schema == "api" and c.is_function == want_fn:
                    groups[c.namespace].append(c)
            subs = sorted(ns for ns in groups if ns)
            # Boxed types whose unions each module re-exports (types only: a function's
            # result type is named through types).
            type_groups: dict[str | None, list[str]] = defaultdict(list)
            if not want_fn:
                for tl_type, cons in self.by_type.items():
                    if any(c.schema == "api" for c in cons):
                        ns = tl_type.rsplit(".", 1)[0] if "." in tl_type else None
                        type_groups[ns].append(tl_type)
            files[f"{kind}/__init__.py"] = self.module(
                groups.get(None, []), type_groups.get(None, []), subs
            )
            for ns in subs:
                files[f"{kind}/{ns}.py"] = self.module(groups[ns], type_groups.get(ns, []))
        mt = [c for c in self.combinators if c.schema == "mt"]
        mt_types = [t for t, cons in self.by_type.items() if all(c.schema == "mt" for c in cons)]
        files["mt.py"] = self.module(mt, mt_types, depth=1)
        files["__init__.py"] = HEADER
        return files

    def module(
        self,
        cons: Iterable[Combinator],
        tl_types: Iterable[str],
        subs: Iterable[str] = (),
        depth: int = 2,
    ) -> str:
        """A public module: its constructors, sub-namespaces and (for type checkers) the
        unions of its boxed types, all listed in ``__all__``."""
        dots = "." * depth
        ordered = sorted(cons, key=lambda c: public_name(c))
        names = [public_name(c) for c in ordered]
        aliases = sorted((public_alias(t), alias_name(t)) for t in tl_types)
        taken = set(names) | set(subs)
        clash = [a for a, _ in aliases if a in taken]
        if clash or len({a for a, _ in aliases}) != len(aliases):
            raise SystemExit(f"type alias names collide: {clash}")
        lines = [HEADER, "# ruff: noqa", "from typing import TYPE_CHECKING", ""]
        lines += [f"from {dots}layer import {class_name(c)} as {public_name(c)}" for c in ordered]
        lines += [f"from . import {ns}" for ns in subs]
        lines.append("")
        lines.append("__all__ = [")
        lines += [f"    {n!r}," for n in [*names, *subs]]
        lines.append("]")
        if aliases:
            lines.append("")
            lines.append("if TYPE_CHECKING:")
            for public, internal in aliases:
                lines.append(f"    from {dots}layer import {internal} as {public}")
            lines.append("")
            lines.append("    __all__ += [")
            lines += [f"        {public!r}," for public, _ in aliases]
            lines.append("    ]")
        return "\n".join(lines) + "\n"
