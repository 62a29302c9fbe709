"""Account services on real PostgreSQL: the projection's privacy rules, login, devices,
contacts, and that every change calls the AccountEvents hook inside its transaction."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import os
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest
from conftest import MakeServer

from telesrv import wiring
from telesrv.parts import AccountServices
from telesrv.server import Server
from telesrv.services import errors
from telesrv.services.access_hashes import AccessHashes
from telesrv.services.accounts import AuthorizationNotFound, Origin, SendCodeFlood
from telesrv.services.contacts import PhoneContact, contacts_hash
from telesrv.services.login import LoginPolicy, RandomCodeSender, SignedIn, pending_codes
from telesrv.services.privacy import PrivacyService
from telesrv.services.projection import Presence
from telesrv.services.users import (
    check_username,
    clean_about,
    clean_first_name,
    clean_last_name,
    normalize_phone,
)
from telesrv.store import auth_keys
from telesrv.store.db import Db

from .test_privacy_rules import hide_last_seen

SECRET = b"s" * 32
NOW = 1_800_000_000.0
ORIGIN = Origin(auth_key_id=1, session_id=2)
_phones = itertools.count(15550200000)


def new_phone() -> str:
    return f"+{next(_phones)}"


@dataclass
class RecordedEvents:
    """An AccountEvents that records calls and checks they run inside a transaction."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)
    committed: list[int] = field(default_factory=list)  # blocks_committed, after commit

    def _record(self, conn: asyncpg.Connection, *call: Any) -> None:
        assert conn.is_in_transaction()
        self.calls.append(call)

    async def contacts_changed(self, conn: Any, owner_user_id: int, origin: Any) -> None:
        self._record(conn, "contacts", owner_user_id, origin)

    async def contacts_adding(
        self, conn: Any, owner_user_id: int, user_ids: Any, origin: Any
    ) -> None:
        assert conn.is_in_transaction()

    async def block_changed(
        self, conn: Any, owner_user_id: int, peer_user_id: int, blocked: bool, origin: Any
    ) -> None:
        self._record(conn, "block", owner_user_id, peer_user_id, blocked, origin)

    async def profile_changed(self, conn: Any, user_id: int, origin: Any) -> None:
        self._record(conn, "profile", user_id, origin)

    async def blocks_committed(self, owner_user_id: int) -> None:
        self.committed.append(owner_user_id)


@pytest.fixture
def events() -> RecordedEvents:
    return RecordedEvents()


@pytest.fixture
def server(
    make_server: MakeServer, events: RecordedEvents, monkeypatch: pytest.MonkeyPatch
) -> Server:
    """A server whose account services tell their changes to ``events`` instead of the
    log."""
    monkeypatch.setattr(wiring, "UpdateLogEvents", lambda *args, **kwargs: events)
    return make_server(dev_login_code="24680")


@pytest.fixture
def svc(server: Server) -> AccountServices:
    return accounts_of(server)


@pytest.fixture
def privacy(server: Server) -> PrivacyService:
    assert server.parts is not None
    return server.parts.privacy


def accounts_of(server: Server) -> AccountServices:
    assert server.accounts is not None
    return server.accounts


async def new_user(svc: AccountServices, first_name: str = "User", **kw: Any) -> int:
    return (await svc.users.create(new_phone(), first_name, **kw)).user_id


async def new_key(db: Db) -> int:
    key_id = int.from_bytes(os.urandom(8), "little", signed=True)
    assert await auth_keys.save_auth_key(db.pool, key_id, os.urandom(256))
    return key_id


# -- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("+1 555 000-1234", "15550001234"),
        ("447700900123", "447700900123"),
        (" +49 (30) 1234", "49301234"),
    ],
)
def test_phone_normalization(raw: str, stored: str) -> None:
    assert normalize_phone(raw) == stored


@pytest.mark.parametrize("raw", ["", "+", "1234", "+1234567890123456", "12a45678", "+-1"])
def test_bad_phones(raw: str) -> None:
    with pytest.raises(errors.PhoneNumberInvalid):
        normalize_phone(raw)


@pytest.mark.parametrize("name", ["abcde", "A1234", "a_b_c", "x" * 32, "Zed_9_"])
def test_good_usernames(name: str) -> None:
    assert check_username(name) == name


