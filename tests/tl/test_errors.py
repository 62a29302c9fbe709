"""Hostile bytes raise DecodeError and nothing else; the RPC error catalogue."""

from __future__ import annotations

import struct
import zlib

import pytest

from telesrv.tl import DecodeError, decode, errors, functions, mt, read_object, service, types
from telesrv.tl.core import (
    BOOL_TRUE_ID,
    GZIP_PACKED_ID,
    MAX_DEPTH,
    MAX_GZIP_OUTPUT,
    VECTOR_ID,
    UnpackBudget,
    gunzip,
)
from telesrv.tl.rpcerror import CustomRpcError, RpcError, load_catalogue


def u32(v: int) -> bytes:
    return struct.pack("<I", v)


def i32(v: int) -> bytes:
    return struct.pack("<i", v)


def tl_bytes(data: bytes) -> bytes:
    out = bytearray()
    from telesrv.tl.core import write_bytes

    write_bytes(out, data)
    return bytes(out)


PEER_USER = types.PeerUser(user_id=2)
MESSAGE = types.Message(
    id=1,
    peer_id=PEER_USER,
    date=3,
    message="hello",
    entities=[types.MessageEntityBold(offset=0, length=5)],
)


def test_unknown_constructor() -> None:
    with pytest.raises(DecodeError, match=r"unexpected constructor 0x04030201 at 0"):
        decode(bytes.fromhex("01020304"))


def test_wrong_constructor_for_a_typed_field_names_the_type() -> None:
    data = bytearray(MESSAGE.to_bytes())
    peer_at = data.find(u32(types.PeerUser.CONSTRUCTOR_ID))
    data[peer_at : peer_at + 4] = u32(types.UserEmpty.CONSTRUCTOR_ID)
    with pytest.raises(DecodeError, match="for Peer"):
        decode(bytes(data))


@pytest.mark.parametrize(
    "obj",
    [
        MESSAGE,
        functions.messages.SendMessage(peer=types.InputPeerSelf(), message="x" * 300, random_id=7),
        mt.ResPQ(nonce=1, server_nonce=2, pq=b"pq", server_public_key_fingerprints=[1, 2]),
    ],
)
def test_every_truncation_raises_decode_error(obj: object) -> None:
    data = obj.to_bytes()  # type: ignore[attr-defined]
    for n in range(len(data)):
        with pytest.raises(DecodeError):
            decode(data[:n])


def test_empty_input() -> None:
    with pytest.raises(DecodeError):
        decode(b"")


def test_trailing_bytes() -> None:
    data = PEER_USER.to_bytes() + b"\0\0\0\0"
    with pytest.raises(DecodeError, match="4 trailing bytes after peerUser"):
        decode(data)
    assert decode(data, exact=False) == PEER_USER
    assert read_object(data) == (PEER_USER, 12)


def message_with_text(raw_text: bytes) -> bytes:
    """A serialized ``message`` whose text field is ``raw_text`` verbatim."""
    head = types.Message(id=1, peer_id=PEER_USER, date=3, message="").to_bytes()
    return head[:-4] + raw_text


