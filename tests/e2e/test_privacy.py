"""Privacy through Telethon: what contacts.addContact and blocks let one user see of
another, and what a blocker may still send."""

from __future__ import annotations

from telethon import functions, types

from .conftest import ClientFactory
from .test_messages import peer_of, sign_in
from .test_send_limits import error_of, send


async def test_add_contact_by_username_shows_no_phone_or_last_seen(
    make_client: ClientFactory,
) -> None:
    attacker = await sign_in(make_client, updates=False)
    victim = await sign_in(make_client, updates=False)
    # Last seen for contacts only (Telegram's default, kept here, is everybody).
    await victim(
        functions.account.SetPrivacyRequest(
            key=types.InputPrivacyKeyStatusTimestamp(),
            rules=[types.InputPrivacyValueAllowContacts()],
        )
    )
    await victim(functions.account.UpdateStatusRequest(offline=True))
    target = await peer_of(attacker, victim)  # knows only the username

    answer = await attacker(
        functions.contacts.AddContactRequest(id=target, first_name="V", last_name="", phone="")
    )
    [shown] = answer.users
    assert shown.contact and shown.phone is None
    assert not isinstance(shown.status, types.UserStatusOffline)  # no exact time
    [again] = await attacker(functions.users.GetUsersRequest(id=[target]))
    assert again.phone is None and not isinstance(again.status, types.UserStatusOffline)
    statuses = await attacker(functions.contacts.GetStatusesRequest())
    assert all(not isinstance(s.status, types.UserStatusOffline) for s in statuses)

    # Once the victim adds the other, that is the victim's choice: both are shown.
    await victim(
        functions.contacts.AddContactRequest(
            id=await peer_of(victim, attacker), first_name="A", last_name="", phone=""
        )
    )
    [trusted] = await attacker(functions.users.GetUsersRequest(id=[target]))
    assert trusted.phone == (await victim.get_me()).phone
    assert isinstance(trusted.status, types.UserStatusOffline)


async def test_blocks_work_both_ways(make_client: ClientFactory) -> None:
    blocker = await sign_in(make_client, updates=False)
    blocked = await sign_in(make_client, updates=False)
    blocked_peer = await peer_of(blocker, blocked)
    blocker_peer = await peer_of(blocked, blocker)
    for client in (blocker, blocked):
        await client(functions.account.UpdateStatusRequest(offline=False))
    [seen] = await blocked(functions.users.GetUsersRequest(id=[blocker_peer]))
    assert isinstance(seen.status, types.UserStatusOnline)

    await blocker(functions.contacts.BlockRequest(id=blocked_peer))
    [hidden] = await blocked(functions.users.GetUsersRequest(id=[blocker_peer]))
    assert isinstance(hidden.status, types.UserStatusEmpty)
    [other_way] = await blocker(functions.users.GetUsersRequest(id=[blocked_peer]))
    assert isinstance(other_way.status, types.UserStatusEmpty)

    assert await error_of(send(blocker, blocked_peer, "hi")) == "YOU_BLOCKED_USER"
    mine = (await send(blocker, types.InputPeerSelf(), "note")).updates[0].id
    forward = functions.messages.ForwardMessagesRequest(
        from_peer=types.InputPeerSelf(), id=[mine], to_peer=blocked_peer
    )
    assert await error_of(blocker(forward)) == "YOU_BLOCKED_USER"
    assert (await blocked.get_messages(blocker_peer, limit=5)).total == 0

    await blocker(functions.contacts.UnblockRequest(id=blocked_peer))
    await send(blocker, blocked_peer, "hi again")
    assert (await blocked.get_messages(blocker_peer, limit=5))[0].text == "hi again"
    [back] = await blocked(functions.users.GetUsersRequest(id=[blocker_peer]))
    assert isinstance(back.status, types.UserStatusOnline)
