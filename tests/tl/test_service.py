"""msg_container, rpc_result, rpc_error, gzip_packed and results typed by the request."""

from __future__ import annotations

import gzip
import struct

import pytest

from telesrv.tl import DecodeError, decode, functions, mt, service, types
from telesrv.tl.core import MAX_CONTAINER_MESSAGES

MSG_ID = 0x5E0B800000000001

CONTAINER_HEX = (
    "dcf8f173"
    "02000000"  # msg_container, 2 messages
    "0100000000800b5e"
    "01000000"
    "04000000"
    "6b18f9c4"  # help.getConfig
    "0400000000800b5e"
    "02000000"
    "14000000"  # msgs_ack of one id:
    "59b4d662"
    "15c4b51c"
    "01000000"
    "01000000ff7f0b5e"
)
CONTAINER_ITEMS = [
    service.ContainerItem(MSG_ID, 1, functions.help.GetConfig().to_bytes()),
    service.ContainerItem(
        0x5E0B800000000004, 2, mt.MsgsAck(msg_ids=[0x5E0B7FFF00000001]).to_bytes()
    ),
]


def test_encode_container_vector() -> None:
    assert service.encode_container(CONTAINER_ITEMS).hex() == CONTAINER_HEX


def test_decode_container_vector() -> None:
    items = service.decode_container(bytes.fromhex(CONTAINER_HEX))
    assert items == CONTAINER_ITEMS
    assert decode(items[1].body) == mt.MsgsAck(msg_ids=[0x5E0B7FFF00000001])
    assert service.constructor_id(items[0].body) == functions.help.GetConfig.CONSTRUCTOR_ID


def test_empty_container() -> None:
    assert service.decode_container(service.encode_container([])) == []


@pytest.mark.parametrize(
    "data",
    [
        b"",
        bytes.fromhex("dcf8f173"),
        bytes.fromhex("0000000000000000"),  # not a container
        bytes.fromhex("dcf8f17301000000"),  # count past the end
        bytes.fromhex("dcf8f173ffffffff"),  # negative count
        bytes.fromhex(CONTAINER_HEX)[:-1],  # truncated body
        bytes.fromhex(CONTAINER_HEX) + b"\0\0\0\0",  # trailing bytes
        # item length not a multiple of 4 / zero / past the end
        bytes.fromhex("dcf8f173010000000100000000800b5e01000000030000006b18f9c4"),
        bytes.fromhex("dcf8f173010000000100000000800b5e01000000000000006b18f9c4"),
        bytes.fromhex("dcf8f173010000000100000000800b5e01000000080000006b18f9c4"),
    ],
)
def test_bad_containers(data: bytes) -> None:
    with pytest.raises(DecodeError):
        service.decode_container(data)


def test_container_count_cap() -> None:
    body = functions.help.GetConfig().to_bytes()
    items = [service.ContainerItem(i, 0, body) for i in range(MAX_CONTAINER_MESSAGES + 1)]
    data = service.encode_container(items)
    with pytest.raises(DecodeError, match="count"):
        service.decode_container(data)
    assert len(service.decode_container(service.encode_container(items[:-1]))) == len(items) - 1


def test_rpc_result_vector() -> None:
    result = types.UpdatesTooLong().to_bytes()
    data = service.encode_rpc_result(MSG_ID, result)
    assert data.hex() == "016d5cf30100000000800b5e" + result.hex()
    parsed = decode(data)
    assert parsed == mt.RpcResult(req_msg_id=MSG_ID, result=types.UpdatesTooLong())


def test_rpc_error_vector() -> None:
    data = service.encode_rpc_error(MSG_ID, 420, "FLOOD_WAIT_30")
    assert data.hex() == (
        "016d5cf30100000000800b5e19ca4421a40100000d" + b"FLOOD_WAIT_30".hex() + "0000"
    )
    assert decode(data) == mt.RpcResult(
        req_msg_id=MSG_ID, result=mt.RpcError(error_code=420, error_message="FLOOD_WAIT_30")
    )