@pytest.mark.parametrize(
    "raw",
    [
        bytes([200]) + b"short",  # short form, length past the end
        bytes([254, 0xFF, 0xFF, 0xFF]) + b"x" * 64,  # long form, 16 MiB claimed
        bytes([254, 10, 0, 0]) + b"x" * 10,  # long form, padding missing
        bytes([255, 0, 0, 0]) + b"x" * 8,  # 255 is not a length marker
        bytes([5]) + b"abc",  # padding missing
    ],
)
def test_string_length_prefixes(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(message_with_text(raw))


def test_invalid_utf8_is_replaced_not_raised() -> None:
    obj = decode(message_with_text(bytes([3]) + b"\xff\xfeA"))
    assert obj.message == "\ufffd\ufffdA"  # type: ignore[attr-defined]


def test_bad_bool() -> None:
    good = types.UpdateDialogPinned(peer=types.DialogPeer(peer=PEER_USER)).to_bytes()
    data = types.InputPeerNotifySettings(show_previews=True).to_bytes()
    assert decode(data).show_previews is True  # type: ignore[attr-defined]
    bad = data.replace(u32(BOOL_TRUE_ID), u32(0x12345678))
    with pytest.raises(DecodeError, match="expected Bool"):
        decode(bad)
    assert decode(good) == types.UpdateDialogPinned(peer=types.DialogPeer(peer=PEER_USER))


def test_deep_nesting_is_bounded() -> None:
    # textBold text:RichText nests without limit in the schema.
    depth = MAX_DEPTH * 4
    data = u32(types.TextBold.CONSTRUCTOR_ID) * depth + u32(types.TextEmpty.CONSTRUCTOR_ID)
    with pytest.raises(DecodeError, match="nested deeper"):
        decode(data)
    shallow = u32(types.TextBold.CONSTRUCTOR_ID) * 10 + u32(types.TextEmpty.CONSTRUCTOR_ID)
    assert isinstance(decode(shallow), types.TextBold)


def test_deep_nesting_through_vectors_and_generics() -> None:
    # textConcat texts:Vector<RichText> and invokeWithoutUpdates query:!X.
    concat = u32(types.TextConcat.CONSTRUCTOR_ID) + u32(VECTOR_ID) + i32(1)
    with pytest.raises(DecodeError, match="nested deeper"):
        decode(concat * 200 + u32(types.TextEmpty.CONSTRUCTOR_ID))
    invoke = u32(functions.InvokeWithoutUpdates.CONSTRUCTOR_ID)
    with pytest.raises(DecodeError, match="nested deeper"):
        decode(invoke * 500 + u32(functions.help.GetConfig.CONSTRUCTOR_ID))


@pytest.mark.parametrize("levels", [2, 3, MAX_DEPTH + 5])
def test_gzip_packed_inside_gzip_packed_is_refused(levels: int) -> None:
    inner = u32(types.TextEmpty.CONSTRUCTOR_ID)
    for _ in range(levels):
        inner = service.gzip_packed(inner)
    with pytest.raises(DecodeError, match="gzip_packed inside gzip_packed"):
        decode(inner)


def test_gzip_packed_one_level_decodes() -> None:
    inner = u32(types.TextEmpty.CONSTRUCTOR_ID)
    assert isinstance(decode(service.gzip_packed(inner)), types.TextEmpty)


def test_bytes_after_the_object_inside_gzip_packed_are_refused() -> None:
    inner = u32(types.TextEmpty.CONSTRUCTOR_ID)
    assert isinstance(decode(service.gzip_packed(inner)), types.TextEmpty)
    with pytest.raises(DecodeError, match="trailing bytes inside gzip_packed"):
        decode(service.gzip_packed(inner + b"\0" * 4096))
    with pytest.raises(DecodeError, match="trailing bytes after gzip_packed"):
        service.unwrap_gzip(service.gzip_packed(inner) + b"\0" * 4)


def test_gzip_stream_must_be_whole_and_alone() -> None:
    stream = zlib.compress(u32(types.TextEmpty.CONSTRUCTOR_ID), wbits=31)
    assert gunzip(stream) == u32(types.TextEmpty.CONSTRUCTOR_ID)
    with pytest.raises(DecodeError, match="truncated"):
        gunzip(stream[:-6])
    with pytest.raises(DecodeError, match="bytes after the stream"):
        gunzip(stream + stream)


def test_gzip_output_at_and_past_the_limit() -> None:
    assert len(gunzip(zlib.compress(b"\0" * 1000), limit=1000)) == 1000
    with pytest.raises(DecodeError, match="expands beyond"):
        gunzip(zlib.compress(b"\0" * 1001), limit=1000)


def test_one_budget_for_every_gzip_packed_of_a_message() -> None:
    # Two fields of one object, each within the limit alone, together past it.
    half = service.gzip_packed(types.TextPlain(text="x" * (MAX_GZIP_OUTPUT // 2)).to_bytes())
    one = u32(types.TextConcat.CONSTRUCTOR_ID) + u32(VECTOR_ID) + i32(1) + half
    assert isinstance(decode(one), types.TextConcat)
    two = u32(types.TextConcat.CONSTRUCTOR_ID) + u32(VECTOR_ID) + i32(2) + half + half
    with pytest.raises(DecodeError, match="expands beyond"):
        decode(two)
    budget = UnpackBudget(MAX_GZIP_OUTPUT)
    read_object(one, 0, budget)
    with pytest.raises(DecodeError, match="expands beyond"):
        read_object(one, 0, budget)  # the same budget is spent


@pytest.mark.parametrize("count", [2**31 - 1, 10**9, 1 << 30, -1, -(2**31)])
def test_absurd_vector_counts(count: int) -> None:
    # msgs_ack msg_ids:Vector<long>, photos.photos photos:Vector<Photo> users:Vector<User>
    longs = u32(mt.MsgsAck.CONSTRUCTOR_ID) + u32(VECTOR_ID) + i32(count) + b"\0" * 64
    with pytest.raises(DecodeError, match="vector count"):
        decode(longs)
    boxed = u32(types.photos.Photos.CONSTRUCTOR_ID) + u32(VECTOR_ID) + i32(count) + b"\0" * 64
    with pytest.raises(DecodeError, match="vector count"):
        decode(boxed)
    strings = (
        u32(functions.langpack.GetStrings.CONSTRUCTOR_ID)
        + tl_bytes(b"tdesktop")
        + tl_bytes(b"en")
        + u32(VECTOR_ID)
        + i32(count)
    )
    with pytest.raises(DecodeError, match="vector count"):
        decode(strings)
    bare = u32(mt.FutureSalts.CONSTRUCTOR_ID) + b"\0" * 12 + i32(count)
    with pytest.raises(DecodeError, match="vector count"):
        decode(bare)


def test_vector_with_wrong_constructor() -> None:
    data = u32(mt.MsgsAck.CONSTRUCTOR_ID) + u32(0xDEADBEEF) + i32(0)
    with pytest.raises(DecodeError, match="expected vector"):
        decode(data)


def test_gzip_packed_is_unpacked_transparently() -> None:
    wrapped = service.gzip_packed(MESSAGE.to_bytes())
    assert decode(wrapped) == MESSAGE
    # ... also where a field expects a specific type
    update = types.UpdateNewMessage(message=MESSAGE, pts=1, pts_count=1).to_bytes()
    inner_at = update.find(u32(types.Message.CONSTRUCTOR_ID))
    nested = update[:inner_at] + wrapped + update[inner_at + len(MESSAGE.to_bytes()) :]
    assert decode(nested) == decode(update)


def test_gzip_bomb_is_capped() -> None:
    bomb = zlib.compress(b"\0" * (MAX_GZIP_OUTPUT + 4096), 9)
    data = u32(GZIP_PACKED_ID) + tl_bytes(bomb)
    with pytest.raises(DecodeError, match="expands beyond"):
        decode(data)
    with pytest.raises(DecodeError, match="expands beyond"):
        gunzip(zlib.compress(b"\0" * 2000), limit=1000)


def test_gzip_garbage() -> None:
    with pytest.raises(DecodeError, match="bad gzip_packed"):
        decode(u32(GZIP_PACKED_ID) + tl_bytes(b"not gzip at all"))
    with pytest.raises(DecodeError):
        decode(u32(GZIP_PACKED_ID))
    with pytest.raises(DecodeError):
        service.unwrap_gzip(u32(GZIP_PACKED_ID))


def test_shared_flag_bit_must_be_consistent() -> None:
    # views and forwards share flags.10; one without the other would corrupt the stream.
    with pytest.raises(ValueError, match="views, forwards"):
        types.Message(id=1, peer_id=PEER_USER, date=1, message="", views=1).to_bytes()
    # user.bot and bot_info_version share flags.14
    with pytest.raises(ValueError, match="bot, bot_info_version"):
        types.User(id=1, bot=True).to_bytes()
    ok = types.User(id=1, bot=True, bot_info_version=2)
    assert decode(ok.to_bytes()) == ok


# -- the RPC error catalogue --------------------------------------------------------


def test_typed_rpc_errors() -> None:
    e = errors.MessageTooLong()
    assert isinstance(e, RpcError) and isinstance(e, Exception)
    assert (e.code, e.message) == (400, "MESSAGE_TOO_LONG")
    flood = errors.FloodWait(30)
    assert (flood.code, flood.message, flood.seconds) == (420, "FLOOD_WAIT_30", 30)
    assert repr(flood) == "FloodWait(420, 'FLOOD_WAIT_30')"
    with pytest.raises(errors.FloodWait) as info:
        raise errors.FloodWait(seconds=5)
    assert info.value.seconds == 5
    assert errors.UserMigrate(4).dc == 4


def test_from_wire() -> None:
    assert isinstance(errors.from_wire(400, "MESSAGE_TOO_LONG"), errors.MessageTooLong)
    flood = errors.from_wire(420, "FLOOD_WAIT_17")
    assert isinstance(flood, errors.FloodWait) and flood.seconds == 17
    assert isinstance(errors.from_wire(420, "FLOOD_WAIT_X"), errors.FloodWait)
    other = errors.from_wire(403, "SOMETHING_ELSE_ENTIRELY")
    assert isinstance(other, CustomRpcError)
    assert (other.code, other.message) == (403, "SOMETHING_ELSE_ENTIRELY")


def test_catalogue_is_data_and_complete() -> None:
    specs = load_catalogue()
    assert len(specs) == len(errors.BY_TEMPLATE)
    names = [s.name for s in specs]
    assert len(set(names)) == len(names)
    for spec in specs:
        cls = errors.BY_TEMPLATE[spec.name]
        assert (cls.CODE, cls.TEMPLATE) == (spec.code, spec.name)
        assert spec.description
        has_value = spec.name.endswith("_X") or "_X_" in spec.name
        instance = cls(7) if has_value else cls()
        assert instance.message == spec.name.replace("_X", "_7") or not has_value
        wire = service.encode_rpc_error(1, instance.code, instance.message)
        parsed = decode(wire[12:])
        assert isinstance(parsed, mt.RpcError)
        back = errors.from_wire(parsed.error_code, parsed.error_message)
        assert type(back) is cls


def test_a_value_inside_an_error_name_travels_in_place() -> None:
    """FILE_PART_X_MISSING carries its part number in the middle of the name."""
    error = errors.FilePartMissing(7)
    assert error.message == "FILE_PART_7_MISSING" and error.code == 400
    back = errors.from_wire(400, "FILE_PART_7_MISSING")
    assert isinstance(back, errors.FilePartMissing) and back.value == 7
    assert isinstance(errors.from_wire(400, "FILE_PART_X_MISSING"), CustomRpcError | RpcError)