@pytest.mark.parametrize("name", ["abcd", "x" * 33, "1abcd", "_abcd", "ab-cd", "abc d", "abcdé"])
def test_bad_usernames(name: str) -> None:
    with pytest.raises(errors.UsernameInvalid):
        check_username(name)


def test_name_and_about_limits() -> None:
    assert clean_first_name("  Ann ") == "Ann"
    for bad in ["", "   ", "x" * 65]:
        with pytest.raises(errors.FirstnameInvalid):
            clean_first_name(bad)
    assert clean_last_name("") == ""
    with pytest.raises(errors.LastnameInvalid):
        clean_last_name("x" * 65)
    assert clean_about("x" * 70) == "x" * 70
    with pytest.raises(errors.AboutTooLong):
        clean_about("x" * 71)


# -- access hashes ---------------------------------------------------------------------


def test_access_hash_vector_and_scope() -> None:
    hashes = AccessHashes(SECRET)
    # HMAC-SHA256(b"s"*32, <qq>(1000000, 1000001))[:8] as a little-endian signed int64.
    assert hashes.for_user(1_000_000, 1_000_001) == -2372507175662149881
    h = hashes.for_user(1_000_000, 1_000_001)
    assert hashes.check(1_000_000, 1_000_001, h)
    assert not hashes.check(1_000_002, 1_000_001, h)  # another viewer's hash
    assert not hashes.check(1_000_000, 1_000_001, h ^ 1)
    assert hashes.for_user(1_000_001, 1_000_000) != h
    assert AccessHashes(b"t" * 32).for_user(1_000_000, 1_000_001) != h
    with pytest.raises(ValueError):
        AccessHashes(b"short")


@pytest.mark.parametrize("size", [16, 63, 64, 65, 200])
def test_an_access_hash_is_the_hmac_of_the_pair(size: int) -> None:
    secret = bytes(i * 7 % 256 for i in range(size))  # past 64 bytes HMAC hashes it first
    for viewer, target in [(1, 2), (2, 1), (2**62, 7), (-5, 2**40)]:
        mac = hmac.new(secret, struct.pack("<qq", viewer, target), hashlib.sha256)
        expected = int.from_bytes(mac.digest()[:8], "little", signed=True)
        assert AccessHashes(secret).for_user(viewer, target) == expected


def test_access_hash_memo_stays_bounded_and_exact() -> None:
    fresh = AccessHashes(SECRET, memo_size=0)  # no memo worth the name: computed each time
    hashes = AccessHashes(SECRET, memo_size=2)
    pairs = [(1, 2), (2, 1), (1, 3), (1, 2), (5, 5)]
    for _ in range(2):
        for viewer, target in pairs:
            assert hashes.for_user(viewer, target) == fresh.for_user(viewer, target)
            assert len(hashes._memo) <= 2
    assert hashes.for_user(1_000_000, 1_000_001) == -2372507175662149881


# -- the projection --------------------------------------------------------------------


async def test_projection_privacy_rules(svc: AccountServices) -> None:
    viewer = await new_user(svc, "Viewer")
    saved = await new_user(svc, "Own", last_name="Name")  # in the viewer's contacts
    fan = await new_user(svc, "Fan")  # has the viewer in their contacts
    mutual = await new_user(svc, "Mutual")
    stranger = await new_user(svc, "Stranger", username="strangerx")
    phones = {u: (await svc.users.get(u)).phone for u in (viewer, saved, fan, mutual, stranger)}

    viewer_phone = "+" + phones[viewer]
    await svc.contacts.import_contacts(
        viewer,
        [
            PhoneContact(1, "+" + phones[saved], "Saved", "As"),
            PhoneContact(2, "+" + phones[mutual], "", ""),
        ],
    )
    await svc.contacts.import_contacts(fan, [PhoneContact(1, viewer_phone, "V", "")])
    await svc.contacts.import_contacts(mutual, [PhoneContact(1, viewer_phone, "V", "")])

    views = await svc.projection.views(
        viewer, [stranger, viewer, saved, fan, mutual, 999, saved], NOW
    )
    assert [v.user_id for v in views] == [stranger, viewer, saved, fan, mutual]
    by_id = {v.user_id: v for v in views}

    me = by_id[viewer]
    assert (me.is_self, me.contact, me.mutual_contact, me.phone) == (
        True,
        False,
        False,
        phones[viewer],
    )
    assert (me.first_name, me.last_name) == ("Viewer", "")

    s = by_id[saved]
    assert (s.is_self, s.contact, s.mutual_contact, s.phone) == (False, True, False, phones[saved])
    assert (s.first_name, s.last_name) == ("Saved", "As")  # the viewer's names win

    f = by_id[fan]
    assert (f.contact, f.mutual_contact, f.phone) == (False, False, phones[fan])
    assert f.first_name == "Fan"

    m = by_id[mutual]
    assert (m.contact, m.mutual_contact, m.phone) == (True, True, phones[mutual])
    assert m.first_name == "Mutual"  # saved with empty names: the user's own name stays

    st = by_id[stranger]
    assert (st.contact, st.mutual_contact, st.phone, st.username) == (
        False,
        False,
        None,
        "strangerx",
    )

    for view in views:
        assert svc.access_hashes.check(viewer, view.user_id, view.access_hash)
    # Another viewer is given other hashes for the same users.
    other = await svc.projection.view(fan, saved, NOW)
    assert other is not None and other.access_hash != s.access_hash and other.phone is None


