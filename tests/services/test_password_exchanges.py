"""account.getPassword under load: the key's open exchange is offered again instead of a
new secret drawn each call, calls are counted per key, a new secret is drawn off the
event loop; and an exchange stays bound to the very password it was made for (the
verifier, not only the salts). Real PostgreSQL and Redis."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from conftest import MakeServer

from services.test_passwords import (
    CODE,
    NOW,
    POLICY,
    _with_policy,
    client_check,
    new_key,
    new_password,
    new_user,
    set_password,
)
from telesrv.parts import AccountServices
from telesrv.services import errors, srp
from telesrv.services.passwords import Passwords
from telesrv.store import passwords as passwords_store
from telesrv.store.db import Db

# A small number of getPassword calls per key, for the tests of that limit.
FEW_CALLS = dataclasses.replace(POLICY, state_calls=4)


@pytest.fixture
def svc(make_server: MakeServer) -> AccountServices:
    return _with_policy(make_server(dev_login_code=CODE), POLICY)


@pytest.fixture
def passwords(svc: AccountServices) -> Passwords:
    assert svc.passwords is not None
    return svc.passwords


def count_draws(passwords: Passwords, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each new secret drawn, as whether it was drawn off the event loop's thread."""
    draws: list[bool] = []
    draw = passwords._draw_secret

    def counted(verifier: bytes) -> tuple[int, bytes]:
        draws.append(threading.current_thread() is not threading.main_thread())
        return draw(verifier)

    monkeypatch.setattr(passwords, "_draw_secret", counted)
    return draws


async def test_the_open_exchange_is_offered_again_without_a_new_draw(
    svc: AccountServices, passwords: Passwords, db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, _ = await new_user(svc)
    key, other_key = await new_key(db), await new_key(db)
    await set_password(passwords, user, key, "pw")
    draws = count_draws(passwords, monkeypatch)

    first = await passwords.state(user, key, NOW)
    assert draws == [True]  # drawn once, in a worker thread
    for _ in range(5):
        again = await passwords.state(user, key, NOW + 1)
        assert (again.srp_id, again.srp_b) == (first.srp_id, first.srp_b)
    assert len(draws) == 1
    # Each key has its own.
    other = await passwords.state(user, other_key, NOW)
    assert other.srp_id != first.srp_id and len(draws) == 2

    # Offered again while half its time is left (at the limit), a new one past it.
    half = POLICY.srp_ttl / 2
    assert (await passwords.state(user, key, NOW + half)).srp_id == first.srp_id
    assert len(draws) == 2
    renewed = await passwords.state(user, key, NOW + half + 1)
    assert renewed.srp_id != first.srp_id and len(draws) == 3
    await passwords.verify(user, key, client_check(renewed, "pw"), NOW + half + 1)

    # Once used (or after the password changed) it is not offered again.
    after = await passwords.state(user, key, NOW + half + 1)
    assert after.srp_id != renewed.srp_id and len(draws) == 4
    await passwords.update(
        user, key, client_check(after, "pw"), new_password(after, "new"), None, NOW
    )
    stale = await passwords.state(user, other_key, NOW)  # other_key's was for "pw"
    assert stale.srp_id != other.srp_id
    await passwords.verify(user, other_key, client_check(stale, "new"), NOW)


async def test_get_password_calls_are_limited_per_key(
    make_server: MakeServer, db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = _with_policy(make_server(), FEW_CALLS)
    passwords = svc.passwords
    assert passwords is not None
    user, _ = await new_user(svc)
    no_password, _ = await new_user(svc)
    key = await new_key(db)
    await set_password(passwords, user, await new_key(db), "pw")
    for _ in range(FEW_CALLS.state_calls):  # up to the limit
        await passwords.state(user, key, NOW)
    with pytest.raises(errors.FloodWait) as flood:  # one past it
        await passwords.state(user, key, NOW)
    assert 0 < flood.value.seconds <= FEW_CALLS.state_window
    # Counted whatever the account: an account without a password costs the key too.
    with pytest.raises(errors.FloodWait):
        await passwords.state(no_password, key, NOW)
    # The limit is the key's.
    state = await passwords.state(user, await new_key(db), NOW)
    assert state.has_password

    # 0: no limit.
    passwords.policy = dataclasses.replace(FEW_CALLS, state_calls=0)
    unlimited = await new_key(db)
    for _ in range(FEW_CALLS.state_calls + 1):
        await passwords.state(user, unlimited, NOW)


async def test_the_same_salts_with_another_verifier_are_another_password(
    svc: AccountServices, passwords: Passwords, db: Db
) -> None:
    """A client may set a new password with the salts of the old one: exchanges made for
    the old one must not be checked against the new one, nor a write proved with the old
    one go over the new one."""
    user, _ = await new_user(svc)
    key, laptop = await new_key(db), await new_key(db)
    await set_password(passwords, user, key, "old")
    old = await passwords_store.get_password(db.pool, user)
    assert old is not None
    stale = await passwords.state(user, laptop, NOW)

    state = await passwords.state(user, key, NOW)
    same_salts = dataclasses.replace(
        new_password(state, "new"),
        salt1=old.salt1,
        salt2=old.salt2,
        verifier=srp.verifier_of(b"new", old.salt1, old.salt2),
    )
    await passwords.update(user, key, client_check(state, "old"), same_salts, None, NOW)
    new = await passwords_store.get_password(db.pool, user)
    assert new is not None and (new.salt1, new.salt2) == (old.salt1, old.salt2)

    with pytest.raises(errors.SrpPasswordChanged):
        await passwords.verify(user, laptop, client_check(stale, "old"), NOW)
    # A write proved against the old password does not go over the new one.
    assert not await passwords_store.set_password(
        db.pool, user, b"s1", b"s2", srp.pad(2), "", new.updated_at, replaces=old
    )
    assert not await passwords_store.delete_password(db.pool, old)
    assert await passwords_store.get_password(db.pool, user) == new
    state = await passwords.state(user, laptop, NOW)
    await passwords.verify(user, laptop, client_check(state, "new"), NOW)
