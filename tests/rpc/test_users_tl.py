"""TL users are built once per (viewer, target) and given again while the facts they
were built from and their status hold; any change of either builds them anew."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from conftest import MakeServer
from hypothesis import given, settings
from hypothesis import strategies as st

from telesrv.parts import AccountServices, Parts
from telesrv.rpc.users_tl import UsersTl, status_to_tl
from telesrv.services.access_hashes import AccessHashes
from telesrv.services.origin import Origin
from telesrv.services.privacy import PrivacyKey, PrivacyService, Rule, RuleKind
from telesrv.services.projection import (
    LAST_MONTH,
    ONLINE_TIMEOUT,
    RECENTLY,
    UserFacts,
    UserProjection,
)
from telesrv.tl import types

NOW = 1_800_000_000.0
SECRET = b"users-tl-secret-0123456789abcdef"
_phones = itertools.count(15551500000)


@pytest.fixture
def svc(accounts: AccountServices) -> AccountServices:
    return accounts


@pytest.fixture
def users_tl(parts: Parts) -> UsersTl:
    """The server's one (fresh in every test)."""
    return parts.account.users_tl


async def new_user(svc: AccountServices, name: str) -> int:
    return (await svc.users.create(f"+{next(_phones)}", name)).user_id


async def hide_last_seen(privacy: PrivacyService, user_id: int) -> None:
    """The user shows their last-seen time to their contacts only."""
    await privacy.set_rules(
        user_id,
        PrivacyKey.STATUS_TIMESTAMP,
        [Rule(RuleKind.ALLOW_CONTACTS)],
        Origin(auth_key_id=0, session_id=0),
        0,
    )


async def one(users_tl: UsersTl, viewer: int, target: int, now: float) -> types.User:
    return await users_tl.one(viewer, target, now)


async def seen(users_tl: UsersTl, viewer: int, target: int) -> None:
    """A first sighting of the pair, after which the next build of it is kept."""
    await users_tl.one(viewer, target, NOW)


async def kept(users_tl: UsersTl, viewer: int, target: int, now: float) -> types.User:
    """The user, seen until it is kept: a change after it must drop what is kept."""
    await seen(users_tl, viewer, target)
    user = await one(users_tl, viewer, target, now)
    assert await one(users_tl, viewer, target, now) is user
    return user


async def test_a_pair_is_kept_from_its_second_sighting(
    svc: AccountServices, users_tl: UsersTl
) -> None:
    a = await new_user(svc, "A")
    b = await new_user(svc, "B")
    first = await one(users_tl, a, b, NOW)
    second = await one(users_tl, a, b, NOW)
    assert second is not first and second == first
    assert await one(users_tl, a, b, NOW) is second
    # kept from the moment the projection keeps the pair's facts, however it came
    # to: here it was asked for them before
    await svc.projection.view(b, a, NOW)
    fresh = UsersTl(svc.projection)
    assert await one(fresh, b, a, NOW) is await one(fresh, b, a, NOW)


async def test_a_built_user_is_given_again_while_nothing_changed(
    svc: AccountServices, users_tl: UsersTl
) -> None:
    a = await new_user(svc, "A")
    b = await new_user(svc, "B")
    await svc.users.set_status(b, offline=False, now=NOW)
    await seen(users_tl, a, b)
    first = await one(users_tl, a, b, NOW)
    assert isinstance(first.status, types.UserStatusOnline)
    # the same object, through every entry point, while b stays online
    assert await one(users_tl, a, b, NOW + 1) is first
    assert (await users_tl(a, [b], NOW + 2))[0] is first
    assert (await users_tl.many({a: [b, a]}, NOW + 3))[a][0] is first
    # another viewer of the same user has a user of their own
    c = await new_user(svc, "C")
    theirs = await kept(users_tl, c, b, NOW)
    assert theirs is not first and theirs.access_hash != first.access_hash


