"""TL objects the store keeps serialized, read back as the types they were written as:
message entities, a forward header, document attributes, a notification sound, a
dialog filter. Each was checked when it came from a client (or built here), so a read
trusts its type and says it once, here."""

from __future__ import annotations

from typing import cast

from telesrv.tl import ALL_READERS, TLObject, types
from telesrv.tl.core import read_vector_boxed


def decode_object(data: bytes | None) -> TLObject | None:
    """One boxed TL object serialized with to_bytes(), or None."""
    if not data:
        return None
    return cast(TLObject, ALL_READERS[int.from_bytes(data[:4], "little")](data, 4, 0)[0])


def decode_entities(data: bytes | None) -> list[types.TypeMessageEntity] | None:
    if not data:
        return None
    return cast("list[types.TypeMessageEntity]", read_vector_boxed(ALL_READERS, data, 0, 0)[0])


def decode_fwd_header(data: bytes | None) -> types.MessageFwdHeader | None:
    return cast("types.MessageFwdHeader | None", decode_object(data))


def decode_attribute(data: bytes) -> types.TypeDocumentAttribute:
    return cast("types.TypeDocumentAttribute", decode_object(data))


def decode_sound(data: bytes | None) -> types.TypeNotificationSound | None:
    return cast("types.TypeNotificationSound | None", decode_object(data))


def decode_filter(data: bytes) -> types.TypeDialogFilter:
    return cast("types.TypeDialogFilter", decode_object(data))