async def test_projection_status_rules(
    svc: AccountServices, db: Db, privacy: PrivacyService
) -> None:
    viewer = await new_user(svc)
    friend = await new_user(svc)
    stranger = await new_user(svc)
    await svc.contacts.add_contact(friend, viewer, "V", "")  # friend knows the viewer

    for user in (friend, stranger):
        await svc.users.set_status(user, offline=False, now=NOW - 10)
    online = await svc.projection.views(viewer, [friend, stranger], NOW)
    assert [v.status.presence for v in online] == [Presence.ONLINE, Presence.ONLINE]
    assert online[0].status.expires == int(NOW - 10 + 300)

    # Last seen for contacts only (the default is everybody).
    for user in (friend, stranger):
        await hide_last_seen(privacy, user)
        await svc.users.set_status(user, offline=True, now=NOW - 3600)
    offline = await svc.projection.views(viewer, [friend, stranger], NOW)
    assert offline[0].status.presence is Presence.OFFLINE
    assert offline[0].status.was_online == int(NOW - 3600)
    assert offline[1].status.presence is Presence.RECENTLY  # no exact time for strangers

    # An online period nobody ended counts as last seen when it expired.
    await svc.users.set_status(friend, offline=False, now=NOW - 1000)
    [expired] = await svc.projection.views(viewer, [friend], NOW)
    assert expired.status == type(expired.status)(Presence.OFFLINE, was_online=int(NOW - 700))

    for ago, presence in [(5 * 86400, Presence.LAST_WEEK), (20 * 86400, Presence.LAST_MONTH)]:
        await svc.users.set_status(stranger, offline=True, now=NOW - ago)
        [view] = await svc.projection.views(viewer, [stranger], NOW)
        assert view.status.presence is presence
    await svc.users.set_status(stranger, offline=True, now=NOW - 90 * 86400)
    assert (await svc.projection.view(viewer, stranger, NOW)).status.presence is Presence.LONG_AGO  # type: ignore[union-attr]
    never = await new_user(svc)
    assert (await svc.projection.view(viewer, never, NOW)).status.presence is Presence.LONG_AGO  # type: ignore[union-attr]


# -- profiles and usernames ------------------------------------------------------------


async def test_profile_and_username_changes(svc: AccountServices, events: RecordedEvents) -> None:
    user = await new_user(svc)
    other = await new_user(svc)
    account = await svc.users.update_profile(
        user, first_name=" New ", last_name="Last", about="hi", origin=ORIGIN
    )
    assert (account.first_name, account.last_name, account.about) == ("New", "Last", "hi")
    assert events.calls[-1] == ("profile", user, ORIGIN)
    calls = len(events.calls)
    await svc.users.update_profile(user, about="only about")
    assert len(events.calls) == calls  # the about text is not part of the user object

    assert (await svc.users.update_username(user, "Profile_1", ORIGIN)).username == "Profile_1"
    with pytest.raises(errors.UsernameNotModified):
        await svc.users.update_username(user, "Profile_1")
    assert (await svc.users.update_username(user, "profile_1")).username == "profile_1"
    with pytest.raises(errors.UsernameOccupied):
        await svc.users.update_username(other, "PROFILE_1")
    with pytest.raises(errors.UsernameOccupied):
        await svc.users.username_available(other, "Profile_1")
    assert await svc.users.username_available(user, "Profile_1")
    assert await svc.users.username_available(other, "FreeName1")
    with pytest.raises(errors.UsernameInvalid):
        await svc.users.update_username(other, "no")
    assert await svc.users.resolve_username("PROFILE_1") == user
    with pytest.raises(errors.UsernameNotOccupied):
        await svc.users.resolve_username("nobody_here")
    assert (await svc.users.update_username(user, "", ORIGIN)).username is None
    with pytest.raises(errors.UsernameNotModified):
        await svc.users.update_username(user, "")


