import pytest
from hypothesis import given
from hypothesis import strategies as st

from telesrv.mtproto.msgid import (
    SeenMsgIds,
    ServerMsgIds,
    check_client_msg_id,
    msg_id_for_time,
)

NOW = 1_700_000_000.0
BASE = 0x6553F10000000000  # NOW * 2**32


def test_msg_id_for_time() -> None:
    assert msg_id_for_time(NOW) == BASE
    assert msg_id_for_time(NOW + 0.5) == BASE + 0x80000000


def test_server_ids_low_bits_and_time() -> None:
    ids = ServerMsgIds()
    assert ids.next(NOW, response=True) == BASE | 1
    assert ids.next(NOW + 1, response=False) == (BASE + (1 << 32)) | 3


def test_server_ids_increase_within_one_tick() -> None:
    ids = ServerMsgIds()
    made = [ids.next(NOW, response=i % 2 == 0) for i in range(6)]
    assert made == [
        BASE | 1,
        BASE + 4 | 3,
        BASE + 8 | 1,
        BASE + 12 | 3,
        BASE + 16 | 1,
        BASE + 20 | 3,
    ]


def test_server_ids_increase_when_clock_goes_back() -> None:
    ids = ServerMsgIds()
    first = ids.next(NOW, response=True)
    second = ids.next(NOW - 100, response=True)
    assert second == first + 4
    assert second % 4 == 1


@given(st.lists(st.tuples(st.floats(1e9, 2e9), st.booleans()), min_size=1, max_size=50))
def test_server_ids_strictly_increasing(calls: list[tuple[float, bool]]) -> None:
    ids = ServerMsgIds()
    last = 0
    for now, response in calls:
        msg_id = ids.next(now, response=response)
        assert msg_id > last
        assert msg_id % 4 == (1 if response else 3)
        last = msg_id


@pytest.mark.parametrize(
    ("offset_seconds", "low_bits", "expected"),
    [
        (0, 0, None),
        (-299, 0, None),
        (29, 0, None),
        (-301, 0, 16),
        (31, 0, 17),
        (0, 1, 18),
        (0, 2, 18),
        (0, 3, 18),
        (-301, 1, 16),  # time errors come first: the client can fix its clock from them
    ],
)
def test_check_client_msg_id(offset_seconds: int, low_bits: int, expected: int | None) -> None:
    msg_id = BASE + (offset_seconds << 32) + low_bits
    assert check_client_msg_id(msg_id, NOW) == expected


def test_check_client_msg_id_exact_edges() -> None:
    assert check_client_msg_id(BASE - (300 << 32), NOW) is None
    assert check_client_msg_id(BASE - (300 << 32) - 4, NOW) == 16
    assert check_client_msg_id(BASE + (30 << 32), NOW) is None
    assert check_client_msg_id(BASE + (30 << 32) + 4, NOW) == 17


def test_seen_add_and_duplicates() -> None:
    seen = SeenMsgIds(4)
    assert seen.max_id is None
    assert seen.add(BASE)
    assert not seen.add(BASE)
    assert seen.contains(BASE)
    assert BASE in seen
    assert not seen.contains(BASE + 4)
    assert seen.max_id == BASE


def test_seen_evicts_oldest_and_reports_too_old() -> None:
    seen = SeenMsgIds(3)
    for k in range(5):
        seen.add(BASE + 4 * k)
    assert len(seen) == 3
    assert not seen.contains(BASE)
    assert not seen.contains(BASE + 4)
    assert seen.is_too_old(BASE + 4)  # forgotten: cannot tell whether seen
    assert seen.is_too_old(BASE - 4)
    assert not seen.is_too_old(BASE + 8)  # still stored
    assert not seen.is_too_old(BASE + 100)  # above every evicted id: never seen
    assert seen.max_id == BASE + 16


def test_seen_window_not_full_never_too_old() -> None:
    seen = SeenMsgIds(10)
    seen.add(BASE + 40)
    assert not seen.is_too_old(BASE)


def test_seen_out_of_order_ids() -> None:
    seen = SeenMsgIds(2)
    seen.add(BASE + 8)
    seen.add(BASE)  # late arrival, below the max
    seen.add(BASE + 12)  # evicts BASE + 8 (first in), floor = BASE + 8
    assert seen.contains(BASE)
    assert seen.is_too_old(BASE + 4)
    assert not seen.is_too_old(BASE)


def test_seen_bounded() -> None:
    seen = SeenMsgIds(1024)
    for k in range(10_000):
        seen.add(BASE + 4 * k)
    assert len(seen) == 1024


def test_seen_flags() -> None:
    seen = SeenMsgIds(4)
    seen.add(BASE, 16)
    assert seen.flags(BASE) == 16
    seen.set_flags(BASE, 32)
    assert seen.flags(BASE) == 48
    seen.clear_flags(BASE, 16)
    assert seen.flags(BASE) == 32
    assert seen.flags(BASE + 4) is None
    seen.set_flags(BASE + 4, 8)  # unknown ids are not created
    assert not seen.contains(BASE + 4)


def test_seen_rejects_bad_capacity() -> None:
    with pytest.raises(ValueError):
        SeenMsgIds(0)


def test_forget_up_to_drops_old_ids_and_keeps_them_too_old() -> None:
    seen = SeenMsgIds(8)
    for msg_id in (4, 8, 12, 16):
        seen.add(msg_id, 1)
    assert seen.forget_up_to(3) == 0  # below every id: nothing changes
    assert len(seen) == 4
    assert seen.forget_up_to(8) == 2  # at an id: it goes, the next one stays
    assert len(seen) == 2
    assert 4 not in seen and 8 not in seen
    assert seen.is_too_old(4) and seen.is_too_old(8)
    assert not seen.is_too_old(12) and seen.flags(12) == 1 and 16 in seen
    assert seen.max_id == 16
    assert not seen.add(12)  # still a duplicate
