"""No string of any request may carry a NUL character: PostgreSQL cannot store one, so
before this check such a request ended in 500 INTERNAL. Every method of the schema is
tried with a NUL in each string it takes, directly or one object down (entities, reply
headers, imported contacts ...), through the real decoder and the dispatcher."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from telesrv.rpc.context import RequestContext
from telesrv.rpc.dispatcher import Dispatcher, _fields_to_walk, has_nul
from telesrv.rpc.registry import Registry
from telesrv.tl import decode, functions, types
from telesrv.tl._generated.layer import CLASSES
from telesrv.tl.codegen import py_field
from telesrv.tl.parser import Combinator, TLType, load_all

NUL_TEXT = "a\x00b"
_NUMBERS = {"int", "long", "double", "int128", "int256"}

_API = [c for c in load_all() if c.schema == "api"]
_BY_TYPE: dict[str, list[Combinator]] = {}
for _c in _API:
    if not _c.is_function:
        _BY_TYPE.setdefault(_c.result, []).append(_c)


class Unbuildable(Exception):
    pass


def _default(t: TLType, depth: int) -> Any:
    if t.flag_field:
        return False if t.is_true else None
    if t.vector:
        return []
    if t.name in _NUMBERS:
        return 0
    if t.name == "string":
        return ""
    if t.name == "bytes":
        return b""
    if t.name in ("Bool", "true"):
        return False
    return _simplest(t.name, depth)


def _simplest(type_name: str, depth: int) -> Any:
    if depth > 4:
        raise Unbuildable(type_name)
    options = sorted(_BY_TYPE.get(type_name, []), key=lambda c: len(c.fields))
    for cons in options:
        try:
            return _build(cons, {}, depth + 1)
        except Unbuildable:
            continue
    raise Unbuildable(type_name)


def _build(c: Combinator, given: dict[str, Any], depth: int) -> Any:
    kwargs: dict[str, Any] = {}
    for f in c.fields:
        if f.type.is_flags:
            continue
        name = py_field(f.name)
        kwargs[name] = given[name] if name in given else _default(f.type, depth)
    return CLASSES[c.id](**kwargs)


def _is_text(t: TLType) -> bool:
    return t.name == "string"


def _with_nul(t: TLType) -> Any:
    return [NUL_TEXT] if t.vector else NUL_TEXT


def _nested(t: TLType) -> Iterator[tuple[str, Any]]:
    """Objects of the field's type that hold a NUL in one of their own strings."""
    for cons in _BY_TYPE.get(t.name, []):
        for f in cons.fields:
            if _is_text(f.type):
                try:
                    obj = _build(cons, {py_field(f.name): _with_nul(f.type)}, 1)
                except Unbuildable:
                    continue
                yield f"{cons.name}.{f.name}", [obj] if t.vector else obj


def poisoned_requests() -> Iterator[tuple[str, Any]]:
    """(description, decoded request) with one NUL each, for every method and string
    field."""
    for fn in _API:
        if not fn.is_function or fn.generic:
            continue
        for f in fn.fields:
            if f.type.is_flags or f.type.is_primitive and not _is_text(f.type):
                continue
            variants = [(f.name, _with_nul(f.type))] if _is_text(f.type) else list(_nested(f.type))
            for label, value in variants:
                try:
                    wire = _build(fn, {py_field(f.name): value}, 0).to_bytes()
                except (Unbuildable, ValueError):
                    continue  # needs a flag partner this builder leaves out
                yield f"{fn.name}.{f.name} ({label})", decode(wire)  # as the server reads it


def ctx(user_id: int | None) -> RequestContext:
    return RequestContext(
        auth_key_id=1, perm_auth_key_id=1, session_id=2, msg_id=3, now=0.0, user_id=user_id
    )