async def test_create_refuses_duplicates(svc: AccountServices) -> None:
    phone = new_phone()
    await svc.users.create(phone, "A", username="DupName1")
    with pytest.raises(errors.PhoneNumberOccupied):
        await svc.users.create(phone, "B")
    with pytest.raises(errors.UsernameOccupied):
        await svc.users.create(new_phone(), "B", username="dupname1")
    assert await svc.users.resolve_phone(phone) > 0
    with pytest.raises(errors.PhoneNotOccupied):
        await svc.users.resolve_phone(new_phone())


# -- login -----------------------------------------------------------------------------


async def test_sign_in_with_code_then_sign_up(svc: AccountServices, db: Db) -> None:
    key = await new_key(db)
    phone = new_phone()
    sent = await svc.login.send_code(phone, NOW)
    assert sent.code_length == 5 and sent.phone_code_hash
    with pytest.raises(errors.PhoneCodeInvalid):
        await svc.login.sign_in(phone, sent.phone_code_hash, "00000", key, NOW)
    # Unknown phone: the code is verified, the client must sign up.
    assert await svc.login.sign_in(phone, sent.phone_code_hash, "24680", key, NOW) is None
    assert await svc.authorizations.user_for_key(key) is None
    with pytest.raises(errors.FirstnameInvalid):
        await svc.login.sign_up(phone, sent.phone_code_hash, "", "", key, NOW)
    user_id = await svc.login.sign_up(phone, sent.phone_code_hash, "Neo", "", key, NOW)
    assert await svc.authorizations.user_for_key(key) == user_id
    assert (await svc.users.get(user_id)).first_name == "Neo"
    with pytest.raises(errors.PhoneCodeExpired):  # the code was used up
        await svc.login.sign_up(phone, sent.phone_code_hash, "Neo", "", key, NOW)


async def test_sign_up_needs_a_verified_code_and_a_free_phone(svc: AccountServices, db: Db) -> None:
    key = await new_key(db)
    phone = new_phone()
    sent = await svc.login.send_code(phone, NOW)
    with pytest.raises(errors.PhoneCodeExpired):
        await svc.login.sign_up(phone, sent.phone_code_hash, "A", "", key, NOW)
    assert await svc.login.sign_in(phone, sent.phone_code_hash, "24680", key, NOW) is None
    await svc.users.create(phone, "Raced")  # someone else took the phone meanwhile
    with pytest.raises(errors.PhoneNumberOccupied):
        await svc.login.sign_up(phone, sent.phone_code_hash, "A", "", key, NOW)


async def test_known_phone_signs_in_and_code_is_single_use(svc: AccountServices, db: Db) -> None:
    key = await new_key(db)
    phone = new_phone()
    user = (await svc.users.create(phone, "Known")).user_id
    sent = await svc.login.send_code(phone, NOW)
    assert await svc.login.sign_in(phone, sent.phone_code_hash, "24680", key, NOW) == SignedIn(
        user, created=False
    )
    assert await svc.authorizations.user_for_key(key) == user
    with pytest.raises(errors.PhoneCodeExpired):
        await svc.login.sign_in(phone, sent.phone_code_hash, "24680", key, NOW)


