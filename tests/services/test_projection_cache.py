"""User projections are cached per (viewer, target) and forgotten on every change that
shapes them: profile, username, status, contacts and blocks, either side."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable

import pytest

from telesrv.parts import AccountServices
from telesrv.services.contacts import PhoneContact
from telesrv.services.projection import Presence, UserView
from telesrv.services.projection_cache import ProjectionCache
from telesrv.services.sightings import Sightings
from telesrv.store.db import Db

NOW = 1_800_000_000.0
_phones = itertools.count(15551400000)


@pytest.fixture
def svc(accounts: AccountServices) -> AccountServices:
    return accounts


async def new_user(svc: AccountServices, name: str) -> int:
    return (await svc.users.create(f"+{next(_phones)}", name)).user_id


async def view(svc: AccountServices, viewer: int, target: int) -> UserView:
    found = await svc.projection.view(viewer, target, NOW)
    assert found is not None
    return found


async def kept_view(svc: AccountServices, viewer: int, target: int) -> UserView:
    """The view, seen twice so that the cache keeps the pair (it does from the second
    sighting): a change after it must drop what is kept."""
    await view(svc, viewer, target)
    found = await view(svc, viewer, target)
    assert svc.projection.cache.get(viewer, target) is not None
    return found


async def test_a_pair_is_kept_from_its_second_sighting(svc: AccountServices) -> None:
    a = await new_user(svc, "A")
    b = await new_user(svc, "B")
    await view(svc, a, b)
    assert svc.projection.cache.get(a, b) is None
    await view(svc, a, b)
    assert svc.projection.cache.get(a, b) is not None


async def test_a_cached_projection_costs_no_query(svc: AccountServices, db: Db) -> None:
    a = await new_user(svc, "A")
    b = await new_user(svc, "B")
    assert (await kept_view(svc, a, b)).first_name == "B"
    # Changed behind the services' back: the cache answers, so the old name stays.
    await db.pool.execute("UPDATE users SET first_name = 'Sneaky' WHERE user_id = $1", b)
    assert (await view(svc, a, b)).first_name == "B"
    many = await svc.projection.views_many({a: [b, a], b: [a]}, NOW)
    assert [v.first_name for v in many[a]] == ["B", "A"]  # b cached, a queried
    svc.projection.cache.forget([b])
    assert (await view(svc, a, b)).first_name == "Sneaky"


async def change_profile(svc: AccountServices, a: int, b: int) -> None:
    await svc.users.update_profile(b, first_name="Renamed")


async def change_username(svc: AccountServices, a: int, b: int) -> None:
    await svc.users.update_username(b, f"renamed{b}")


async def change_status(svc: AccountServices, a: int, b: int) -> None:
    await svc.users.set_status(b, offline=False, now=NOW)


async def viewer_adds_contact(svc: AccountServices, a: int, b: int) -> None:
    await svc.contacts.add_contact(a, b, "Saved", "")


async def target_adds_contact(svc: AccountServices, a: int, b: int) -> None:
    await svc.contacts.add_contact(b, a, "A", "")


async def target_blocks(svc: AccountServices, a: int, b: int) -> None:
    await svc.contacts.block(b, a, NOW)


async def viewer_blocks(svc: AccountServices, a: int, b: int) -> None:
    await svc.contacts.block(a, b, NOW)


async def viewer_imports(svc: AccountServices, a: int, b: int) -> None:
    phone = (await svc.users.get(b)).phone
    await svc.contacts.import_contacts(a, [PhoneContact(1, "+" + phone, "Imported", "")])


Change = Callable[[AccountServices, int, int], Awaitable[None]]


@pytest.mark.parametrize(
    ("change", "seen"),
    [
        (change_profile, lambda v: v.first_name == "Renamed"),
        (change_username, lambda v: v.username is not None),
        (change_status, lambda v: v.status.presence is Presence.ONLINE),
        (viewer_adds_contact, lambda v: v.contact and v.first_name == "Saved"),
        (target_adds_contact, lambda v: v.phone is not None),
        (viewer_imports, lambda v: v.contact and v.phone is not None),
    ],
)
async def test_every_change_is_seen_at_once(
    svc: AccountServices, change: Change, seen: Callable[[UserView], bool]
) -> None:
    a = await new_user(svc, "A")
    b = await new_user(svc, "B")
    await svc.users.set_status(b, offline=True, now=NOW - 10)
    before = await kept_view(svc, a, b)
    assert not seen(before)
    await change(svc, a, b)
    assert seen(await view(svc, a, b))


@pytest.mark.parametrize("change", [target_blocks, viewer_blocks])
async def test_blocks_and_unblocks_are_seen_at_once(svc: AccountServices, change: Change) -> None:
    a = await new_user(svc, "A")
    b = await new_user(svc, "B")
    await svc.users.set_status(b, offline=False, now=NOW)
    assert (await kept_view(svc, a, b)).status.presence is Presence.ONLINE
    await change(svc, a, b)
    assert (await kept_view(svc, a, b)).status.presence is Presence.LONG_AGO
    owner, other = (b, a) if change is target_blocks else (a, b)
    await svc.contacts.unblock(owner, other)
    assert (await view(svc, a, b)).status.presence is Presence.ONLINE


async def test_a_change_is_told_to_other_processes(svc: AccountServices) -> None:
    told: list[list[int]] = []
    svc.projection.cache.on_change = told.append
    a = await new_user(svc, "A")
    b = await new_user(svc, "B")
    await svc.contacts.block(a, b, NOW)
    await svc.users.update_profile(b, about="hi")
    assert told == [[a], [b]]


def test_the_cache_is_bounded_and_keeps_its_index_in_step() -> None:
    from telesrv.store.users import ProjectedUserRow

    def row(user_id: int) -> ProjectedUserRow:
        return ProjectedUserRow(
            user_id=user_id, phone="1", first_name="x", last_name="", username=None,
            online_until=None, last_online_at=None, saved_first_name=None,
            saved_last_name=None, in_viewer_contacts=False, has_viewer_in_contacts=False,
            saved_by_phone=False, viewer_blocked=False, blocked_viewer=False,
        )  # fmt: skip

    cache = ProjectionCache(size=3, sightings=Sightings(0))  # every pair kept at once
    for target in range(1, 6):  # at the limit, then past it: the oldest pairs go
        cache.put(100, row(target), cache.epoch)
        assert len(cache) == min(target, 3)
    assert [cache.get(100, t) is not None for t in range(1, 6)] == [False, False, True, True, True]
    stale = cache.epoch
    cache.forget([4])
    assert cache.get(100, 4) is None and len(cache) == 2
    cache.put(100, row(4), stale)  # a lookup that began before the change is not kept
    assert cache.get(100, 4) is None
    cache.forget([100])  # the viewer: every pair it takes part in
    assert len(cache) == 0
