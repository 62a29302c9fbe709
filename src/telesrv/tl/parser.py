"""Parse TL schema text into combinator definitions.

Only the subset that Telegram's schemas use is understood: one combinator per
line, ``name#id field:type ... = Result;``, ``{X:Type}`` generics, ``#`` flag
fields, ``flags.N?T`` conditionals, ``Vector<T>``/``vector<T>`` and ``!X``.
"""

from __future__ import annotations

import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

PRIMITIVES = frozenset(
    {"int", "long", "double", "int128", "int256", "string", "bytes", "Bool", "true"}
)
# Fixed-size primitives, as struct format characters.
FIXED_FORMATS = {"int": "i", "long": "q", "double": "d", "#": "I"}


class SchemaError(ValueError):
    """The schema text has a line this parser does not understand."""


@dataclass(frozen=True)
class TLType:
    """A field's type: ``Vector<int>``, ``flags.3?string``, ``!X`` ..."""

    name: str  # innermost type name: int, string, Message, X, Object, future_salt
    vector: str | None = None  # "Vector" (boxed) or "vector" (bare) when a list
    flag_field: str | None = None  # "flags"/"flags2" when conditional
    flag_bit: int = 0
    generic_ref: bool = False  # the ``!X`` in ``query:!X``

    @property
    def is_flags(self) -> bool:
        return self.name == "#"

    @property
    def is_true(self) -> bool:
        return self.name == "true"

    @property
    def is_primitive(self) -> bool:
        return self.name in PRIMITIVES

    @property
    def is_bare_constructor(self) -> bool:
        """A lowercase non-primitive name such as ``future_salt``: written without its id."""
        short = self.name.rsplit(".", 1)[-1]
        return not self.is_primitive and short[:1].islower()


@dataclass(frozen=True)
class Field:
    name: str
    type: TLType


@dataclass(frozen=True)
class Combinator:
    name: str  # full TL name, e.g. "messages.sendMessage"
    id: int
    fields: tuple[Field, ...]
    result: str  # result type as written, e.g. "Updates", "Vector<long>", "X"
    is_function: bool
    schema: str  # "api" or "mt"
    generic: str | None = None  # "X" for {X:Type}

    @property
    def namespace(self) -> str | None:
        return self.name.rsplit(".", 1)[0] if "." in self.name else None

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


_LINE = re.compile(
    r"^(?P<name>[\w.]+)(?:#(?P<id>[0-9a-fA-F]{1,8}))?"
    r"(?P<generics>(?:\s+\{\w+:Type\})*)"
    r"(?P<fields>(?:\s+[^=\s]+)*)\s*=\s*(?P<result>[^;]+);$"
)
_FIELD = re.compile(r"^(?P<name>\w+):(?P<type>\S+)$")
_CONDITIONAL = re.compile(r"^(?P<flag>\w+)\.(?P<bit>\d+)\?(?P<rest>.+)$")
_VECTOR = re.compile(r"^(?P<kind>[Vv]ector)<(?P<inner>[^<>]+)>$")


def _parse_type(text: str) -> TLType:
    flag_field = None
    flag_bit = 0
    cond = _CONDITIONAL.match(text)
    if cond:
        flag_field = cond["flag"]
        flag_bit = int(cond["bit"])
        if not 0 <= flag_bit <= 31:
            raise SchemaError(f"flag bit out of range in {text!r}")
        text = cond["rest"]
    if text.startswith("!"):
        return TLType(text[1:], generic_ref=True, flag_field=flag_field, flag_bit=flag_bit)
    vec = _VECTOR.match(text)
    if vec:
        inner = vec["inner"]
        if "<" in inner or inner.startswith("%"):
            raise SchemaError(f"unsupported nested type {text!r}")
        return TLType(inner, vector=vec["kind"], flag_field=flag_field, flag_bit=flag_bit)
    if "<" in text or text.startswith("%"):
        raise SchemaError(f"unsupported type {text!r}")
    return TLType(text, flag_field=flag_field, flag_bit=flag_bit)


def _crc_id(line: str) -> int:
    """The id Telegram derives from a combinator line that does not state one."""
    cleaned = re.sub(r"\s+", " ", line.rstrip(";")).replace(":bytes ", ":string ")
    cleaned = re.sub(r" \w+:flags\d*\.\d+\?true", "", cleaned)
    cleaned = cleaned.replace("<", " ").replace(">", "").replace("{", "").replace("}", "")
    return zlib.crc32(cleaned.encode())