async def test_code_attempts_and_expiry(svc: AccountServices, db: Db) -> None:
    key = await new_key(db)
    phone = new_phone()
    await svc.users.create(phone, "P")
    sent = await svc.login.send_code(phone, NOW)
    for _ in range(svc.login.policy.max_attempts):
        with pytest.raises(errors.PhoneCodeInvalid):
            await svc.login.sign_in(phone, sent.phone_code_hash, "13579", key, NOW)
    with pytest.raises(errors.PhoneCodeExpired):
        await svc.login.sign_in(phone, sent.phone_code_hash, "24680", key, NOW)

    fresh = await svc.login.send_code(phone, NOW)
    with pytest.raises(errors.PhoneCodeExpired):
        await svc.login.sign_in(
            phone, fresh.phone_code_hash, "24680", key, NOW + svc.login.policy.code_ttl
        )
    with pytest.raises(errors.PhoneCodeEmpty):
        await svc.login.sign_in(phone, fresh.phone_code_hash, "", key, NOW)
    with pytest.raises(errors.PhoneCodeHashEmpty):
        await svc.login.sign_in(phone, "", "24680", key, NOW)
    with pytest.raises(errors.PhoneNumberInvalid):
        await svc.login.send_code("12", NOW)


async def test_send_code_flood(make_server: MakeServer) -> None:
    # The default limit: the dev login code alone turns it off (test_login_code_limits).
    svc = accounts_of(make_server(dev_login_code="24680", login_codes_per_phone=5))
    assert svc.login.policy.max_sends == LoginPolicy.max_sends == 5
    phone = new_phone()
    for _ in range(svc.login.policy.max_sends):
        await svc.login.send_code(phone, NOW)
    with pytest.raises(SendCodeFlood) as flood:
        await svc.login.send_code(phone, NOW + 10)
    assert flood.value.retry_after == int(svc.login.policy.send_window) - 10


async def test_auto_register_and_random_codes(db: Db, make_server: MakeServer) -> None:
    svc = accounts_of(make_server(auto_register=True))
    assert isinstance(svc.login._sender, RandomCodeSender)
    key = await new_key(db)
    phone = new_phone()
    sent = await svc.login.send_code(phone, NOW)
    [pending] = await pending_codes(db, phone, NOW)
    assert pending.phone_code_hash == sent.phone_code_hash
    assert len(pending.code) == 5 and pending.code.isdigit()
    signed = await svc.login.sign_in(phone, sent.phone_code_hash, pending.code, key, NOW)
    assert signed is not None and signed.created  # auto-registered by this sign-in
    account = await svc.users.get(signed.user_id)
    assert account.phone == phone[1:] and account.first_name == phone
    assert await pending_codes(db, phone, NOW) == []
    # A second sign-in finds the account made by the first.
    sent = await svc.login.send_code(phone, NOW)
    [pending] = await pending_codes(db, phone, NOW)
    again = await svc.login.sign_in(phone, sent.phone_code_hash, pending.code, key, NOW)
    assert again == SignedIn(signed.user_id, created=False)


# -- devices ---------------------------------------------------------------------------


async def test_devices_logout_and_resets(svc: AccountServices, db: Db) -> None:
    phone = new_phone()
    user = (await svc.users.create(phone, "Multi")).user_id
    keys = [await new_key(db) for _ in range(3)]
    for key in keys:
        sent = await svc.login.send_code(phone, NOW)
        assert await svc.login.sign_in(phone, sent.phone_code_hash, "24680", key, NOW) == SignedIn(
            user, created=False
        )
    devices = await svc.authorizations.devices(user)
    assert sorted(d.auth_key_id for d in devices) == sorted(keys)
    assert len({d.hash for d in devices}) == 3 and all(d.hash != 0 for d in devices)
    assert all(d.created_at == int(NOW) for d in devices)

    await svc.authorizations.touch(keys[0], NOW + 50)
    assert (await svc.authorizations.devices(user))[0].active_at == int(NOW + 50)

    assert await svc.authorizations.log_out(keys[0]) == user
    assert await svc.authorizations.user_for_key(keys[0]) is None
    target = next(d for d in await svc.authorizations.devices(user) if d.auth_key_id == keys[1])
    with pytest.raises(AuthorizationNotFound):
        await svc.authorizations.reset_by_hash(user, 0)
    with pytest.raises(AuthorizationNotFound):
        await svc.authorizations.reset_by_hash(user + 1, target.hash)
    assert await svc.authorizations.reset_by_hash(user, target.hash) == keys[1]
    assert await svc.authorizations.user_for_key(keys[1]) is None
    assert await svc.authorizations.user_for_key(keys[2]) == user
    assert await svc.authorizations.reset_others(user, keys[2]) == []


