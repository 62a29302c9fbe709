"""msg_id rules of MTProto 2.0: making server ids, checking client ids, replay window.

A msg_id is roughly ``unix_time * 2**32``. Client ids are divisible by 4; server
ids are 1 mod 4 when they answer a client message and 3 mod 4 otherwise. The
server accepts client ids from 300 s in the past to 30 s in the future and
remembers a bounded window of recent ids to reject replays.

Sans-io: ``now`` (unix seconds, float) is always an argument.
"""

from __future__ import annotations

__all__ = [
    "BAD_MSG_ID_BITS",
    "MSG_ID_TOO_HIGH",
    "MSG_ID_TOO_LOW",
    "MSG_TOO_OLD",
    "MAX_FUTURE_SECONDS",
    "MAX_PAST_SECONDS",
    "SeenMsgIds",
    "ServerMsgIds",
    "check_client_msg_id",
    "msg_id_for_time",
]

# bad_msg_notification error codes, as clients interpret them
MSG_ID_TOO_LOW = 16
MSG_ID_TOO_HIGH = 17
BAD_MSG_ID_BITS = 18
MSG_TOO_OLD = 20

MAX_PAST_SECONDS = 300
MAX_FUTURE_SECONDS = 30

_TWO_32 = 4294967296.0


def msg_id_for_time(now: float) -> int:
    """The msg_id value (before low-bit adjustment) that corresponds to ``now``."""
    return int(now * _TWO_32)


class ServerMsgIds:
    """Generator of server msg_ids for one session: time based and strictly increasing.

    The ids keep increasing even when ``now`` goes backwards or many ids are made
    within one clock tick: the next id is then the previous one plus 4 (same low bits
    rule).
    """

    __slots__ = ("_last_base",)

    def __init__(self) -> None:
        self._last_base = 0  # last id with its two low bits cleared

    def next(self, now: float, *, response: bool) -> int:
        base = int(now * _TWO_32) & ~3
        if base <= self._last_base:
            base = self._last_base + 4
        self._last_base = base
        return base | (1 if response else 3)


def check_client_msg_id(msg_id: int, now: float) -> int | None:
    """None when a client msg_id is acceptable, else its bad_msg_notification code.

    16: more than 300 s in the past; 17: more than 30 s in the future; 18: not
    divisible by 4. Time is checked first because those errors are recoverable (the
    client corrects its clock offset from the notification's own msg_id).
    """
    if msg_id < int((now - MAX_PAST_SECONDS) * _TWO_32):
        return MSG_ID_TOO_LOW
    if msg_id > int((now + MAX_FUTURE_SECONDS) * _TWO_32):
        return MSG_ID_TOO_HIGH
    if msg_id & 3:
        return BAD_MSG_ID_BITS
    return None


class SeenMsgIds:
    """The last ``capacity`` client msg_ids of a session, each with a small flags int.

    Ids are evicted in arrival order (client ids arrive almost sorted). Every evicted
    id is at most ``floor``, so an id that is not stored and is ``<= floor`` may have
    been seen and forgotten: :meth:`is_too_old` (code 20). Ids above ``floor`` that are
    not stored were certainly never seen. All operations are O(1).
    """

    __slots__ = ("_capacity", "_ids", "_floor", "_max")

    def __init__(self, capacity: int = 1024) -> None:
        if capacity < 1:
            raise ValueError("capacity must be positive")
        self._capacity = capacity
        self._ids: dict[int, int] = {}  # msg_id -> flags; insertion order = arrival order
        self._floor = -(1 << 63)  # highest evicted id
        self._max = -(1 << 63)

    def __len__(self) -> int:
        return len(self._ids)

    def contains(self, msg_id: int) -> bool:
        return msg_id in self._ids

    # A def of its own, not ``__contains__ = contains``: mypyc compiles no class
    # attribute that aliases a method (telesrv/accel.py).
    def __contains__(self, msg_id: object) -> bool:
        return msg_id in self._ids

    def is_too_old(self, msg_id: int) -> bool:
        """True when ``msg_id`` is not stored but may have been evicted (cannot tell)."""
        return msg_id <= self._floor and msg_id not in self._ids

    def add(self, msg_id: int, flags: int = 0) -> bool:
        """Remember ``msg_id``; False (and no change) when it is already stored."""
        ids = self._ids
        if msg_id in ids:
            return False
        ids[msg_id] = flags
        if msg_id > self._max:
            self._max = msg_id
        if len(ids) > self._capacity:
            oldest = next(iter(ids))
            del ids[oldest]
            if oldest > self._floor:
                self._floor = oldest
        return True

    def flags(self, msg_id: int) -> int | None:
        """Flags stored with ``msg_id``, or None when it is not stored."""
        return self._ids.get(msg_id)

    def set_flags(self, msg_id: int, flags: int) -> None:
        """OR ``flags`` into the flags of a stored id (no-op for unknown ids)."""
        ids = self._ids
        old = ids.get(msg_id)
        if old is not None:
            ids[msg_id] = old | flags

    def clear_flags(self, msg_id: int, flags: int) -> None:
        ids = self._ids
        old = ids.get(msg_id)
        if old is not None:
            ids[msg_id] = old & ~flags

    def forget_up_to(self, cutoff: int) -> int:
        """Forget the ids ``<= cutoff`` (they count as evicted: see :meth:`is_too_old`)
        and give the table back the room they took; returns how many were forgotten."""
        ids = self._ids
        kept = {msg_id: flags for msg_id, flags in ids.items() if msg_id > cutoff}
        forgotten = len(ids) - len(kept)
        if forgotten:
            self._floor = max(self._floor, max(i for i in ids if i <= cutoff))
            self._ids = kept  # a new dict: a dict never shrinks when emptied
        return forgotten

    @property
    def max_id(self) -> int | None:
        """Highest id ever added (None before the first)."""
        return self._max if self._ids or self._floor > -(1 << 63) else None
