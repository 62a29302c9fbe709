"""Status, name and photo pushes: who is told (contacts and chat partners who are
online, as their privacy view allows), what each is sent, a fan-out of 10,000 in
chunks, the pacing of repeated changes and the kept audience, and each bound."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from telesrv.parts import AccountServices, Parts
from telesrv.rpc.profile_pushes import (
    AUDIENCE_CACHE_MIN,
    AUDIENCE_CACHE_SIZE,
    AUDIENCE_TTL,
    MAX_AUDIENCE,
    PUSH_CHUNK,
    STATUS_MEMO_SIZE,
    ProfilePushes,
)
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


async def no_wait(seconds: float) -> None:
    """The pacing's sleep, over at once (the tests that look at pacing use a Gate)."""


class Gate:
    """The pacing's sleep, over when the test says so."""

    def __init__(self) -> None:
        self.waiting: list[asyncio.Future[None]] = []

    async def sleep(self, seconds: float) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append(done)
        await done

    async def until_waited(self, n: int) -> None:
        """Until ``n`` sleeps have begun in all (the loop runs the tasks meanwhile)."""
        for _ in range(100_000):
            if len(self.waiting) >= n:
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"{len(self.waiting)} sleeps began, not {n}")

    def open(self) -> None:
        for done in self.waiting:
            if not done.done():
                done.set_result(None)


@dataclass
class CountedAudience:
    """The privacy service's audience, with its queries counted."""

    privacy: PrivacyService
    queries: list[int] = field(default_factory=list)

    async def __call__(self, user_id: int, limit: int) -> list[int]:
        self.queries.append(user_id)
        return await self.privacy.profile_audience(user_id, limit)


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


def pushes_of(
    parts: Parts,
    placement: FakePlacement,
    chunk: int = PUSH_CHUNK,
    *,
    sleep: Callable[[float], Awaitable[None]] = no_wait,
    audience: CountedAudience | None = None,
    clock: Clock | None = None,
    max_audience: int = MAX_AUDIENCE,
    audience_cache_size: int = AUDIENCE_CACHE_SIZE,
    audience_cache_min: int = AUDIENCE_CACHE_MIN,
    status_memo_size: int = STATUS_MEMO_SIZE,
) -> tuple[ProfilePushes, PrivacyService]:
    """The server's privacy and users, pushing to ``placement`` instead of sessions (the
    class under test, with its placement swapped)."""
    privacy = parts.privacy
    users_tl = parts.account.users_tl
    pushes = ProfilePushes(
        audience or privacy.profile_audience,
        users_tl,
        placement.locate,
        chunk=chunk,
        max_audience=max_audience,
        audience_cache_size=audience_cache_size,
        audience_cache_min=audience_cache_min,
        status_memo_size=status_memo_size,
        sleep=sleep,
        clock=clock or Clock(),
    )
    return pushes, privacy


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


async def contacts_of(db: Db, svc: AccountServices, user_id: int, n: int) -> list[int]:
    """``n`` new users who have ``user_id`` in their contacts, in ascending id order."""
    viewers = [await new_user(svc, f"V{i}") for i in range(n)]
    for viewer in viewers:
        await svc.contacts.add_contact(viewer, user_id, "Saved", "")
    return sorted(viewers)


def statuses_to(placement: FakePlacement, viewer: int) -> list[types.TypeUserStatus]:
    return [u.status for u in placement.updates_to(viewer) if isinstance(u, types.UpdateUserStatus)]


