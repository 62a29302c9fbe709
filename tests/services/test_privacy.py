"""What one user may learn of another follows the other's choices: phone numbers and
exact last-seen times are not handed out by adding someone to one's own contacts, and a
block hides status both ways and stops the blocker's messages."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from telesrv.parts import AccountServices, Parts
from telesrv.services.contacts import PhoneContact
from telesrv.services.errors import YouBlockedUser
from telesrv.services.messages import Origin, OutgoingText
from telesrv.services.projection import Presence
from telesrv.store.db import Db

from .test_privacy_rules import hide_last_seen

NOW = 1_800_000_000.0
ORIGIN = Origin(auth_key_id=3, session_id=4)
_phones = itertools.count(15551300000)
_random = itertools.count(1)


@pytest.fixture
def svc(accounts: AccountServices) -> AccountServices:
    return accounts


async def new_user(svc: AccountServices, name: str = "User") -> tuple[int, str]:
    account = await svc.users.create(f"+{next(_phones)}", name)
    return account.user_id, account.phone


async def test_adding_a_contact_by_id_reveals_neither_phone_nor_last_seen(
    svc: AccountServices, db: Db, parts: Parts
) -> None:
    a, _ = await new_user(svc, "A")
    b, b_phone = await new_user(svc, "B")
    await hide_last_seen(parts.privacy, b)  # the default shows it to everybody
    await svc.users.set_status(b, offline=True, now=NOW - 3600)
    await svc.contacts.add_contact(a, b, "Bee", "")  # a found b by username
    view = await svc.projection.view(a, b, NOW)
    assert view is not None and view.contact and view.first_name == "Bee"
    assert view.phone is None
    assert view.status.presence is Presence.RECENTLY

    # A number that is not b's changes nothing; b's own number means a has it.
    await svc.contacts.add_contact(a, b, "Bee", "", phone="+15550000000")
    assert (await svc.projection.view(a, b, NOW)).phone is None  # type: ignore[union-attr]
    await svc.contacts.add_contact(a, b, "Bee", "", phone="+" + b_phone)
    by_number = await svc.projection.view(a, b, NOW)
    assert by_number is not None and by_number.phone == b_phone
    assert by_number.status.presence is Presence.RECENTLY  # still b's choice

    # b adding a is b's choice: now a sees b's number and exact time.
    await svc.contacts.add_contact(b, a, "A", "")
    trusted = await svc.projection.view(a, b, NOW)
    assert trusted is not None and trusted.mutual_contact
    assert trusted.status.presence is Presence.OFFLINE
    assert trusted.status.was_online == int(NOW - 3600)


async def test_importing_by_number_shows_that_number_only(svc: AccountServices) -> None:
    a, _ = await new_user(svc, "A")
    b, b_phone = await new_user(svc, "B")
    c, _ = await new_user(svc, "C")
    await svc.contacts.import_contacts(a, [PhoneContact(1, "+" + b_phone, "B", "")])
    await svc.contacts.add_contact(a, c, "C", "")
    views = {v.user_id: v for v in await svc.projection.views(a, [b, c], NOW)}
    assert views[b].phone == b_phone and views[c].phone is None
    # Renaming b by id later does not forget that a saved b's number.
    await svc.contacts.add_contact(a, b, "Bee", "")
    assert (await svc.projection.view(a, b, NOW)).phone == b_phone  # type: ignore[union-attr]


async def test_a_block_hides_status_both_ways(svc: AccountServices) -> None:
    a, _ = await new_user(svc, "A")
    b, _ = await new_user(svc, "B")
    await svc.contacts.add_contact(a, b, "B", "")
    await svc.contacts.add_contact(b, a, "A", "")
    for user in (a, b):
        await svc.users.set_status(user, offline=False, now=NOW - 10)
    assert (await svc.projection.view(b, a, NOW)).status.presence is Presence.ONLINE  # type: ignore[union-attr]

    await svc.contacts.block(a, b, NOW)
    for viewer, target in ((b, a), (a, b)):
        view = await svc.projection.view(viewer, target, NOW)
        assert view is not None and view.status.presence is Presence.LONG_AGO
    # Many viewers at once (the push path) see the same.
    many = await svc.projection.views_many({a: [b], b: [a]}, NOW)
    assert [v.status.presence for v in many[a] + many[b]] == [Presence.LONG_AGO] * 2

    await svc.contacts.unblock(a, b)
    assert (await svc.projection.view(b, a, NOW)).status.presence is Presence.ONLINE  # type: ignore[union-attr]


async def test_sending_to_someone_you_blocked_is_refused(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    counters, messages = parts.counters, parts.messages
    a, _ = await new_user(svc, "A")
    b, _ = await new_user(svc, "B")

    async def send(sender: int, recipient: int) -> Any:
        msg = OutgoingText(sender, recipient, next(_random), "hi")
        return await messages.send_text(msg, ORIGIN, now=int(NOW))

    await send(a, b)  # both sides get "blocks nobody" marks
    await svc.contacts.block(a, b, NOW)
    await counters.forget_no_blocks(a)  # what the account events do after a block
    with pytest.raises(YouBlockedUser):
        await send(a, b)
    assert not await messages.may_notify(a, b) and not await messages.may_notify(b, a)
    # The blocked side may still write; it lands on its own side only.
    sent = await send(b, a)
    assert sent.message.out
    boxes = await db.pool.fetchval("SELECT count(*) FROM message_boxes WHERE owner_user_id = $1", a)
    assert boxes == 1  # the first message only
    # Refusals leave both logs dense.
    for user in (a, b):
        rows = await db.pool.fetch(
            "SELECT pts FROM user_update_events WHERE user_id = $1 ORDER BY pts", user
        )
        assert [r["pts"] for r in rows] == list(range(1, len(rows) + 1))

    await svc.contacts.unblock(a, b)
    await counters.forget_no_blocks(a)
    assert (await send(a, b)).message.out
