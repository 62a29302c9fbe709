"""Accounts with unmodified Telethon: sign-in (--auto-register), profile, usernames,
contacts, several devices per account, one device switching accounts, forged hashes."""

from __future__ import annotations

import time

import pytest
from telethon import TelegramClient, errors
from telethon.tl import functions, types

from .conftest import ClientFactory

CODE = "12345"  # the e2e server's --dev-login-code


async def signed_in(make_client: ClientFactory, phone: str) -> TelegramClient:
    client = make_client()
    await client.start(phone=phone, code_callback=lambda: CODE)
    return client


async def test_sign_in_profile_username_and_resolve(make_client: ClientFactory) -> None:
    alice = await signed_in(make_client, "+15550001")
    me = await alice.get_me()
    assert me.phone == "15550001" and me.first_name == "+15550001" and me.is_self
    assert me.access_hash is not None

    user = await alice(functions.account.UpdateProfileRequest(first_name="Alice", last_name="A"))
    assert (user.first_name, user.last_name) == ("Alice", "A")
    assert await alice(functions.account.CheckUsernameRequest("alice_e2e"))
    user = await alice(functions.account.UpdateUsernameRequest("alice_e2e"))
    assert user.username == "alice_e2e"
    with pytest.raises(errors.UsernameNotModifiedError):
        await alice(functions.account.UpdateUsernameRequest("alice_e2e"))
    with pytest.raises(errors.UsernameInvalidError):
        await alice(functions.account.UpdateUsernameRequest("1alice"))

    bob = await signed_in(make_client, "+15550002")
    with pytest.raises(errors.UsernameOccupiedError):
        await bob(functions.account.UpdateUsernameRequest("ALICE_E2E"))
    found = await bob.get_entity("Alice_E2E")
    assert isinstance(found, types.User)
    assert (found.id, found.first_name, found.username) == (me.id, "Alice", "alice_e2e")
    assert found.phone is None and not found.contact and not found.is_self
    full = await bob(functions.users.GetFullUserRequest(found))
    assert full.full_user.id == me.id


async def test_import_contacts_then_get_entity_by_phone(make_client: ClientFactory) -> None:
    carol = await signed_in(make_client, "+15550003")
    dave = await signed_in(make_client, "+15550004")
    carol_me = await carol.get_me()
    result = await dave(
        functions.contacts.ImportContactsRequest(
            [
                types.InputPhoneContact(
                    client_id=1, phone="+15550003", first_name="Caz", last_name=""
                )
            ]
        )
    )
    assert [(i.user_id, i.client_id) for i in result.imported] == [(carol_me.id, 1)]
    entity = await dave.get_entity("+15550003")
    assert isinstance(entity, types.User)
    assert (entity.id, entity.phone, entity.first_name, entity.contact) == (
        carol_me.id,
        "15550003",
        "Caz",
        True,
    )
    # Carol sees Dave's phone now (Dave has her as a contact), but not as her contact.
    [dave_for_carol] = (await carol(functions.contacts.ResolvePhoneRequest(phone="15550004"))).users
    assert dave_for_carol.phone == "15550004" and not dave_for_carol.contact

    assert await dave(functions.contacts.BlockRequest(id=entity))
    blocked = await dave(functions.contacts.GetBlockedRequest(offset=0, limit=10))
    assert [b.peer_id.user_id for b in blocked.blocked] == [carol_me.id]
    assert await dave(functions.contacts.UnblockRequest(id=entity))


async def test_second_device_and_logging_out_one(make_client: ClientFactory) -> None:
    first = await signed_in(make_client, "+15550005")
    second = await signed_in(make_client, "+15550005")
    me1, me2 = await first.get_me(), await second.get_me()
    assert me1.id == me2.id

    listing = await first(functions.account.GetAuthorizationsRequest())
    assert len(listing.authorizations) == 2
    [current] = [a for a in listing.authorizations if a.current]
    assert current.hash == 0
    assert current.api_id == 1 and "layer" in current.app_name
    assert abs(current.date_created.timestamp() - time.time()) < 60

    await second.log_out()
    assert (await first.get_me()).id == me1.id  # the other device keeps working
    listing = await first(functions.account.GetAuthorizationsRequest())
    assert [a.current for a in listing.authorizations] == [True]


