"""Message ids as the wire bounds them."""

from __future__ import annotations

from collections.abc import Iterable

INT32_MAX = 2**31 - 1  # message (box) ids are int32 on the wire
INT64_MAX = 2**63 - 1  # user ids are bigint


def valid_ids(ids: Iterable[int]) -> list[int]:
    """ids that can be box ids (1..int32), each once, in the given order."""
    return list(dict.fromkeys(i for i in ids if 0 < i <= INT32_MAX))
