"""Names and username changes per user per minute (profile_change_rate_limit): each
one is pushed to everyone who has the user in their contacts or chat list."""

from __future__ import annotations

import itertools

import pytest
from conftest import MakeServer

from telesrv.services.errors import FloodWait

RATE = 3
_phones = itertools.count(15552900000)


async def test_profile_changes_at_and_past_the_rate(make_server: MakeServer) -> None:
    accounts = make_server(profile_change_rate_limit=RATE).accounts
    assert accounts is not None
    users = accounts.users
    alice = (await users.create(f"+{next(_phones)}", "Alice")).user_id
    bob = (await users.create(f"+{next(_phones)}", "Bob")).user_id
    # Names and username count together: at the limit all pass.
    await users.update_profile(alice, first_name="A1")
    await users.update_username(alice, f"alice_{alice}")
    await users.update_profile(alice, last_name="L")
    # Past it: refused with the seconds to wait, and nothing changed.
    with pytest.raises(FloodWait) as refused:
        await users.update_profile(alice, first_name="A2")
    assert 1 <= int(refused.value.seconds) <= 60
    with pytest.raises(FloodWait):
        await users.update_username(alice, f"alice2_{alice}")
    account = await users.get(alice)
    assert (account.first_name, account.username) == ("A1", f"alice_{alice}")
    # Each user has a budget of their own.
    await users.update_profile(bob, first_name="B1")


async def test_no_limit_when_turned_off(make_server: MakeServer) -> None:
    accounts = make_server(profile_change_rate_limit=0).accounts
    assert accounts is not None
    alice = (await accounts.users.create(f"+{next(_phones)}", "Alice")).user_id
    for i in range(RATE + 2):
        await accounts.users.update_profile(alice, first_name=f"A{i}")