async def test_a_pushed_user_is_written_once_while_it_is_kept(
    svc: AccountServices, users_tl: UsersTl
) -> None:
    a = await new_user(svc, "A")
    b = await new_user(svc, "B")
    await svc.users.set_status(b, offline=False, now=NOW)

    async def wire(now: float) -> bytes:
        found = await users_tl.wire_many({a: [b, b]}, now)
        assert [user_id for user_id, _ in found[a]] == [b]
        return found[a][0][1]

    # a pair seen once is written from its view, as its user would be
    first = await wire(NOW)
    assert first == (await one(users_tl, a, b, NOW)).to_bytes()
    # kept: its user is written once, and what is written goes with the user
    user = await one(users_tl, a, b, NOW)
    kept_bytes = await wire(NOW + 1)
    assert kept_bytes == user.to_bytes() and await wire(NOW + 2) is kept_bytes
    assert await one(users_tl, a, b, NOW + 2) is user
    # a change makes both anew
    await svc.users.update_profile(b, first_name="Renamed")
    renamed = await wire(NOW)
    assert renamed != kept_bytes
    assert renamed == (await one(users_tl, a, b, NOW)).to_bytes()
    # so does a status that runs out
    ended = await wire(NOW + ONLINE_TIMEOUT)
    assert ended != renamed
    offline = await one(users_tl, a, b, NOW + ONLINE_TIMEOUT)
    assert ended == offline.to_bytes() and isinstance(offline.status, types.UserStatusOffline)
    assert await users_tl.wire_many({a: [10**12]}, NOW) == {a: []}


async def test_an_answer_s_users_are_written_as_their_objects(
    svc: AccountServices, users_tl: UsersTl
) -> None:
    """``wire``: one viewer's users, written, in the order asked, the missing left out;
    a pair kept and a pair seen for the first time (written from its view alike)."""
    a, b, c = [await new_user(svc, name) for name in "ABC"]
    await svc.users.set_status(c, offline=False, now=NOW)
    kept_b = await kept(users_tl, a, b, NOW)
    asked = [b, 10**12, c, a]
    written = await users_tl.wire(a, asked, NOW)  # c's and a's first sightings
    # What ``__call__`` gives for the same list (an older layer's answer is made of it).
    objects = await users_tl(a, asked, NOW)
    assert written == [u.to_bytes() for u in objects]
    assert objects[0] is kept_b and len(objects) == 3
    assert isinstance(objects[2], types.User) and objects[2].self_


async def test_a_status_that_runs_out_is_built_anew(
    svc: AccountServices, users_tl: UsersTl, parts: Parts
) -> None:
    a = await new_user(svc, "A")
    b = await new_user(svc, "B")
    await svc.users.set_status(b, offline=False, now=NOW)
    expires = NOW + ONLINE_TIMEOUT
    await seen(users_tl, a, b)
    online = await one(users_tl, a, b, expires - 0.001)
    assert isinstance(online.status, types.UserStatusOnline)
    # once the online period ended, it is the last-seen time
    ended = await one(users_tl, a, b, expires)
    assert ended.status == types.UserStatusOffline(was_online=int(expires))
    # the time going back (another request's clock) never reuses a later status
    again = await one(users_tl, a, b, NOW)
    assert isinstance(again.status, types.UserStatusOnline) and again is not online

    # a stranger b hides the time from sees an approximation, which runs out too
    await hide_last_seen(parts.privacy, b)
    await seen(users_tl, a, b)  # the change dropped the pair: it is kept once seen again
    recently = await one(users_tl, a, b, expires)
    assert isinstance(recently.status, types.UserStatusRecently)
    assert await one(users_tl, a, b, expires + RECENTLY) is recently
    last_week = await one(users_tl, a, b, expires + RECENTLY + 1)
    assert isinstance(last_week.status, types.UserStatusLastWeek)


async def test_a_change_of_facts_is_built_anew(svc: AccountServices, users_tl: UsersTl) -> None:
    a = await new_user(svc, "A")
    b = await new_user(svc, "B")
    before = await kept(users_tl, a, b, NOW)
    await svc.users.update_profile(b, first_name="Renamed")
    after = await kept(users_tl, a, b, NOW)
    assert (before.first_name, after.first_name) == ("B", "Renamed")
    await svc.contacts.block(b, a, NOW)
    blocked = await one(users_tl, a, b, NOW)
    assert isinstance(blocked.status, types.UserStatusEmpty) and blocked is not after


async def test_a_contact_saved_by_either_side_is_built_anew(
    svc: AccountServices, users_tl: UsersTl, parts: Parts
) -> None:
    a = await new_user(svc, "A")
    b = await new_user(svc, "B")
    await svc.users.set_status(b, offline=True, now=NOW)
    await hide_last_seen(parts.privacy, b)  # from strangers; the default is everybody
    stranger = await kept(users_tl, a, b, NOW)
    assert stranger.phone is None and isinstance(stranger.status, types.UserStatusRecently)
    # the target saving the viewer shows the viewer the phone and the exact time
    await svc.contacts.add_contact(b, a, "A", "")
    trusted = await kept(users_tl, a, b, NOW)
    assert trusted.phone is not None and isinstance(trusted.status, types.UserStatusOffline)
    # the viewer saving the target under a name of their own shows that name
    await svc.contacts.add_contact(a, b, "Saved", "Name")
    saved = await one(users_tl, a, b, NOW)
    assert (saved.first_name, saved.last_name, saved.contact) == ("Saved", "Name", True)


