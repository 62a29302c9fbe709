"""Status and name pushes: who is told (contacts and chat partners who are online, as
their privacy view allows), what each is sent, and a fan-out of 10,000 in chunks."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

import pytest

from telesrv.parts import AccountServices, Parts
from telesrv.rpc.profile_pushes import PUSH_CHUNK, ProfilePushes
from telesrv.services.origin import Origin
from telesrv.services.privacy import PrivacyKey, PrivacyService, Rule, RuleKind
from telesrv.store.db import Db
from telesrv.tl import decode, types

NOW = 1_800_000_000.0
SECRET = b"profile-pushes-secret-0123456789"
ORIGIN = Origin(auth_key_id=7, session_id=8)
_phones = itertools.count(15551800000)


@dataclass
class FakePlacement:
    """The cluster's placement: who is online, and what was pushed to whom."""

    online_users: set[int]
    bodies: list[tuple[int, bytes, tuple[int, int] | None]] = field(default_factory=list)
    lookups: list[int] = field(default_factory=list)  # chunk sizes
    flushes: int = 0

    async def locate(self, user_ids: list[int]) -> FakePlacement:
        self.lookups.append(len(user_ids))
        return self

    def online(self, user_id: int) -> bool:
        return user_id in self.online_users

    def push(self, user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int:
        self.bodies.append((user_id, body, exclude))
        return 1

    @property
    def pushed(self) -> list[tuple[int, types.Updates, tuple[int, int] | None]]:
        decoded = [(user_id, decode(body), exclude) for user_id, body, exclude in self.bodies]
        assert all(isinstance(updates, types.Updates) for _, updates, _ in decoded)
        return decoded  # type: ignore[return-value]

    def flush(self) -> None:
        self.flushes += 1

    def updates_to(self, user_id: int) -> list[types.TypeUpdate]:
        return [u for viewer, sent, _ in self.pushed if viewer == user_id for u in sent.updates]


@pytest.fixture
def svc(accounts: AccountServices) -> AccountServices:
    return accounts


def pushes_of(
    parts: Parts, placement: FakePlacement, chunk: int = PUSH_CHUNK
) -> tuple[ProfilePushes, PrivacyService]:
    """The server's privacy and users, pushing to ``placement`` instead of sessions (the
    class under test, with its placement swapped)."""
    privacy = parts.privacy
    users_tl = parts.account.users_tl
    return ProfilePushes(privacy, users_tl, placement.locate, chunk=chunk), privacy


async def new_user(svc: AccountServices, name: str) -> int:
    return (await svc.users.create(f"+{next(_phones)}", name)).user_id


async def test_status_goes_to_online_contacts_and_chat_partners_who_may_see_it(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    alice = await new_user(svc, "Alice")
    contact, partner, hidden, blocked, offline, stranger = [
        await new_user(svc, n) for n in ("C", "P", "H", "B", "O", "S")
    ]
    for viewer in (contact, hidden, blocked, offline):
        await svc.contacts.add_contact(viewer, alice, "Saved", "")
    await db.pool.execute(
        "INSERT INTO dialogs (user_id, peer_user_id) VALUES ($1, $2)", alice, partner
    )
    await svc.contacts.block(alice, blocked, NOW)
    placement = FakePlacement({contact, partner, hidden, blocked, stranger, alice})
    pushes, privacy = pushes_of(parts, placement, chunk=2)
    await privacy.set_rules(
        alice,
        PrivacyKey.STATUS_TIMESTAMP,
        [Rule(RuleKind.DISALLOW_USERS, (hidden,)), Rule(RuleKind.ALLOW_ALL)],
        ORIGIN,
        0,
    )
    await svc.users.set_status(alice, offline=False, now=NOW)

    assert await pushes.push_status(alice, NOW) == 2
    assert sorted(viewer for viewer, _, _ in placement.pushed) == sorted([contact, partner])
    for _, sent, exclude in placement.pushed:
        [update] = sent.updates
        assert update == types.UpdateUserStatus(
            user_id=alice, status=types.UserStatusOnline(expires=int(NOW) + 300)
        )
        [user] = sent.users
        assert isinstance(user, types.User) and user.id == alice and exclude is None
    # Audience of five (stranger and alice are not in it), two at a time; the last
    # chunk has nobody online, so nothing to flush.
    assert placement.lookups == [2, 2, 1] and placement.flushes == 2


async def test_names_go_to_contacts_with_the_own_name_and_to_other_devices(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    alice = await new_user(svc, "Alice")
    bob = await new_user(svc, "Bob")
    await svc.contacts.add_contact(bob, alice, "Ally", "")
    placement = FakePlacement({alice, bob})
    pushes, privacy = pushes_of(parts, placement)
    # Names are not guarded by the last-seen rules.
    await privacy.set_rules(
        alice, PrivacyKey.STATUS_TIMESTAMP, [Rule(RuleKind.DISALLOW_ALL)], ORIGIN, 0
    )
    await svc.users.update_profile(alice, first_name="Alicia")
    await svc.users.update_username(alice, "alicia_x")

    assert await pushes.push_name(alice, "Alicia", "", "alicia_x", ORIGIN, NOW) == 2
    [bob_update] = placement.updates_to(bob)
    assert bob_update == types.UpdateUserName(
        user_id=alice,
        first_name="Alicia",
        last_name="",
        usernames=[types.Username(username="alicia_x", active=True)],
    )
    [(_, to_bob, _)] = [p for p in placement.pushed if p[0] == bob]
    [shown] = to_bob.users
    assert isinstance(shown, types.User) and shown.first_name == "Ally"  # as Bob sees her
    [(_, to_self, exclude)] = [p for p in placement.pushed if p[0] == alice]
    assert exclude == (ORIGIN.auth_key_id, ORIGIN.session_id)
    [own] = to_self.updates
    assert isinstance(own, types.UpdateUserName) and own.usernames[0].editable


async def test_a_repeated_online_is_not_pushed_again(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    alice = await new_user(svc, "Alice")
    bob = await new_user(svc, "Bob")
    await svc.contacts.add_contact(bob, alice, "A", "")
    placement = FakePlacement({bob})
    pushes, _ = pushes_of(parts, placement)
    await svc.users.set_status(alice, offline=False, now=NOW)
    pushes.status_changed(alice, offline=False, now=NOW)
    await pushes.wait_idle()
    pushes.status_changed(alice, offline=False, now=NOW + 30)  # apps repeat it
    await pushes.wait_idle()
    assert len(placement.pushed) == 1
    await svc.users.set_status(alice, offline=True, now=NOW + 40)
    pushes.status_changed(alice, offline=True, now=NOW + 40)
    await pushes.wait_idle()
    assert len(placement.pushed) == 2
    pushes.status_changed(alice, offline=True, now=NOW + 50)  # to the background again
    await pushes.wait_idle()
    assert len(placement.pushed) == 2
    [_, (_, last, _)] = placement.pushed
    assert last.updates[0] == types.UpdateUserStatus(
        user_id=alice, status=types.UserStatusOffline(was_online=int(NOW + 40))
    )


async def test_ten_thousand_contacts_are_told_in_chunks(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    """A user with 10,000 contacts, all online, changes status: everyone is told, a
    chunk per holder lookup, and the loop is yielded between chunks."""
    alice = await new_user(svc, "Alice")
    viewers = [
        r["user_id"]
        for r in await db.pool.fetch(
            """
            INSERT INTO users (phone, first_name)
            SELECT (16660000000 + n)::text, 'V' || n FROM generate_series(1, 10000) AS n
            RETURNING user_id
            """
        )
    ]
    await db.pool.execute(
        """
        INSERT INTO contacts (owner_user_id, contact_user_id, first_name)
        SELECT v, $1, 'Alice' FROM unnest($2::bigint[]) AS v
        """,
        alice,
        viewers,
    )
    # As autovacuum would after such a load: without statistics, the projection's
    # generic plan (chosen after five runs of the same statement) is far slower.
    await db.pool.execute("ANALYZE users, contacts")
    placement = FakePlacement(set(viewers))
    pushes, _ = pushes_of(parts, placement)
    await svc.users.set_status(alice, offline=False, now=NOW)
    lags: list[float] = []

    async def probe() -> None:
        # How long other work waits for the loop meanwhile.
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0)
            lags.append(time.perf_counter() - before)

    prober = asyncio.create_task(probe())
    started = time.perf_counter()
    pushes.status_changed(alice, offline=False, now=NOW)
    await pushes.wait_idle()
    elapsed = time.perf_counter() - started
    prober.cancel()
    assert len(placement.bodies) == 10_000
    assert placement.lookups == [PUSH_CHUNK] * (10_000 // PUSH_CHUNK)
    # The figures, for the record (no threshold: they depend on the machine).
    print(f"10,000 viewers told in {elapsed:.3f} s, the loop held at most {max(lags):.3f} s")
