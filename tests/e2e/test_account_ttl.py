"""account.getAccountTTL through Telethon: the days of inactivity an account may go
through, as its owner chose them."""

from __future__ import annotations

from telethon import functions

from telesrv.services.account_ttl import DEFAULT_DAYS

from .conftest import ClientFactory
from .test_messages import sign_in


async def test_an_account_that_never_chose_has_the_default(make_client: ClientFactory) -> None:
    client = await sign_in(make_client, updates=False)
    ttl = await client(functions.account.GetAccountTTLRequest())
    assert ttl.days == DEFAULT_DAYS == 365