def parse_schema(text: str, schema: str) -> list[Combinator]:
    """Every combinator in ``text``; comments and section markers are skipped."""
    out: list[Combinator] = []
    is_function = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if line == "---functions---":
            is_function = True
            continue
        if line == "---types---":
            is_function = False
            continue
        m = _LINE.match(line)
        if not m:
            raise SchemaError(f"{schema}:{number}: cannot parse {raw!r}")
        generics = re.findall(r"\{(\w+):Type\}", m["generics"])
        fields = []
        flag_names = set()
        for part in m["fields"].split():
            fm = _FIELD.match(part)
            if not fm:
                raise SchemaError(f"{schema}:{number}: bad field {part!r}")
            ftype = _parse_type(fm["type"])
            if ftype.flag_field and ftype.flag_field not in flag_names:
                raise SchemaError(f"{schema}:{number}: {part!r} before its flags field")
            if ftype.is_flags:
                flag_names.add(fm["name"])
            fields.append(Field(fm["name"], ftype))
        cid = int(m["id"], 16) if m["id"] else _crc_id(line)
        out.append(
            Combinator(
                name=m["name"],
                id=cid,
                fields=tuple(fields),
                result=m["result"].strip(),
                is_function=is_function,
                schema=schema,
                generic=generics[0] if generics else None,
            )
        )
    return out


SCHEMA_DIR = Path(__file__).parent / "schema"
SCHEMA_FILES = (
    ("mt", "auth_key.tl"),
    ("mt", "sys_msgs.tl"),
    ("mt", "extra.tl"),
    ("api", "main_api.tl"),
)


def read_layer() -> int:
    text = (SCHEMA_DIR / "main_api.tl").read_text()
    m = re.search(r"//\s*LAYER\s+(\d+)", text)
    if not m:
        raise SchemaError("main_api.tl has no LAYER line")
    return int(m.group(1))


def load_all() -> list[Combinator]:
    combinators: list[Combinator] = []
    for schema, filename in SCHEMA_FILES:
        combinators += parse_schema((SCHEMA_DIR / filename).read_text(), schema)
    return combinators


LAYERS_DIR = SCHEMA_DIR / "layers"
LAYERS_ARCHIVE = LAYERS_DIR / "api_layers.tar.xz"
# Lines some vendored schemas carry that declare the primitives themselves
# (``int ? = Int;``, ``bytes = Bytes;``, ``vector {t:Type} # [ t ] = Vector t;``):
# not combinators.
_PRIMITIVE_DECL = re.compile(
    r"^\s*(\w+ \? = \w+;|bytes = Bytes;|vector(#[0-9a-f]+)? \{t:Type\} # \[ t \] = Vector t;)"
)


def load_old_layers() -> dict[int, list[Combinator]]:
    """The API schema of every vendored layer, by layer: the ``api_<N>.tl`` members of
    ``layers/api_layers.tar.xz`` (neighbouring layers share most of their text, so
    one archive holds them all in little space)."""
    out: dict[int, list[Combinator]] = {}
    with tarfile.open(LAYERS_ARCHIVE, "r:xz") as archive:
        for member in archive.getmembers():
            m = re.fullmatch(r"api_(\d+)\.tl", member.name)
            f = archive.extractfile(member) if m else None
            if m is None or f is None:
                continue
            text = "\n".join(
                "" if _PRIMITIVE_DECL.match(line) else line
                for line in f.read().decode().splitlines()
            )
            out[int(m.group(1))] = parse_schema(text, "api")
    return dict(sorted(out.items()))


def render_type(t: TLType) -> str:
    if t.is_flags:
        text = "#"
    elif t.generic_ref:
        text = "!" + t.name
    elif t.vector is not None:
        text = f"{t.vector}<{t.name}>"
    else:
        text = t.name
    if t.flag_field is not None:
        text = f"{t.flag_field}.{t.flag_bit}?{text}"
    return text


def render_combinator(c: Combinator) -> str:
    """One schema line that ``parse_schema`` reads back to ``c``."""
    parts = [f"{c.name}#{c.id:08x}"]
    if c.generic:
        parts.append(f"{{{c.generic}:Type}}")
    parts += [f"{f.name}:{render_type(f.type)}" for f in c.fields]
    return " ".join(parts) + f" = {c.result};"