async def test_reset_authorization_ends_the_other_device(make_client: ClientFactory) -> None:
    first = await signed_in(make_client, "+15550006")
    second = await signed_in(make_client, "+15550006")
    listing = await first(functions.account.GetAuthorizationsRequest())
    [other] = [a for a in listing.authorizations if not a.current]
    assert await first(functions.account.ResetAuthorizationRequest(hash=other.hash))
    with pytest.raises(errors.HashInvalidError):
        await first(functions.account.ResetAuthorizationRequest(hash=other.hash))
    # The ended device's connection was closed; reconnecting, it is logged out.
    await second.disconnect()
    await second.connect()
    assert await second.get_me() is None


async def test_a_device_switching_accounts_keeps_nothing_of_the_first(
    make_client: ClientFactory,
) -> None:
    client = await signed_in(make_client, "+15550007")
    first_me = await client.get_me()
    await client(functions.auth.LogOutRequest())
    with pytest.raises(errors.AuthKeyUnregisteredError):
        await client(functions.users.GetUsersRequest([types.InputUserSelf()]))

    sent = await client(
        functions.auth.SendCodeRequest("15550008", 1, "0" * 32, types.CodeSettings())
    )
    auth = await client(functions.auth.SignInRequest("15550008", sent.phone_code_hash, CODE))
    assert auth.user.id != first_me.id
    [me] = await client(functions.users.GetUsersRequest([types.InputUserSelf()]))
    assert me.id == auth.user.id and me.phone == "15550008"

    other_device = await signed_in(make_client, "+15550007")
    listing = await other_device(functions.account.GetAuthorizationsRequest())
    assert len(listing.authorizations) == 1  # the switched device is not the first account's


async def test_forged_access_hash_is_refused(make_client: ClientFactory) -> None:
    eve = await signed_in(make_client, "+15550009")
    frank = await signed_in(make_client, "+15550010")
    frank_me = await frank.get_me()
    [frank_for_eve] = (await eve(functions.contacts.ResolvePhoneRequest("15550010"))).users
    forged = types.InputUser(frank_me.id, frank_for_eve.access_hash ^ 0x5A5A)
    with pytest.raises(errors.UserIdInvalidError):
        await eve(functions.users.GetUsersRequest([forged]))
    with pytest.raises(errors.PeerIdInvalidError):
        await eve(functions.contacts.BlockRequest(types.InputPeerUser(frank_me.id, 12345)))
    # Frank's own hash for himself means nothing in Eve's hands.
    with pytest.raises(errors.UserIdInvalidError):
        await eve(
            functions.users.GetUsersRequest([types.InputUser(frank_me.id, frank_me.access_hash)])
        )
    [ok] = await eve(
        functions.users.GetUsersRequest([types.InputUser(frank_me.id, frank_for_eve.access_hash)])
    )
    assert ok.id == frank_me.id


async def test_login_code_errors(make_client: ClientFactory) -> None:
    client = make_client()
    await client.connect()
    sent = await client(
        functions.auth.SendCodeRequest("15550011", 1, "0" * 32, types.CodeSettings())
    )
    with pytest.raises(errors.PhoneCodeInvalidError):
        await client(functions.auth.SignInRequest("15550011", sent.phone_code_hash, "99999"))
    with pytest.raises(errors.PhoneCodeExpiredError):
        await client(functions.auth.SignInRequest("15550011", "not-a-hash", CODE))
    for _ in range(4):
        await client(functions.auth.SendCodeRequest("15550011", 1, "0" * 32, types.CodeSettings()))
    with pytest.raises(errors.FloodWaitError) as flood:
        await client(functions.auth.SendCodeRequest("15550011", 1, "0" * 32, types.CodeSettings()))
    assert flood.value.seconds > 0
