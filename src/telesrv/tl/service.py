"""The MTProto service shapes the schema cannot express as generated classes.

``msg_container`` (bare ``message`` items with raw bodies), ``rpc_result``
(whose ``result`` is typed by the request, not by the stream), ``rpc_error``,
``gzip_packed``, and serialization of a request's result by its declared type
(``Vector<long>``, ``Bool``, a generic ``X`` ...).
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from telesrv.tl.core import (
    BOOL_FALSE,
    BOOL_TRUE,
    GZIP_PACKED_ID,
    MAX_CONTAINER_MESSAGES,
    MSG_CONTAINER_ID,
    RPC_ERROR_ID,
    RPC_RESULT_ID,
    DecodeError,
    TLObject,
    UnpackBudget,
    pack_i,
    read_bool,
    read_bytes,
    read_vector_boxed,
    read_vector_int,
    read_vector_long,
    read_vector_string,
    write_bytes,
    write_string,
    write_vector_boxed,
    write_vector_int,
    write_vector_long,
    write_vector_string,
)

_CONTAINER_HEAD = struct.Struct("<Ii")
_ITEM_HEAD = struct.Struct("<qii")
_RPC_RESULT_HEAD = struct.Struct("<Iq")
_RPC_ERROR_HEAD = struct.Struct("<IqIi").pack  # rpc_result, req_msg_id, rpc_error, code
_U32 = struct.Struct("<I")


@dataclass(frozen=True, slots=True)
class ContainerItem:
    msg_id: int
    seq_no: int
    body: bytes


def decode_container(data: bytes) -> list[ContainerItem]:
    """Items of a ``msg_container`` (``data`` starts with its constructor id)."""
    if len(data) < 8:
        raise DecodeError("truncated msg_container")
    cid, count = _CONTAINER_HEAD.unpack_from(data, 0)
    if cid != MSG_CONTAINER_ID:
        raise DecodeError(f"not a msg_container: {cid:#010x}")
    if not 0 <= count <= MAX_CONTAINER_MESSAGES or count * 16 > len(data) - 8:
        raise DecodeError(f"msg_container count {count} out of range")
    items = []
    p = 8
    for _ in range(count):
        if p + 16 > len(data):
            raise DecodeError("truncated msg_container item")
        msg_id, seq_no, length = _ITEM_HEAD.unpack_from(data, p)
        p += 16
        if length < 4 or length % 4 or p + length > len(data):
            raise DecodeError(f"msg_container item length {length} is invalid")
        items.append(ContainerItem(msg_id, seq_no, data[p : p + length]))
        p += length
    if p != len(data):
        raise DecodeError("trailing bytes after msg_container")
    return items


def encode_container(items: list[ContainerItem]) -> bytes:
    buf = bytearray(_CONTAINER_HEAD.pack(MSG_CONTAINER_ID, len(items)))
    for item in items:
        buf += _ITEM_HEAD.pack(item.msg_id, item.seq_no, len(item.body))
        buf += item.body
    return bytes(buf)


def constructor_id(body: bytes) -> int:
    if len(body) < 4:
        raise DecodeError("body shorter than a constructor id")
    return int(_U32.unpack_from(body, 0)[0])


def gzip_packed(data: bytes) -> bytes:
    """``gzip_packed`` wrapping ``data`` (a serialized object)."""
    buf = bytearray(_U32.pack(GZIP_PACKED_ID))
    write_bytes(buf, zlib.compress(data, 6, wbits=31))
    return bytes(buf)


def unwrap_gzip(body: bytes, budget: UnpackBudget | None = None) -> bytes:
    """The inner bytes when ``body`` is ``gzip_packed``, else ``body`` itself.

    The packed bytes must be all of ``body``, and what they expand to counts
    against ``budget`` (a fresh one when None).
    """
    if len(body) >= 4 and _U32.unpack_from(body, 0)[0] == GZIP_PACKED_ID:
        if len(body) < 8:
            raise DecodeError("truncated gzip_packed")
        packed, end = read_bytes(body, 4)
        if end != len(body):
            raise DecodeError(f"{len(body) - end} trailing bytes after gzip_packed")
        return (budget or UnpackBudget()).gunzip(packed)
    return body


def encode_rpc_result(req_msg_id: int, result: bytes) -> bytes:
    return _RPC_RESULT_HEAD.pack(RPC_RESULT_ID, req_msg_id) + result


def encode_rpc_error(req_msg_id: int, code: int, message: str) -> bytes:
    buf = bytearray(_RPC_ERROR_HEAD(RPC_RESULT_ID, req_msg_id, RPC_ERROR_ID, code))
    write_string(buf, message)
    return bytes(buf)


# -- results typed by the request ----------------------------------------------

_VECTOR_OF = re.compile(r"^Vector<(\w[\w.]*)>$")


def result_type(request: TLObject) -> str:
    """The declared result type; generic wrappers (``invokeWithLayer``) defer to the query."""
    rtype = request.TL_TYPE
    while rtype == "X":
        request = request.query  # type: ignore[attr-defined]
        rtype = request.TL_TYPE
    return rtype


def innermost_request(request: TLObject) -> TLObject:
    while request.TL_TYPE == "X":
        request = request.query  # type: ignore[attr-defined]
    return request


def encode_result(request: TLObject, value: Any) -> bytes:
    """Serialize ``value`` as the result of ``request``."""
    rtype = result_type(request)
    buf = bytearray()
    m = _VECTOR_OF.match(rtype)
    if m:
        inner = m.group(1)
        if inner == "int":
            write_vector_int(buf, value)
        elif inner == "long":
            write_vector_long(buf, value)
        elif inner == "string":
            write_vector_string(buf, value)
        else:
            write_vector_boxed(buf, value)
    elif rtype == "Bool":
        buf += BOOL_TRUE if value else BOOL_FALSE
    elif rtype == "int":
        buf += pack_i(value)
    elif isinstance(value, TLObject):
        value._write(buf)
    else:
        raise TypeError(f"cannot serialize {type(value).__name__} as {rtype}")
    return bytes(buf)


def decode_result(request: TLObject, data: bytes) -> Any:
    """Parse the result of ``request`` (used by tests, client-side tools, and the
    dispatcher for an answer written in the current layer that must be converted)."""
    from telesrv.tl import ALL_READERS, read_object

    rtype = result_type(request)
    data = unwrap_gzip(data)
    m = _VECTOR_OF.match(rtype)
    try:
        if m:
            inner = m.group(1)
            if inner == "int":
                return read_vector_int(data, 0)[0]
            if inner == "long":
                return read_vector_long(data, 0)[0]
            if inner == "string":
                return read_vector_string(data, 0)[0]
            return read_vector_boxed(ALL_READERS, data, 0, 0)[0]
        if rtype == "Bool":
            return read_bool(data, 0)[0]
    except (struct.error, IndexError) as e:
        raise DecodeError(f"malformed result: {e}") from None
    return read_object(data, 0)[0]
