import pytest

from telesrv.mtproto.salts import (
    SALT_PERIOD,
    current_salt,
    future_salts,
    is_valid_salt,
    salt_for,
    salt_period,
)

SECRET = b"telesrv test salt secret"
KEY_ID = 0x0102030405060708
NOW = 1_700_000_000.0  # period 944444 starts at 1_699_999_200
PERIOD = 944444
PERIOD_START = 1_699_999_200


def test_salt_for_vectors() -> None:
    # HMAC-SHA256(secret, <qq auth_key_id, period>)[:8] as little-endian int64
    assert salt_for(SECRET, KEY_ID, PERIOD) == 6645963697850119734
    assert salt_for(SECRET, -5, 0) == -7293995726997869371


def test_salt_depends_on_every_input() -> None:
    base = salt_for(SECRET, KEY_ID, PERIOD)
    assert salt_for(SECRET, KEY_ID, PERIOD + 1) != base
    assert salt_for(SECRET, KEY_ID + 1, PERIOD) != base
    assert salt_for(SECRET + b"x", KEY_ID, PERIOD) != base
    assert -(1 << 63) <= base < 1 << 63


def test_period_and_current_salt() -> None:
    assert salt_period(NOW) == PERIOD
    assert salt_period(PERIOD_START) == PERIOD
    assert salt_period(PERIOD_START - 0.001) == PERIOD - 1
    assert current_salt(SECRET, KEY_ID, NOW) == salt_for(SECRET, KEY_ID, PERIOD)


def test_valid_salt_current_and_previous_only() -> None:
    cur = salt_for(SECRET, KEY_ID, PERIOD)
    prev = salt_for(SECRET, KEY_ID, PERIOD - 1)
    older = salt_for(SECRET, KEY_ID, PERIOD - 2)
    nxt = salt_for(SECRET, KEY_ID, PERIOD + 1)
    assert is_valid_salt(SECRET, KEY_ID, cur, NOW)
    assert is_valid_salt(SECRET, KEY_ID, prev, NOW)
    assert not is_valid_salt(SECRET, KEY_ID, older, NOW)
    assert not is_valid_salt(SECRET, KEY_ID, nxt, NOW)
    assert not is_valid_salt(SECRET, KEY_ID, 0, NOW)
    # After the rotation the old current salt is still accepted for one period.
    assert is_valid_salt(SECRET, KEY_ID, cur, PERIOD_START + SALT_PERIOD + 1)
    assert not is_valid_salt(SECRET, KEY_ID, cur, PERIOD_START + 2 * SALT_PERIOD)


def test_future_salts() -> None:
    salts = future_salts(SECRET, KEY_ID, NOW, 3)
    assert salts == [
        (
            PERIOD_START + k * SALT_PERIOD,
            PERIOD_START + (k + 2) * SALT_PERIOD,
            salt_for(SECRET, KEY_ID, PERIOD + k),
        )
        for k in range(3)
    ]
    assert salts[0][2] == 6645963697850119734


@pytest.mark.parametrize(("num", "count"), [(0, 1), (-5, 1), (1, 1), (64, 64), (1000, 64)])
def test_future_salts_clamped(num: int, count: int) -> None:
    assert len(future_salts(SECRET, KEY_ID, NOW, num)) == count


def test_future_salts_are_accepted_in_their_window() -> None:
    for since, until, salt in future_salts(SECRET, KEY_ID, NOW, 4):
        assert is_valid_salt(SECRET, KEY_ID, salt, since)
        assert is_valid_salt(SECRET, KEY_ID, salt, until - 1)
        assert not is_valid_salt(SECRET, KEY_ID, salt, until)