async def test_a_change_made_by_another_process_is_built_anew(make_server: MakeServer) -> None:
    here_server, there_server = make_server(), make_server()
    here, there = here_server.accounts, there_server.accounts
    assert here is not None and there is not None and here_server.parts is not None
    # what the cluster does between processes: a change there is forgotten here
    there.projection.cache.on_change = here.projection.cache.forget
    a = await new_user(here, "A")
    b = await new_user(here, "B")
    users_tl = here_server.parts.account.users_tl
    await seen(users_tl, a, b)
    before = await one(users_tl, a, b, NOW)
    assert await one(users_tl, a, b, NOW) is before
    await there.users.update_username(b, "renamed_b")
    after = await one(users_tl, a, b, NOW)
    assert (before.username, after.username) == (None, "renamed_b")


async def test_the_built_users_are_bounded(svc: AccountServices) -> None:
    a = await new_user(svc, "A")
    targets = [await new_user(svc, f"T{i}") for i in range(3)]
    for target in targets:  # the projection keeps their facts from the next sighting
        await svc.projection.view(a, target, NOW)
    users_tl = UsersTl(svc.projection, cache_size=2)
    built = [await one(users_tl, a, t, NOW) for t in targets[:2]]  # at the limit
    again = [await one(users_tl, a, t, NOW) for t in targets[:2]]
    assert all(x is y for x, y in zip(built, again, strict=True))
    await one(users_tl, a, targets[2], NOW)  # past it: the least recently used goes
    assert await one(users_tl, a, targets[1], NOW) is built[1]
    assert await one(users_tl, a, targets[0], NOW) is not built[0]
    nothing_kept = UsersTl(svc.projection, cache_size=0)
    assert await one(nothing_kept, a, targets[0], NOW) is not await one(
        nothing_kept, a, targets[0], NOW
    )


async def test_a_missing_user_is_a_key_error(svc: AccountServices) -> None:
    a = await new_user(svc, "A")
    with pytest.raises(KeyError):
        await one(UsersTl(svc.projection), a, 10**15, NOW)


# -- the moment a status next changes ---------------------------------------------------

_projection = UserProjection(cast(Any, None), AccessHashes(SECRET))
_moments = st.one_of(
    st.none(),
    st.floats(min_value=NOW - 2 * LAST_MONTH, max_value=NOW + 2 * LAST_MONTH).map(
        lambda t: datetime.fromtimestamp(t, UTC)
    ),
)


def _facts(online_until: datetime | None, last_online_at: datetime | None, contact: bool) -> Any:
    return UserFacts(
        user_id=2, phone="1", first_name="x", last_name="", username=None,
        online_until=online_until, last_online_at=last_online_at, saved_first_name=None,
        saved_last_name=None, in_viewer_contacts=False, has_viewer_in_contacts=contact,
        saved_by_phone=False, viewer_blocked=False, blocked_viewer=False,
    )  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    online_until=_moments,
    last_online_at=_moments,
    contact=st.booleans(),
    now=st.floats(min_value=NOW - 3 * LAST_MONTH, max_value=NOW + 3 * LAST_MONTH),
    later=st.floats(min_value=0.0, max_value=1.0),
)
def test_a_status_holds_until_the_moment_it_changes(
    online_until: datetime | None,
    last_online_at: datetime | None,
    contact: bool,
    now: float,
    later: float,
) -> None:
    row = _facts(online_until, last_online_at, contact)
    view, until = _projection.view_until(1, row, now)
    assert until > now
    status = status_to_tl(view.status)

    def at(t: float) -> Any:
        return status_to_tl(_projection.view_until(1, row, t)[0].status)

    if math.isinf(until):
        assert at(now + later * 4 * LAST_MONTH) == status
        return
    inside = now + later * (until - now)
    if inside < until:
        assert at(inside) == status
    assert at(math.nextafter(until, -math.inf)) == status
    assert at(until) != status
