"""Privacy rules (account.setPrivacy) as the projection applies them: the phone number,
the last-seen time, the about text and forward links follow the target's rules, first
match deciding, with Telegram's defaults for keys never set."""

from __future__ import annotations

import itertools

import pytest
from conftest import MakeServer

from telesrv.parts import AccountServices, Parts
from telesrv.services.contacts import PhoneContact
from telesrv.services.errors import PhoneNotOccupied, PrivacyTooLong
from telesrv.services.origin import Origin
from telesrv.services.privacy import (
    DEFAULT_RULES,
    MAX_RULE_USERS,
    MAX_RULES,
    PrivacyKey,
    PrivacyService,
    Rule,
    RuleKind,
    evaluate,
)
from telesrv.services.projection import Presence
from telesrv.store import state_log
from telesrv.store.db import Db

NOW = 1_800_000_000.0
SECRET = b"privacy-rules-secret-0123456789"
ORIGIN = Origin(auth_key_id=5, session_id=6)
_phones = itertools.count(15551700000)

ALL = Rule(RuleKind.ALLOW_ALL)
CONTACTS = Rule(RuleKind.ALLOW_CONTACTS)
NOBODY = Rule(RuleKind.DISALLOW_ALL)


async def hide_last_seen(privacy: PrivacyService, user_id: int) -> None:
    """The user shows their last-seen time to their contacts only."""
    await privacy.set_rules(user_id, PrivacyKey.STATUS_TIMESTAMP, [CONTACTS], ORIGIN, int(NOW))


@pytest.fixture
def svc(accounts: AccountServices) -> AccountServices:
    return accounts


@pytest.fixture
def privacy(parts: Parts) -> PrivacyService:
    return parts.privacy


async def new_user(svc: AccountServices, name: str = "User", last: str = "") -> int:
    return (await svc.users.create(f"+{next(_phones)}", name, last)).user_id


def test_the_first_matching_rule_decides_and_none_matching_refuses() -> None:
    me, other = 1, 2
    except_me = [Rule(RuleKind.DISALLOW_USERS, (me,)), ALL]
    assert not evaluate(except_me, me, is_contact=True)
    assert evaluate(except_me, other, is_contact=False)
    only_me = [Rule(RuleKind.ALLOW_USERS, (me,)), Rule(RuleKind.DISALLOW_CONTACTS)]
    assert evaluate(only_me, me, is_contact=True)
    assert not evaluate(only_me, other, is_contact=True)
    assert not evaluate(only_me, other, is_contact=False)  # nothing matched
    assert not evaluate([], me, is_contact=True)
    assert evaluate(DEFAULT_RULES[PrivacyKey.STATUS_TIMESTAMP], other, is_contact=False)
    assert not evaluate(DEFAULT_RULES[PrivacyKey.PHONE_NUMBER], other, is_contact=False)
    assert evaluate(DEFAULT_RULES[PrivacyKey.PHONE_NUMBER], other, is_contact=True)


async def test_defaults_until_set_then_the_stored_rules(
    svc: AccountServices, privacy: PrivacyService, db: Db
) -> None:
    a = await new_user(svc)
    b = await new_user(svc)
    for key in PrivacyKey:
        assert await privacy.rules(a, key) == DEFAULT_RULES[key]
    chosen = [Rule(RuleKind.ALLOW_USERS, (b, b, a)), NOBODY, Rule(RuleKind.DISALLOW_USERS, ())]
    stored = await privacy.set_rules(a, PrivacyKey.ABOUT, chosen, ORIGIN, int(NOW))
    assert stored == (Rule(RuleKind.ALLOW_USERS, (b, a)), NOBODY, Rule(RuleKind.DISALLOW_USERS))
    assert await privacy.rules(a, PrivacyKey.ABOUT) == stored
    assert await privacy.rules(a, PrivacyKey.FORWARDS) == DEFAULT_RULES[PrivacyKey.FORWARDS]
    # The owner's other devices hear of it through the state log (not the one setting).
    [(_, event)] = await state_log.events_after(db.pool, a, 0, 10)
    assert event.event_type == "privacy"
    assert event.payload == {
        "key": "about",
        "rules": [{"rule": "allow_users", "users": [b, a]}, {"rule": "disallow_all"}]
        + [{"rule": "disallow_users", "users": []}],
    }