def test_gzip_packed_round_trip() -> None:
    body = types.Updates(
        updates=[], users=[types.UserEmpty(id=i) for i in range(50)], chats=[], date=1, seq=2
    ).to_bytes()
    packed = service.gzip_packed(body)
    assert packed[:4] == struct.pack("<I", 0x3072CFA1)
    assert len(packed) < len(body)
    assert service.unwrap_gzip(packed) == body
    assert service.unwrap_gzip(body) == body  # not packed: unchanged
    assert decode(packed) == decode(body)
    # the packed_data is a standard gzip stream
    from telesrv.tl.core import read_bytes

    assert gzip.decompress(read_bytes(packed, 4)[0]) == body


def test_rpc_result_with_gzip_packed_result() -> None:
    inner = types.UpdateShort(update=types.UpdateConfig(), date=5)
    data = service.encode_rpc_result(MSG_ID, service.gzip_packed(inner.to_bytes()))
    assert decode(data) == mt.RpcResult(req_msg_id=MSG_ID, result=inner)


# -- results typed by the request -----------------------------------------------


def test_vector_int_result() -> None:
    req = functions.contacts.GetContactIDs(hash=0)
    data = service.encode_result(req, [1, -2])
    assert data.hex() == "15c4b51c0200000001000000feffffff"
    assert service.decode_result(req, data) == [1, -2]


def test_vector_long_result() -> None:
    req = functions.messages.ReceivedQueue(max_qts=1)
    data = service.encode_result(req, [2**40])
    assert data.hex() == "15c4b51c010000000000000000010000"
    assert service.decode_result(req, data) == [2**40]


def test_bool_result() -> None:
    req = functions.auth.ResetAuthorizations()
    assert service.encode_result(req, True).hex() == "b5757299"
    assert service.encode_result(req, False).hex() == "379779bc"
    assert service.decode_result(req, bytes.fromhex("b5757299")) is True
    with pytest.raises(DecodeError):
        service.decode_result(req, bytes.fromhex("00000000"))


def test_boxed_vector_result() -> None:
    req = functions.account.GetAllSecureValues()
    assert service.encode_result(req, []).hex() == "15c4b51c00000000"
    assert service.decode_result(req, bytes.fromhex("15c4b51c00000000")) == []


def test_generic_wrappers_defer_to_the_query() -> None:
    inner = functions.contacts.GetContactIDs(hash=0)
    req = functions.InvokeWithLayer(
        layer=229,
        query=functions.InitConnection(
            api_id=1,
            device_model="d",
            system_version="s",
            app_version="a",
            system_lang_code="en",
            lang_pack="",
            lang_code="en",
            query=functions.InvokeWithoutUpdates(query=inner),
        ),
    )
    assert service.result_type(req) == "Vector<int>"
    assert service.innermost_request(req) is inner
    data = service.encode_result(req, [7])
    assert service.decode_result(req, data) == [7]


def test_object_result_and_type_errors() -> None:
    req = functions.help.GetNearestDc()
    dc = types.NearestDc(country="DE", this_dc=2, nearest_dc=2)
    data = service.encode_result(req, dc)
    assert data == dc.to_bytes()
    assert service.decode_result(req, data) == dc
    assert service.decode_result(req, service.gzip_packed(data)) == dc
    with pytest.raises(TypeError):
        service.encode_result(req, 5)


@pytest.mark.parametrize("data", [b"", b"\x15\xc4\xb5\x1c", bytes.fromhex("15c4b51c05000000")])
def test_truncated_results(data: bytes) -> None:
    for req in (
        functions.contacts.GetContactIDs(hash=0),
        functions.messages.ReceivedQueue(max_qts=1),
        functions.account.GetAllSecureValues(),
        functions.auth.ResetAuthorizations(),
        functions.help.GetNearestDc(),
    ):
        with pytest.raises(DecodeError):
            service.decode_result(req, data)
