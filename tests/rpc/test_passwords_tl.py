"""Two-step verification's TL: what new settings mean, and account.password as sent."""

from __future__ import annotations

from telesrv.rpc.passwords import new_settings_of, password_to_tl, srp_check_of
from telesrv.services import srp
from telesrv.services.passwords import NewPassword, PasswordState, RemovePassword, SrpCheck
from telesrv.tl import types

ALGO = types.PasswordKdfAlgoSHA256SHA256PBKDF2HMACSHA512iter100000SHA256ModPow(
    salt1=b"1" * 40, salt2=b"2" * 16, g=srp.G, p=srp.P_BYTES
)


def state(has_password: bool, hint: str = "") -> PasswordState:
    return PasswordState(
        has_password=has_password,
        salt1=b"1" * 40 if has_password else b"",
        salt2=b"2" * 16 if has_password else b"",
        srp_b=b"B" * 256 if has_password else b"",
        srp_id=77 if has_password else 0,
        hint=hint,
        new_salt1=b"n" * 8,
        new_salt2=b"m" * 16,
        new_secure_salt=b"s" * 8,
        secure_random=b"r" * 32,
        pending_reset_date=None,
    )


def test_what_new_settings_mean() -> None:
    setting = types.account.PasswordInputSettings(
        new_algo=ALGO, new_password_hash=b"\x05" * 256, hint="h"
    )
    new = new_settings_of(setting)
    assert isinstance(new, NewPassword) and new.salt1 == b"1" * 40 and new.hint == "h"
    # Removal, both ways clients say it: the unknown algorithm, or an empty hash.
    unknown = types.account.PasswordInputSettings(
        new_algo=types.PasswordKdfAlgoUnknown(), new_password_hash=b"", hint=""
    )
    assert new_settings_of(unknown) == RemovePassword()
    empty = types.account.PasswordInputSettings(new_algo=ALGO, new_password_hash=b"", hint="")
    assert new_settings_of(empty) == RemovePassword()
    assert new_settings_of(types.account.PasswordInputSettings(email="a@b.c")) is None


def test_checks() -> None:
    assert srp_check_of(types.InputCheckPasswordEmpty()) is None
    check = types.InputCheckPasswordSRP(srp_id=5, A=b"a", M1=b"m")
    assert srp_check_of(check) == SrpCheck(srp_id=5, a=b"a", m1=b"m")


def test_account_password_with_and_without_one() -> None:
    none = password_to_tl(state(False))
    assert not none.has_password and none.current_algo is None and none.srp_B is None
    assert isinstance(
        none.new_algo, types.PasswordKdfAlgoSHA256SHA256PBKDF2HMACSHA512iter100000SHA256ModPow
    )
    assert none.new_algo.p == srp.P_BYTES and none.new_algo.g == srp.G
    assert none.new_algo.salt1 == b"n" * 8
    none.to_bytes()  # the flags agree with the fields
    some = password_to_tl(state(True, hint="hint"))
    assert some.has_password and some.srp_id == 77 and some.hint == "hint"
    some.to_bytes()
    assert password_to_tl(state(True)).hint is None  # no hint: the field is left out