async def test_user_for_key_cache_follows_changes_made_elsewhere(
    svc: AccountServices, db: Db, make_server: MakeServer
) -> None:
    key = await new_key(db)
    user = await new_user(svc)
    assert await svc.authorizations.user_for_key(key) is None  # cached as "nobody"
    # Login through the service updates the cache at once.
    phone = (await svc.users.get(user)).phone
    sent = await svc.login.send_code(phone, NOW)
    await svc.login.sign_in(phone, sent.phone_code_hash, "24680", key, NOW)
    assert await svc.authorizations.user_for_key(key) == user
    # A second service (another process) does not see this one's cache.
    other = accounts_of(make_server())
    assert await other.authorizations.user_for_key(key) == user
    await other.authorizations.log_out(key)
    assert await other.authorizations.user_for_key(key) is None


async def test_user_for_key_marks_devices_active(
    svc: AccountServices, db: Db, make_server: MakeServer
) -> None:
    key = await new_key(db)
    user = await new_user(svc)
    long_ago = time.time() - 10_000
    await db.run_txn("t", svc.authorizations.bind_txn, key, user, long_ago)
    fresh = accounts_of(make_server())
    assert await fresh.authorizations.user_for_key(key) == user
    [device] = await fresh.authorizations.devices(user)
    assert device.active_at >= int(time.time()) - 5


class _SlowMonotonic:
    """A monotonic clock as on a machine booted seconds ago: small and rising slowly."""

    def __init__(self) -> None:
        self.value = 3.0

    def monotonic(self) -> float:
        self.value += 0.001
        return self.value

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


async def test_user_for_key_marks_devices_active_on_fresh_machine(
    db: Db, monkeypatch: pytest.MonkeyPatch, make_server: MakeServer
) -> None:
    from telesrv.services import accounts as accounts_module

    # Only the service's view of the clock is patched: asyncio keeps the real one.
    monkeypatch.setattr(accounts_module, "time", _SlowMonotonic())
    svc = accounts_of(make_server())
    key = await new_key(db)
    user = await new_user(svc)
    await db.run_txn("t", svc.authorizations.bind_txn, key, user, time.time() - 10_000)
    fresh = accounts_of(make_server())
    assert await fresh.authorizations.user_for_key(key) == user
    [device] = await fresh.authorizations.devices(user)
    assert device.active_at >= int(time.time()) - 5


class _CountingLookups:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from telesrv.store import authorizations

        self.calls = 0
        real = authorizations.get_user_id

        async def counted(db: Any, auth_key_id: int) -> int | None:
            self.calls += 1
            return await real(db, auth_key_id)

        monkeypatch.setattr(authorizations, "get_user_id", counted)


async def test_concurrent_key_lookups_share_one_query(
    db: Db, monkeypatch: pytest.MonkeyPatch, make_server: MakeServer
) -> None:
    import asyncio

    svc = accounts_of(make_server())
    key, other = await new_key(db), await new_key(db)
    user = await new_user(svc)
    await db.run_txn("t", svc.authorizations.bind_txn, key, user, time.time())
    lookups = _CountingLookups(monkeypatch)
    fresh = accounts_of(make_server()).authorizations
    answers = await asyncio.gather(*(fresh.user_for_key(key) for _ in range(50)))
    assert answers == [user] * 50
    assert lookups.calls == 1
    # Another key is its own flight; a cached key needs no query at all.
    assert list(await asyncio.gather(fresh.user_for_key(other), fresh.user_for_key(key))) == [
        None,
        user,
    ]
    assert lookups.calls == 2


async def test_key_lookup_racing_a_logout_answers_logged_out(
    db: Db, monkeypatch: pytest.MonkeyPatch, make_server: MakeServer
) -> None:
    import asyncio

    svc = accounts_of(make_server())
    key = await new_key(db)
    user = await new_user(svc)
    await db.run_txn("t", svc.authorizations.bind_txn, key, user, time.time())
    lookups = _CountingLookups(monkeypatch)
    fresh = accounts_of(make_server()).authorizations
    first = asyncio.ensure_future(fresh.user_for_key(key))
    await asyncio.sleep(0)  # the first lookup is under way
    assert await fresh.log_out(key) == user
    second = await fresh.user_for_key(key)
    assert second is None
    assert await first in (user, None)
    assert await fresh.user_for_key(key) is None
    assert lookups.calls <= 2


# -- contacts and blocks ---------------------------------------------------------------


