"""The schema parser and the code generator; the committed output is up to date."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from telesrv.tl import LAYER, codegen, functions, mt, types
from telesrv.tl.layers.fields import CLASSES
from telesrv.tl.parser import SchemaError, _crc_id, load_all, parse_schema, read_layer


def test_generated_files_are_up_to_date() -> None:
    expected = codegen.generate()
    on_disk = {
        str(p.relative_to(codegen.OUT_DIR)): p.read_text()
        for p in codegen.OUT_DIR.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert sorted(on_disk) == sorted(expected), "run python -m telesrv.tl.codegen"
    stale = [name for name, text in expected.items() if on_disk[name] != text]
    assert not stale, f"stale generated files {stale}: run python -m telesrv.tl.codegen"
    refusals = codegen.REFUSALS_PATH.read_text()
    assert refusals == codegen.refusals(), "stale refusals: run python -m telesrv.tl.codegen"


def test_layer_and_counts() -> None:
    assert LAYER == read_layer() == 229
    combinators = load_all()
    assert len(CLASSES) == len(combinators) == len({c.id for c in combinators})


def test_public_names() -> None:
    assert types.messages.Messages.TL_NAME == "messages.messages"
    assert functions.messages.SendMessage.TL_TYPE == "Updates"
    assert functions.messages.SendMessage.IS_FUNCTION is True
    assert types.Message.IS_FUNCTION is False
    assert mt.ReqPqMulti.CONSTRUCTOR_ID == 0xBE7E8EF1
    assert types.User.FIELDS[0] == "self_"
    assert "from_" in types.StoryFwdHeader.FIELDS
    assert types.messages.Messages.__qualname__ == "messages.Messages"


def test_python_field_names() -> None:
    assert codegen.py_field("self") == "self_"
    assert codegen.py_field("from") == "from_"
    assert codegen.py_field("class") == "class_"
    assert codegen.py_field("peer") == "peer"
    assert codegen.pascal("msgs_state_req") == "MsgsStateReq"


# -- parser -----------------------------------------------------------------------------

MINI = """
// comment line
boolFalse#bc799737 = Bool;
boolTrue#997275b5 = Bool;
pair#11111111 flags:# a:int b:flags.0?string c:flags.1?true d:flags.1?Vector<long> = Pair;
box#22222222 items:Vector<Pair> inner:vector<pair> = Box;
ping_x ping_id:long = PongX;
---functions---
wrap#33333333 {X:Type} flags:# tag:flags.3?int query:!X = X;
getBox#44444444 id:int128 key:int256 = Box;
"""


def test_parse_mini_schema() -> None:
    cs = {c.name: c for c in parse_schema(MINI, "api")}
    assert list(cs) == ["boolFalse", "boolTrue", "pair", "box", "ping_x", "wrap", "getBox"]
    pair = cs["pair"]
    assert pair.id == 0x11111111 and pair.result == "Pair" and not pair.is_function
    b = pair.fields[2].type
    assert (b.name, b.flag_field, b.flag_bit) == ("string", "flags", 0)
    d = pair.fields[4].type
    assert (d.name, d.vector, d.flag_bit) == ("long", "Vector", 1)
    assert pair.fields[3].type.is_true and pair.fields[0].type.is_flags
    inner = cs["box"].fields[1].type
    assert (inner.vector, inner.name, inner.is_bare_constructor) == ("vector", "pair", True)
    wrap = cs["wrap"]
    assert wrap.is_function and wrap.generic == "X" and wrap.fields[2].type.generic_ref
    # no id written: derived as Telegram does, from the CRC32 of the line
    assert cs["ping_x"].id == _crc_id("ping_x ping_id:long = PongX;")


def test_crc_ids_of_known_lines() -> None:
    assert _crc_id("message msg_id:long seqno:int bytes:int body:Object = Message") == 0x5BB8E511
    assert _crc_id("boolTrue = Bool") == 0x997275B5
    assert _crc_id("peerUser user_id:long = Peer") == types.PeerUser.CONSTRUCTOR_ID
    # flags.N?true fields are left out of the hashed text
    assert (
        _crc_id(
            "inputPeerNotifySettings flags:# show_previews:flags.0?Bool silent:flags.1?Bool "
            "mute_until:flags.2?int sound:flags.3?NotificationSound "
            "stories_muted:flags.6?Bool stories_hide_sender:flags.7?Bool "
            "stories_sound:flags.8?NotificationSound = InputPeerNotifySettings"
        )
        == types.InputPeerNotifySettings.CONSTRUCTOR_ID
    )


@pytest.mark.parametrize(
    "line,message",
    [
        ("this is not tl", "cannot parse"),
        ("a#1 flags:# x:flags.32?int = A;", "flag bit out of range"),
        ("a#1 x:flags.0?int flags:# = A;", "before its flags field"),
        ("a#1 x:Vector<Vector<int>> = A;", "unsupported type"),
        ("a#1 x:%Foo = A;", "unsupported type"),
        ("a#1 x:Foo<int> = A;", "unsupported type"),
        ("a#1 :int = A;", "bad field"),
        ("a#1 x:int", "cannot parse"),
    ],
)
def test_parse_errors(line: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        parse_schema(line, "api")


def test_read_layer_requires_a_layer_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "main_api.tl").write_text("boolTrue#997275b5 = Bool;\n")
    monkeypatch.setattr("telesrv.tl.parser.SCHEMA_DIR", tmp_path)
    with pytest.raises(SchemaError, match="LAYER"):
        read_layer()


# -- generator on a small schema ------------------------------------------------------


def compile_mini() -> dict[str, Any]:
    gen = codegen.Generator(parse_schema(MINI, "api"), 1)
    namespace: dict[str, Any] = {}
    exec(compile(gen.layer_module(), "<mini>", "exec"), namespace)
    return namespace


def test_generated_code_for_a_small_schema() -> None:
    ns = compile_mini()
    pair_cls, box_cls, wrap_cls, get_box = ns["Pair"], ns["Box"], ns["fn_Wrap"], ns["fn_GetBox"]
    p = pair_cls(a=5, b="hi", c=True, d=[1, 2])
    assert p.to_bytes() == (
        struct.pack("<III", 0x11111111, 0b11, 5)
        + b"\x02hi\x00"
        + struct.pack("<Iiqq", 0x1CB5C415, 2, 1, 2)
    )
    box = box_cls(items=[p], inner=[pair_cls(a=1)])
    data = box.to_bytes()
    # vector<pair> is bare: a count, then the fields without constructor ids
    assert data.endswith(struct.pack("<iII", 1, 0, 1))
    reader = ns["ALL_READERS"]
    from telesrv.tl.core import read_boxed

    assert read_boxed(reader, data, 0, 0) == (box, len(data))
    w = wrap_cls(query=get_box(id=-1, key=2**255 - 1), tag=None)
    wdata = w.to_bytes()
    assert wdata[4:8] == b"\0\0\0\0"  # tag absent: flags stay 0
    assert read_boxed(reader, wdata, 0, 0)[0] == w


def test_name_collisions_are_rejected() -> None:
    twice = "a#1 = A;\nA#2 = B;\n"  # both would be class "A"
    with pytest.raises(SystemExit, match="collide"):
        codegen.Generator(parse_schema(twice, "api"), 1)


def test_shared_flag_bits_are_checked_by_the_writer() -> None:
    ns = compile_mini()
    with pytest.raises(ValueError, match="c, d"):
        ns["Pair"](a=1, c=True).to_bytes()
    with pytest.raises(ValueError, match="c, d"):
        ns["Pair"](a=1, d=[]).to_bytes()
    assert ns["Pair"](a=1, c=True, d=[]).to_bytes()


def test_errors_module_is_generated_from_the_catalogue() -> None:
    from telesrv.tl.rpcerror import ErrorSpec

    text = codegen.errors_module(
        [ErrorSpec("FLOOD_WAIT_X", 420, "wait"), ErrorSpec("PEER_ID_INVALID", 400, "bad")]
    )
    ns: dict[str, Any] = {}
    exec(compile(text, "<errors>", "exec"), ns)
    assert ns["FloodWait"](3).seconds == 3
    assert ns["BY_TEMPLATE"] == {
        "FLOOD_WAIT_X": ns["FloodWait"],
        "PEER_ID_INVALID": ns["PeerIdInvalid"],
    }


def test_refusals_are_generated_from_the_rows_marked_domain() -> None:
    from telesrv.tl.rpcerror import ErrorSpec

    text = codegen.refusals_module(
        [
            ErrorSpec("FLOOD_WAIT_X", 420, "wait", domain=True),
            ErrorSpec("FILE_PART_X_MISSING", 400, "missing", domain=True),
            ErrorSpec("PEER_ID_INVALID", 400, "bad", domain=True),
            ErrorSpec("INPUT_METHOD_INVALID", 400, "rpc only"),
        ]
    )
    ns: dict[str, Any] = {}
    exec(compile(text, "<refusals>", "exec"), ns)
    assert ns["FloodWait"](3).seconds == ns["FloodWait"](3).value == 3
    assert ns["FilePartMissing"](2).part == 2
    assert (ns["FloodWait"].CODE, ns["FloodWait"].TEMPLATE) == (420, "FLOOD_WAIT_X")
    assert ns["PeerIdInvalid"].__doc__ == "bad"
    assert "InputMethodInvalid" not in ns
    # Only the refusals without a value can be named by a SQL function.
    assert ns["BY_NAME"] == {"PEER_ID_INVALID": ns["PeerIdInvalid"]}


def test_constructors_are_annotated() -> None:
    # Handlers are type-checked against these: each parameter carries its TL type, the
    # boxed ones as the union of their constructors (_T_<type>), optional ones | None.
    ann = functions.messages.SendMessage.__init__.__annotations__
    assert ann["peer"] == "_T_InputPeer"
    assert ann["message"] == "str"
    assert ann["random_id"] == "int"
    assert ann["silent"] == "bool"
    assert ann["reply_to"] == "_T_InputReplyTo | None"
    assert ann["entities"] == "list[_T_MessageEntity] | None"
    assert ann["return"] == "None"
    assert types.JsonNumber.__init__.__annotations__["value"] == "float"
    assert mt.FutureSalts.__init__.__annotations__["salts"] == "list[mt_FutureSalt]"
    # A field named like a builtin hides it in the class body: the annotation says which.
    assert any(
        "builtins." in a
        for cls in CLASSES.values()
        if "bytes" in cls.FIELDS or "list" in cls.FIELDS
        for a in cls.__init__.__annotations__.values()
    )


def test_public_modules_list_their_names() -> None:
    import importlib
    import pkgutil

    modules = [types, functions, mt]
    for package in (types, functions):
        for info in pkgutil.iter_modules(package.__path__):
            modules.append(importlib.import_module(f"{package.__name__}.{info.name}"))
    for module in modules:
        public = {n for n in vars(module) if not n.startswith("_") and n != "TYPE_CHECKING"}
        assert set(module.__all__) == public, module.__name__
    # The unions of boxed types exist for type checkers only (no import-time cost).
    assert "TypeInputPeer" not in vars(types)
    source = Path(types.__file__).read_text()
    assert "from ..layer import _T_InputPeer as TypeInputPeer" in source
    assert "'TypeInputPeer'," in source
    assert (
        "from ..layer import _T_messages_Messages as TypeMessages"
        in Path(types.messages.__file__).read_text()
    )
