"""Per-user limits through Telethon, on a server with small ones: every forwarded copy
counts against the send rate; contacts.importContacts and contacts.resolvePhone
(phone-number enumeration) are limited in calls per minute (FLOOD_WAIT_X) and in
distinct numbers per day (importContacts hands the rest back in retry_contacts).
Other users are not affected."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from telethon import functions, types
from telethon.crypto import rsa as telethon_rsa

from telesrv.app import open_resources
from telesrv.wiring import build_server

from .conftest import ClientFactory, RunningServer, e2e_settings
from .test_messages import peer_of, sign_in
from .test_send_limits import error_of, send

PER_MINUTE = 4
PER_DAY = 5
SENDS_PER_MINUTE = 5
_numbers = itertools.count(19990000001)


@pytest.fixture(scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, redis: Any
) -> AsyncIterator[RunningServer]:
    settings = e2e_settings(
        tmp_path_factory.mktemp("telesrv-lookups"),
        database_url,
        redis_url,
        send_rate_limit=SENDS_PER_MINUTE,
        phone_lookup_rate_limit=PER_MINUTE,
        phone_lookup_daily_limit=PER_DAY,
    )
    async with open_resources(settings) as resources:
        built = build_server(settings, resources)
        host, port = await built.start(settings.listen_host, settings.listen_port)
        running = RunningServer(settings, resources, built, host, port)
        telethon_rsa.add_key(resources.server_key.public_pem, old=False)
        try:
            yield running
        finally:
            await running.server.stop()


def contacts(numbers: list[str]) -> Any:
    return functions.contacts.ImportContactsRequest(
        contacts=[
            types.InputPhoneContact(client_id=i, phone=n, first_name="x", last_name="")
            for i, n in enumerate(numbers, start=1)
        ]
    )


async def test_resolve_phone_calls_per_minute(make_client: ClientFactory) -> None:
    prober = await sign_in(make_client, updates=False)
    prober.flood_sleep_threshold = 0  # report FLOOD_WAIT instead of sleeping it off
    target = await sign_in(make_client, updates=False)
    phone = (await target.get_me()).phone
    for _ in range(PER_MINUTE):  # the same number again and again: one distinct lookup
        resolved = await prober(functions.contacts.ResolvePhoneRequest(phone=phone))
        assert resolved.users[0].id == (await target.get_me()).id
    assert await error_of(prober(functions.contacts.ResolvePhoneRequest(phone=phone))) == (
        "FLOOD_WAIT"
    )
    # Importing shares the window; another user has their own.
    assert await error_of(prober(contacts(["+15550000001"]))) == "FLOOD_WAIT"
    other = await sign_in(make_client, updates=False)
    await other(functions.contacts.ResolvePhoneRequest(phone=phone))


async def test_distinct_numbers_per_day(make_client: ClientFactory) -> None:
    prober = await sign_in(make_client, updates=False)
    prober.flood_sleep_threshold = 0
    known = await sign_in(make_client, updates=False)
    known_phone = (await known.get_me()).phone
    unknown = [str(next(_numbers)) for _ in range(PER_DAY)]

    # One call with PER_DAY + 1 numbers: the one past the cap comes back to retry.
    answer = await prober(contacts([*unknown[: PER_DAY - 1], known_phone, unknown[-1]]))
    assert [c.user_id for c in answer.imported] == [(await known.get_me()).id]
    assert answer.retry_contacts == [PER_DAY + 1]
    # Numbers already counted today stay free; any new one is refused.
    again = await prober(contacts([known_phone, unknown[0]]))
    assert again.retry_contacts == [] and len(again.imported) == 1
    assert (
        await error_of(prober(functions.contacts.ResolvePhoneRequest(phone=unknown[-1])))
        == "FLOOD_WAIT"
    )
    assert (
        await error_of(prober(functions.contacts.ResolvePhoneRequest(phone=unknown[0])))
        == "PHONE_NOT_OCCUPIED"
    )


async def test_every_forwarded_copy_counts_against_the_send_rate(
    make_client: ClientFactory,
) -> None:
    alice = await sign_in(make_client, updates=False)
    alice.flood_sleep_threshold = 0
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    ids = [(await send(alice, peer, f"m{i}")).updates[0].id for i in range(2)]

    def forward(ids: list[int]) -> Any:
        return alice(
            functions.messages.ForwardMessagesRequest(
                from_peer=peer, id=ids, to_peer=types.InputPeerSelf()
            )
        )

    await forward([*ids, ids[0] + 100])  # the missing id is no copy: 2 + 2 = 4
    await forward(ids[:1])  # 5: at the limit
    assert await error_of(forward(ids[:1])) == "FLOOD_WAIT"  # one past
    assert await error_of(send(alice, peer, "x")) == "FLOOD_WAIT"
    await send(bob, await peer_of(bob, alice), "others still send")