async def test_import_get_delete_contacts(svc: AccountServices, events: RecordedEvents) -> None:
    owner_phone = new_phone()
    owner = (await svc.users.create(owner_phone, "Owner")).user_id
    a_phone, b_phone = new_phone(), new_phone()
    a = (await svc.users.create(a_phone, "A")).user_id
    b = (await svc.users.create(b_phone, "B")).user_id
    result = await svc.contacts.import_contacts(
        owner,
        [
            PhoneContact(10, a_phone, "Ay", ""),
            PhoneContact(11, new_phone(), "Nobody", ""),  # no account: not imported
            PhoneContact(12, "not a phone", "X", ""),
            PhoneContact(13, owner_phone, "Me", ""),  # yourself: not a contact
        ],
        ORIGIN,
    )
    assert result.imported == [(a, 10)]
    assert result.retry_client_ids == []
    assert events.calls[-1] == ("contacts", owner, ORIGIN)
    calls = len(events.calls)
    again = await svc.contacts.import_contacts(owner, [PhoneContact(10, a_phone, "Ay", "")])
    assert again.imported == [(a, 10)]
    assert len(events.calls) == calls  # nothing changed: no event

    await svc.contacts.add_contact(owner, b, "Bee", "", ORIGIN)
    await svc.contacts.add_contact(b, owner, "O", "")
    assert await svc.contacts.contacts(owner) == [
        type((await svc.contacts.contacts(owner))[0])(a, False),
        type((await svc.contacts.contacts(owner))[0])(b, True),
    ]
    assert contacts_hash([b, a]) == contacts_hash([a, b]) != contacts_hash([a])
    with pytest.raises(errors.ContactIdInvalid):
        await svc.contacts.add_contact(owner, owner, "Me", "")

    assert await svc.contacts.delete_contacts(owner, [a], ORIGIN) == [a]
    assert events.calls[-1] == ("contacts", owner, ORIGIN)
    assert await svc.contacts.delete_by_phones(owner, [b_phone, "junk"]) == [b]
    assert await svc.contacts.contacts(owner) == []


async def test_import_is_bounded(svc: AccountServices, monkeypatch: pytest.MonkeyPatch) -> None:
    from telesrv.services import contacts as contacts_module

    monkeypatch.setattr(contacts_module, "IMPORT_BATCH_MAX", 2)
    owner = await new_user(svc)
    phone = new_phone()
    target = (await svc.users.create(phone, "T")).user_id
    result = await svc.contacts.import_contacts(
        owner,
        [
            PhoneContact(1, phone, "T", ""),
            PhoneContact(2, new_phone(), "", ""),
            PhoneContact(3, new_phone(), "", ""),
        ],
    )
    assert result.imported == [(target, 1)]
    assert result.retry_client_ids == [3]


def test_contacts_hash_matches_telegrams_algorithm() -> None:
    # By hand for ids 5, 9: acc = 5; acc ^= 5 << 35 -> 171798691845; acc ^= acc >> 4
    # -> 182536110085 (171798691840 ^ 10737418240, low bits 5); + 9.
    assert contacts_hash([9, 5]) == 182536110094
    assert contacts_hash([]) == 0


async def test_blocks(svc: AccountServices, events: RecordedEvents) -> None:
    owner = await new_user(svc)
    targets = [await new_user(svc) for _ in range(3)]
    for i, target in enumerate(targets):
        assert await svc.contacts.block(owner, target, NOW + i, ORIGIN)
    assert events.calls[-1] == ("block", owner, targets[2], True, ORIGIN)
    calls = len(events.calls)
    assert not await svc.contacts.block(owner, targets[0], NOW)
    assert len(events.calls) == calls
    with pytest.raises(errors.ContactIdInvalid):
        await svc.contacts.block(owner, owner, NOW)
    assert await svc.contacts.is_blocked(owner, targets[0])
    total, page = await svc.contacts.blocked(owner, 0, 2)
    assert total == 3 and [(b.user_id, b.date) for b in page] == [
        (targets[2], int(NOW + 2)),
        (targets[1], int(NOW + 1)),
    ]
    total, page = await svc.contacts.blocked(owner, -5, 10_000)
    assert len(page) == 3
    assert await svc.contacts.unblock(owner, targets[0], ORIGIN)
    assert events.calls[-1] == ("block", owner, targets[0], False, ORIGIN)
    assert not await svc.contacts.unblock(owner, targets[0])