async def test_a_burst_of_status_changes_fans_out_twice_with_the_latest_state(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    """200 updateStatus calls alternating offline true/false: one fan-out at once, one
    more when the interval is over (with the last state), one audience query."""
    alice = await new_user(svc, "Alice")
    [bob] = await contacts_of(db, svc, alice, 1)
    placement = FakePlacement({bob})
    gate = Gate()
    audience = CountedAudience(parts.privacy)
    pushes, _ = pushes_of(
        parts, placement, sleep=gate.sleep, audience=audience, audience_cache_min=1
    )
    for i in range(200):
        offline = i % 2 == 1
        await svc.users.set_status(alice, offline=offline, now=NOW + i)
        pushes.status_changed(alice, offline=offline, now=NOW + i)
        if i == 0:
            await gate.until_waited(1)  # the first went out at once
    assert len(placement.pushed) == 1 and placement.lookups == [1]
    gate.open()
    await gate.until_waited(2)  # the second, then its own interval
    gate.open()
    await pushes.wait_idle()
    assert placement.lookups == [1, 1] and audience.queries == [alice]
    assert statuses_to(placement, bob) == [
        types.UserStatusOnline(expires=int(NOW) + 300),
        types.UserStatusOffline(was_online=int(NOW + 199)),
    ]


async def test_names_in_a_burst_send_the_last_names_once_more(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    alice = await new_user(svc, "Alice")
    [bob] = await contacts_of(db, svc, alice, 1)
    placement = FakePlacement({bob})
    gate = Gate()
    pushes, _ = pushes_of(parts, placement, sleep=gate.sleep)
    for i in range(5):
        pushes.name_changed(alice, f"Alice{i}", "", None, ORIGIN, NOW)
        if i == 0:
            await gate.until_waited(1)
    gate.open()
    await gate.until_waited(2)
    gate.open()
    await pushes.wait_idle()
    names = [u for u in placement.updates_to(bob) if isinstance(u, types.UpdateUserName)]
    assert [u.first_name for u in names] == ["Alice0", "Alice4"]


async def test_photo_changes_reach_the_audience_paced(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    alice = await new_user(svc, "Alice")
    partner = await new_user(svc, "P")
    await db.pool.execute(
        "INSERT INTO dialogs (user_id, peer_user_id) VALUES ($1, $2)", alice, partner
    )
    [bob] = await contacts_of(db, svc, alice, 1)
    placement = FakePlacement({bob, partner, alice})
    gate = Gate()
    audience = CountedAudience(parts.privacy)
    pushes, _ = pushes_of(
        parts, placement, sleep=gate.sleep, audience=audience, audience_cache_min=1
    )
    pushes.photo_changed(alice, NOW)
    await gate.until_waited(1)
    pushes.photo_changed(alice, NOW + 1)
    pushes.photo_changed(alice, NOW + 2)
    # Status and photo share the audience query.
    pushes.status_changed(alice, offline=False, now=NOW)
    await gate.until_waited(2)
    gate.open()
    await gate.until_waited(3)  # the photo again (the status had nothing more)
    gate.open()
    await pushes.wait_idle()
    photos = [(v, u) for v, sent, _ in placement.pushed for u in sent.updates]
    told = sorted(v for v, u in photos if isinstance(u, types.UpdateUser))
    # Twice each (not the owner: her devices read it from the state log).
    assert told == sorted([bob, bob, partner, partner])
    assert [u for _, u in photos if isinstance(u, types.UpdateUser)] == [
        types.UpdateUser(user_id=alice)
    ] * 4
    assert audience.queries == [alice]


async def test_the_audience_is_kept_for_its_ttl_only(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    alice = await new_user(svc, "Alice")
    [bob] = await contacts_of(db, svc, alice, 1)
    clock = Clock()
    audience = CountedAudience(parts.privacy)
    placement = FakePlacement({bob})
    pushes, _ = pushes_of(parts, placement, audience=audience, clock=clock, audience_cache_min=1)
    await svc.users.set_status(alice, offline=False, now=NOW)
    await pushes.push_status(alice, NOW)
    clock.now = AUDIENCE_TTL - 1
    carol = await new_user(svc, "Carol")
    await svc.contacts.add_contact(carol, alice, "A", "")
    placement.online_users.add(carol)
    await pushes.push_status(alice, NOW)
    assert audience.queries == [alice]
    assert [v for v, _, _ in placement.pushed] == [bob, bob]  # Carol not yet
    clock.now = AUDIENCE_TTL
    await pushes.push_status(alice, NOW)
    assert audience.queries == [alice, alice]
    assert sorted(v for v, _, _ in placement.pushed[2:]) == sorted([bob, carol])


async def test_audience_cache_size_at_and_past_the_limit(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    users = [await new_user(svc, f"U{i}") for i in range(3)]
    audience = CountedAudience(parts.privacy)
    pushes, _ = pushes_of(
        parts, FakePlacement(set()), audience=audience, audience_cache_size=2, audience_cache_min=0
    )
    for user in users[:2]:
        await pushes.push_status(user, NOW)
    for user in users[:2]:  # at the limit: both kept
        await pushes.push_status(user, NOW)
    assert audience.queries == users[:2]
    await pushes.push_status(users[2], NOW)  # past it: the least recently used goes
    await pushes.push_status(users[0], NOW)
    assert audience.queries == [*users[:2], users[2], users[0]]


@pytest.mark.parametrize("viewers", [3, 4])
async def test_max_audience_at_and_past_the_limit(
    db: Db, svc: AccountServices, parts: Parts, viewers: int
) -> None:
    alice = await new_user(svc, "Alice")
    everyone = await contacts_of(db, svc, alice, viewers)
    placement = FakePlacement(set(everyone))
    pushes, _ = pushes_of(parts, placement, max_audience=3)
    await svc.users.set_status(alice, offline=False, now=NOW)
    assert await pushes.push_status(alice, NOW) == 3
    assert [v for v, _, _ in placement.pushed] == everyone[:3]


@pytest.mark.parametrize(("viewers", "lookups"), [(3, [3]), (4, [3, 1])])
async def test_push_chunk_at_and_past_the_limit(
    db: Db, svc: AccountServices, parts: Parts, viewers: int, lookups: list[int]
) -> None:
    alice = await new_user(svc, "Alice")
    everyone = await contacts_of(db, svc, alice, viewers)
    placement = FakePlacement(set(everyone))
    pushes, _ = pushes_of(parts, placement, chunk=3)
    await svc.users.set_status(alice, offline=False, now=NOW)
    assert await pushes.push_status(alice, NOW) == viewers
    assert placement.lookups == lookups and placement.flushes == len(lookups)


async def test_status_memo_size_at_and_past_the_limit(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    users = [await new_user(svc, f"U{i}") for i in range(3)]
    for user in users:
        await contacts_of(db, svc, user, 1)  # a fan-out is then one holder lookup
    placement = FakePlacement(set())
    pushes, _ = pushes_of(parts, placement, status_memo_size=2)

    async def change(user: int, at: float) -> None:
        pushes.status_changed(user, offline=False, now=at)
        await pushes.wait_idle()

    for user in users[:2]:
        await change(user, NOW)
    for user in users[:2]:  # at the limit: both remembered, the repeats not pushed
        await change(user, NOW + 1)
    assert len(placement.lookups) == 2
    await change(users[2], NOW)  # past it: the oldest is forgotten
    await change(users[0], NOW + 2)
    assert len(placement.lookups) == 4


async def test_audience_cache_min_at_and_past_the_limit(
    db: Db, svc: AccountServices, parts: Parts
) -> None:
    """An audience under the minimum is read anew each time (so a new contact hears of
    the next change); one at the minimum is kept."""
    small, large = await new_user(svc, "S"), await new_user(svc, "L")
    await contacts_of(db, svc, small, 1)
    await contacts_of(db, svc, large, 2)
    audience = CountedAudience(parts.privacy)
    pushes, _ = pushes_of(parts, FakePlacement(set()), audience=audience, audience_cache_min=2)
    for _ in range(2):
        await pushes.push_status(small, NOW)
        await pushes.push_status(large, NOW)
    assert audience.queries == [small, large, small]