async def test_rules_are_bounded(svc: AccountServices, privacy: PrivacyService) -> None:
    a = await new_user(svc)
    at_limit = [ALL] * MAX_RULES
    assert len(await privacy.set_rules(a, PrivacyKey.ABOUT, at_limit, ORIGIN, 0)) == MAX_RULES
    with pytest.raises(PrivacyTooLong):
        await privacy.set_rules(a, PrivacyKey.ABOUT, [ALL] * (MAX_RULES + 1), ORIGIN, 0)
    ids = tuple(range(10_000_000, 10_000_000 + MAX_RULE_USERS))
    half = MAX_RULE_USERS // 2
    split = [Rule(RuleKind.ALLOW_USERS, ids[:half]), Rule(RuleKind.DISALLOW_USERS, ids[half:])]
    stored = await privacy.set_rules(a, PrivacyKey.ABOUT, split, ORIGIN, 0)
    assert sum(len(r.users) for r in stored) == MAX_RULE_USERS
    # Repeats are counted once.
    again = [Rule(RuleKind.ALLOW_USERS, ids + ids[:10])]
    assert len((await privacy.set_rules(a, PrivacyKey.ABOUT, again, ORIGIN, 0))[0].users) == (
        MAX_RULE_USERS
    )
    one_more = [Rule(RuleKind.ALLOW_USERS, ids), Rule(RuleKind.DISALLOW_USERS, (1,))]
    with pytest.raises(PrivacyTooLong):
        await privacy.set_rules(a, PrivacyKey.ABOUT, one_more, ORIGIN, 0)
    assert len((await privacy.rules(a, PrivacyKey.ABOUT))[0].users) == MAX_RULE_USERS


async def test_the_phone_follows_the_phone_number_rules(
    svc: AccountServices, privacy: PrivacyService
) -> None:
    alice = await new_user(svc, "Alice")
    bob = await new_user(svc, "Bob")
    carol = await new_user(svc, "Carol")
    await svc.contacts.add_contact(alice, bob, "Bob", "")  # Bob is Alice's contact
    # Default: Alice's contacts see her number.
    views = {v.user_id: v for v in await svc.projection.views(bob, [alice], NOW)}
    assert views[alice].phone is not None
    assert (await svc.projection.view(carol, alice, NOW)).phone is None  # type: ignore[union-attr]

    await privacy.set_rules(alice, PrivacyKey.PHONE_NUMBER, [NOBODY], ORIGIN, 0)
    assert (await svc.projection.view(bob, alice, NOW)).phone is None  # type: ignore[union-attr]
    assert (await svc.projection.view(alice, alice, NOW)).phone is not None  # type: ignore[union-attr]

    await privacy.set_rules(
        alice, PrivacyKey.PHONE_NUMBER, [Rule(RuleKind.ALLOW_USERS, (carol,)), NOBODY], ORIGIN, 0
    )
    assert (await svc.projection.view(carol, alice, NOW)).phone is not None  # type: ignore[union-attr]
    assert (await svc.projection.view(bob, alice, NOW)).phone is None  # type: ignore[union-attr]

    await privacy.set_rules(alice, PrivacyKey.PHONE_NUMBER, [ALL], ORIGIN, 0)
    for viewer in (bob, carol):
        assert (await svc.projection.view(viewer, alice, NOW)).phone is not None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("ago", "presence"),
    [
        (60, Presence.RECENTLY),
        (2 * 86_400, Presence.RECENTLY),
        (5 * 86_400, Presence.LAST_WEEK),
        (20 * 86_400, Presence.LAST_MONTH),
        (90 * 86_400, Presence.LONG_AGO),
    ],
)
async def test_a_hidden_last_seen_is_told_by_how_long_ago(
    svc: AccountServices, privacy: PrivacyService, ago: int, presence: Presence
) -> None:
    alice = await new_user(svc, "Alice")
    bob = await new_user(svc, "Bob")
    await svc.users.set_status(alice, offline=True, now=NOW - ago)
    assert (await svc.projection.view(bob, alice, NOW)).status.presence is Presence.OFFLINE  # type: ignore[union-attr]
    await privacy.set_rules(
        alice,
        PrivacyKey.STATUS_TIMESTAMP,
        [Rule(RuleKind.DISALLOW_USERS, (bob,)), ALL],
        ORIGIN,
        0,
    )
    view = await svc.projection.view(bob, alice, NOW)
    assert view is not None and view.status.presence is presence
    assert view.status.was_online == 0  # no time at all


async def test_a_hidden_online_user_shows_as_recently(
    svc: AccountServices, privacy: PrivacyService
) -> None:
    alice = await new_user(svc, "Alice")
    bob = await new_user(svc, "Bob")
    carol = await new_user(svc, "Carol")
    await svc.contacts.add_contact(alice, carol, "Carol", "")
    await privacy.set_rules(alice, PrivacyKey.STATUS_TIMESTAMP, [CONTACTS], ORIGIN, 0)
    await svc.users.set_status(alice, offline=False, now=NOW - 10)
    many = await svc.projection.views_many({bob: [alice], carol: [alice]}, NOW)
    assert many[bob][0].status.presence is Presence.RECENTLY
    assert many[carol][0].status.presence is Presence.ONLINE
    assert (await svc.projection.view(alice, alice, NOW)).status.presence is Presence.ONLINE  # type: ignore[union-attr]