async def test_every_string_of_every_method_refuses_nul() -> None:
    dispatcher = Dispatcher(Registry(), lambda *_: _noop())
    tried: list[str] = []
    for label, request in poisoned_requests():
        for user_id in (None, 7):
            outcome = await dispatcher.call(ctx(user_id), request)
            assert outcome.error is not None, label
            assert outcome.error.message == "INPUT_STRING_INVALID", label
        tried.append(label)
    # The schema's text inputs, and the ones named in hostile reports, are among them.
    for expected in (
        "messages.sendMessage.message (message)",
        "messages.sendMessage.entities (messageEntityTextUrl.url)",
        "messages.sendMessage.entities (messageEntityPre.language)",
        "messages.sendMessage.reply_to (inputReplyToMessage.quote_text)",
        "messages.editMessage.message (message)",
        "messages.search.q (q)",
        "messages.searchGlobal.q (q)",
        "account.updateProfile.first_name (first_name)",
        "account.updateProfile.last_name (last_name)",
        "account.updateProfile.about (about)",
        "account.updateUsername.username (username)",
        "account.checkUsername.username (username)",
        "contacts.importContacts.contacts (inputPhoneContact.first_name)",
        "contacts.importContacts.contacts (inputPhoneContact.phone)",
        "contacts.addContact.first_name (first_name)",
        "contacts.addContact.phone (phone)",
        "contacts.resolvePhone.phone (phone)",
        "contacts.resolveUsername.username (username)",
        "contacts.deleteByPhones.phones (phones)",
        "auth.sendCode.phone_number (phone_number)",
        "auth.signIn.phone_code (phone_code)",
        "auth.signUp.first_name (first_name)",
    ):
        assert expected in tried, expected
    assert len(tried) > 500
    # initConnection and the other wrappers are generic: the next test covers them.


async def _noop() -> None:
    return None


async def test_nul_inside_wrappers_is_refused_before_anything_is_recorded() -> None:
    recorded: list[object] = []

    async def record(*args: object) -> None:
        recorded.append(args)

    dispatcher = Dispatcher(Registry(), record)
    request = functions.InvokeWithLayer(
        layer=229,
        query=functions.InitConnection(
            api_id=1,
            device_model="dev\x00ice",
            system_version="os",
            app_version="1",
            system_lang_code="en",
            lang_pack="",
            lang_code="en",
            query=functions.help.GetConfig(),
        ),
    )
    outcome = await dispatcher.call(ctx(None), decode(request.to_bytes()))
    assert outcome.error is not None and outcome.error.message == "INPUT_STRING_INVALID"
    assert recorded == []


@pytest.mark.parametrize(
    "value, found",
    [
        ("plain", False),
        ("\x00", True),
        (["ok", ["deep", "x\x00"]], True),
        (b"\x00binary is fine", False),
        (types.MessageEntityTextUrl(offset=0, length=1, url="https://x/\x00"), True),
        (types.MessageEntityTextUrl(offset=0, length=1, url="https://x/"), False),
    ],
)
def test_has_nul_walks_strings_only(value: Any, found: bool) -> None:
    request = functions.messages.SendMessage(
        peer=types.InputPeerSelf(), message="hi", random_id=1, entities=[]
    )
    request.entities = value if isinstance(value, list) else [value]
    assert has_nul(request) is found


def test_the_walk_skips_only_fields_whose_schema_type_holds_no_string() -> None:
    """``has_nul`` skips a field by its annotation; the schema says what it may hold."""
    string_free = _NUMBERS | {"bytes", "Bool", "true"}
    skipped_somewhere = False
    for c in load_all():
        walked = set(_fields_to_walk(CLASSES[c.id]))
        for f in c.fields:
            if f.type.is_flags:
                continue
            name = py_field(f.name)
            if f.type.name in string_free and not f.type.generic_ref:
                skipped_somewhere |= name not in walked
            else:
                assert name in walked, f"{c.name}.{f.name} ({f.type.name}) is not walked"
    assert skipped_somewhere  # the filter does skip numbers, else it is worth nothing
