"""account.getAccountTTL and account.setAccountTTL through Telethon: the days of
inactivity an account may go through, as its owner chose them."""

from __future__ import annotations

from telethon import functions, types

from telesrv.services.account_ttl import DEFAULT_DAYS

from .conftest import ClientFactory
from .test_messages import second_device, sign_in
from .test_send_limits import error_of


async def test_an_account_that_never_chose_has_the_default(make_client: ClientFactory) -> None:
    client = await sign_in(make_client, updates=False)
    ttl = await client(functions.account.GetAccountTTLRequest())
    assert ttl.days == DEFAULT_DAYS == 365


async def test_the_chosen_days_hold_on_every_device(make_client: ClientFactory) -> None:
    client = await sign_in(make_client, updates=False)
    for days in (30, 730, 548):  # both ends of the range, then a value inside it
        done = await client(functions.account.SetAccountTTLRequest(types.AccountDaysTTL(days)))
        assert done is True
        assert (await client(functions.account.GetAccountTTLRequest())).days == days
    other = await second_device(make_client, f"+{(await client.get_me()).phone}", updates=False)
    assert (await other(functions.account.GetAccountTTLRequest())).days == 548


async def test_days_outside_the_range_are_refused(make_client: ClientFactory) -> None:
    client = await sign_in(make_client, updates=False)
    for days in (29, 731, 0, -1):  # one past each end, and nonsense
        refused = client(functions.account.SetAccountTTLRequest(types.AccountDaysTTL(days)))
        assert await error_of(refused) == "TTL_DAYS_INVALID"
    assert (await client(functions.account.GetAccountTTLRequest())).days == DEFAULT_DAYS