async def test_about_and_forwards_follow_their_rules(
    svc: AccountServices, privacy: PrivacyService
) -> None:
    alice = await new_user(svc, "Alice", "Smith")
    bob = await new_user(svc, "Bob")
    await svc.contacts.add_contact(bob, alice, "Saved", "Name")  # Bob's name for Alice
    assert await privacy.shows(bob, alice, PrivacyKey.ABOUT)
    assert await privacy.hidden_author_names(bob, [alice]) == {}

    await privacy.set_rules(alice, PrivacyKey.ABOUT, [CONTACTS], ORIGIN, 0)
    await privacy.set_rules(alice, PrivacyKey.FORWARDS, [NOBODY], ORIGIN, 0)
    assert not await privacy.shows(bob, alice, PrivacyKey.ABOUT)
    assert await privacy.shows(alice, alice, PrivacyKey.ABOUT)
    # Her own name, not the one Bob saved.
    assert await privacy.hidden_author_names(bob, [alice]) == {alice: "Alice Smith"}
    assert await privacy.hidden_author_names(alice, [alice]) == {}

    await svc.contacts.add_contact(alice, bob, "Bob", "")
    assert await privacy.shows(bob, alice, PrivacyKey.ABOUT)
    assert not await privacy.shows(bob, 999_999_999, PrivacyKey.ABOUT)  # nobody


async def test_a_change_is_seen_by_another_process(
    svc: AccountServices, privacy: PrivacyService, make_server: MakeServer
) -> None:
    """Two processes' projections: one changes a rule, the other forgets the pairs of
    that user when told over the bus (here: the cache's on_change, called directly)."""
    other = make_server().accounts
    assert other is not None
    told: list[list[int]] = []
    svc.projection.cache.on_change = told.append
    alice = await new_user(svc, "Alice")
    bob = await new_user(svc, "Bob")
    await svc.users.set_status(alice, offline=True, now=NOW - 60)
    before = await other.projection.view(bob, alice, NOW)
    assert before is not None and before.status.presence is Presence.OFFLINE

    await privacy.set_rules(alice, PrivacyKey.STATUS_TIMESTAMP, [NOBODY], ORIGIN, 0)
    assert told[-1] == [alice]
    other.projection.cache.forget(told[-1])  # what SharedInvalidations does on the bus
    after = await other.projection.view(bob, alice, NOW)
    assert after is not None and after.status.presence is Presence.RECENTLY


async def test_added_by_phone_decides_who_finds_a_hidden_number(
    svc: AccountServices, privacy: PrivacyService
) -> None:
    alice = await new_user(svc, "Alice")
    bob = await new_user(svc, "Bob")
    carol = await new_user(svc, "Carol")
    alice_phone = (await svc.users.get(alice)).phone
    await svc.contacts.add_contact(alice, carol, "Carol", "")
    # Defaults: everybody finds her by number.
    assert await svc.contacts.resolve_phone(bob, "+" + alice_phone) == alice

    await privacy.set_rules(alice, PrivacyKey.PHONE_NUMBER, [NOBODY], ORIGIN, 0)
    await privacy.set_rules(alice, PrivacyKey.ADDED_BY_PHONE, [CONTACTS], ORIGIN, 0)
    with pytest.raises(PhoneNotOccupied):
        await svc.contacts.resolve_phone(bob, "+" + alice_phone)
    result = await svc.contacts.import_contacts(bob, [PhoneContact(1, "+" + alice_phone, "A", "")])
    assert result.imported == []
    assert await svc.contacts.resolve_phone(carol, "+" + alice_phone) == alice
    result = await svc.contacts.import_contacts(
        carol, [PhoneContact(1, "+" + alice_phone, "A", "")]
    )
    assert result.imported == [(alice, 1)]


async def test_a_number_given_with_add_contact_is_a_lookup_the_rules_answer(
    svc: AccountServices, privacy: PrivacyService
) -> None:
    # addContact with a phone must not tell a right guess from a wrong one when the
    # user's rules hide the number from the one guessing.
    alice = await new_user(svc, "Alice")
    bob = await new_user(svc, "Bob")
    carol = await new_user(svc, "Carol")
    alice_phone = (await svc.users.get(alice)).phone
    await privacy.set_rules(alice, PrivacyKey.PHONE_NUMBER, [NOBODY], ORIGIN, int(NOW))
    await privacy.set_rules(alice, PrivacyKey.ADDED_BY_PHONE, [CONTACTS], ORIGIN, int(NOW))
    await svc.contacts.add_contact(alice, carol, "Carol", "")  # Carol may find her
    for viewer in (bob, carol):
        await svc.contacts.add_contact(viewer, alice, "A", "", phone="+10000000000")
        wrong = await svc.projection.view(viewer, alice, NOW)
        await svc.contacts.add_contact(viewer, alice, "A", "", phone=alice_phone)
        right = await svc.projection.view(viewer, alice, NOW)
        assert wrong is not None and wrong.phone is None
        assert right is not None
        # Bob may not find her by number: the right guess shows nothing either.
        assert (right.phone is not None) == (viewer == carol)
