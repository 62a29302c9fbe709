"""Account handlers through the real dispatcher on real PostgreSQL: TL in, TL out.

Every RPC error the accounts issue names is triggered here at least once.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import MakeServer

from telesrv.parts import AccountServices
from telesrv.rpc.context import RequestContext
from telesrv.rpc.dispatcher import Dispatcher
from telesrv.rpc.users_tl import status_to_tl, user_to_tl
from telesrv.server import Server
from telesrv.services.projection import Presence, StatusView, UserView
from telesrv.store import auth_keys
from telesrv.store.db import Db
from telesrv.tl import TLObject, functions, types
from telesrv.tl.service import decode_result

CODE = "13579"
NOW = 1_800_000_000.0
_phones = itertools.count(15550300000)


def send_code(phone: str) -> TLObject:
    return functions.auth.SendCode(
        phone_number=phone, api_id=1, api_hash="h", settings=types.CodeSettings()
    )


def sign_in(phone: str, phone_code_hash: str, code: str | None) -> TLObject:
    return functions.auth.SignIn(
        phone_number=phone, phone_code_hash=phone_code_hash, phone_code=code
    )


@dataclass
class FakeSessions:
    changes: list[tuple[int, int | None]] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)

    def authorization_changed(self, perm_auth_key_id: int, user_id: int | None) -> None:
        self.changes.append((perm_auth_key_id, user_id))

    def close_key(self, perm_auth_key_id: int) -> None:
        self.closed.append(perm_auth_key_id)

    def key_bound(self, temp_auth_key_id: int, perm_auth_key_id: int) -> None:
        raise AssertionError("no key is bound in these tests")


@dataclass
class Device:
    """One client: its key, its current user, and a way to call methods."""

    api: Api
    key: int
    user_id: int | None = None
    session_id: int = 1

    def ctx(self) -> RequestContext:
        return RequestContext(
            auth_key_id=self.key,
            perm_auth_key_id=self.key,
            session_id=self.session_id,
            msg_id=1,
            now=NOW,
            user_id=self.user_id,
            sessions=self.api.sessions,
        )

    async def __call__(self, request: TLObject) -> Any:
        outcome = await self.api.dispatcher.call(self.ctx(), request)
        if outcome.error is not None:
            raise outcome.error
        assert outcome.result is not None
        result = decode_result(request, outcome.result)
        # What the gateway does on authorization_changed: follow the key's login.
        for key, user_id in self.api.sessions.changes:
            if key == self.key:
                self.user_id = user_id
        self.api.sessions.changes.clear()
        return result

    async def expect_error(self, request: TLObject, message: str) -> None:
        outcome = await self.api.dispatcher.call(self.ctx(), request)
        assert outcome.error is not None, f"expected {message}, got a result"
        assert outcome.error.message == message


@dataclass
class Api:
    db: Db
    services: AccountServices
    dispatcher: Dispatcher
    sessions: FakeSessions

    async def device(self) -> Device:
        key = int.from_bytes(os.urandom(8), "little", signed=True)
        assert await auth_keys.save_auth_key(self.db.pool, key, os.urandom(256))
        return Device(self, key)

    async def signed_in(self, phone: str | None = None) -> tuple[Device, Any]:
        device = await self.device()
        phone = phone or str(next(_phones))
        sent = await device(send_code(phone))
        auth = await device(sign_in(phone, sent.phone_code_hash, CODE))
        return device, auth.user


def api_of(db: Db, server: Server) -> Api:
    """Calls through the server's own dispatcher, every handler registered."""
    assert server.accounts is not None
    return Api(db, server.accounts, server.gateway.dispatcher, FakeSessions())


@pytest.fixture
def api(db: Db, make_server: MakeServer, monkeypatch: pytest.MonkeyPatch) -> Api:
    api = api_of(db, make_server(dev_login_code=CODE, auto_register=True))
    # Fewer codes per phone than the default, for the flood test.
    login = api.services.login
    monkeypatch.setattr(login, "policy", dataclasses.replace(login.policy, max_sends=3))
    return api


def input_user(user: Any) -> types.InputUser:
    return types.InputUser(user_id=user.id, access_hash=user.access_hash)


def input_peer(user: Any) -> types.InputPeerUser:
    return types.InputPeerUser(user_id=user.id, access_hash=user.access_hash)


# -- the one User builder ----------------------------------------------------------------


def test_user_to_tl() -> None:
    view = UserView(
        user_id=7,
        access_hash=-5,
        first_name="A",
        last_name="",
        username=None,
        phone=None,
        is_self=False,
        contact=True,
        mutual_contact=False,
        status=StatusView(Presence.OFFLINE, was_online=99),
    )
    user = user_to_tl(view)
    assert isinstance(user, types.User)
    assert (user.id, user.access_hash, user.first_name, user.last_name) == (7, -5, "A", None)
    assert (user.self_, user.contact, user.mutual_contact, user.phone) == (False, True, False, None)
    assert isinstance(user.photo, types.UserProfilePhotoEmpty)
    assert user.status == types.UserStatusOffline(was_online=99)
    assert status_to_tl(StatusView(Presence.ONLINE, expires=5)) == types.UserStatusOnline(expires=5)
    assert isinstance(status_to_tl(StatusView(Presence.RECENTLY)), types.UserStatusRecently)
    assert isinstance(status_to_tl(StatusView(Presence.LAST_WEEK)), types.UserStatusLastWeek)
    assert isinstance(status_to_tl(StatusView(Presence.LAST_MONTH)), types.UserStatusLastMonth)
    assert isinstance(status_to_tl(StatusView(Presence.LONG_AGO)), types.UserStatusEmpty)


# -- login -------------------------------------------------------------------------------


async def test_login_flow_and_errors(api: Api) -> None:
    device = await api.device()
    phone = str(next(_phones))
    await device.expect_error(functions.account.GetAuthorizations(), "AUTH_KEY_UNREGISTERED")
    sent = await device(send_code("+" + phone))
    assert isinstance(sent.type, types.auth.SentCodeTypeApp) and sent.type.length == len(CODE)
    assert sent.timeout == 60
    await device.expect_error(
        sign_in(phone, sent.phone_code_hash, "00000"),
        "PHONE_CODE_INVALID",
    )
    await device.expect_error(sign_in(phone, "nonsense", CODE), "PHONE_CODE_EXPIRED")
    await device.expect_error(sign_in(phone, sent.phone_code_hash, None), "PHONE_CODE_EMPTY")
    await device.expect_error(sign_in(phone, "", CODE), "PHONE_CODE_HASH_EMPTY")
    await device.expect_error(send_code("12"), "PHONE_NUMBER_INVALID")
    auth = await device(sign_in(phone, sent.phone_code_hash, CODE))
    assert isinstance(auth, types.auth.Authorization)
    user = auth.user
    assert isinstance(user, types.User)
    assert user.self_ and user.phone == phone and user.first_name == "+" + phone
    assert device.user_id == user.id  # sessions were told
    await device.expect_error(sign_in(phone, sent.phone_code_hash, CODE), "PHONE_CODE_EXPIRED")
    [me] = await device(functions.users.GetUsers(id=[types.InputUserSelf()]))
    assert me.id == user.id and me.self_


async def test_send_code_flood_wait(api: Api) -> None:
    device = await api.device()
    phone = str(next(_phones))
    for _ in range(3):
        await device(send_code(phone))
    await device.expect_error(send_code(phone), "FLOOD_WAIT_600")


async def test_sign_up_when_not_auto_registering(db: Db, make_server: MakeServer) -> None:
    api = api_of(db, make_server(dev_login_code=CODE))
    device = await api.device()
    phone = str(next(_phones))
    sent = await device(send_code(phone))
    result = await device(sign_in(phone, sent.phone_code_hash, CODE))
    assert isinstance(result, types.auth.AuthorizationSignUpRequired)
    assert device.user_id is None
    await device.expect_error(
        functions.auth.SignUp(
            phone_number=phone, phone_code_hash=sent.phone_code_hash, first_name="", last_name=""
        ),
        "FIRSTNAME_INVALID",
    )
    await device.expect_error(
        functions.auth.SignUp(
            phone_number=phone,
            phone_code_hash=sent.phone_code_hash,
            first_name="A",
            last_name="x" * 65,
        ),
        "LASTNAME_INVALID",
    )
    auth = await device(
        functions.auth.SignUp(
            phone_number=phone,
            phone_code_hash=sent.phone_code_hash,
            first_name="Trin",
            last_name="Ity",
        )
    )
    assert (auth.user.first_name, auth.user.last_name, auth.user.self_) == ("Trin", "Ity", True)
    assert device.user_id == auth.user.id
    other = await api.device()
    sent = await other(send_code(phone))
    await other(sign_in(phone, sent.phone_code_hash, CODE))
    await other.expect_error(
        functions.auth.SignUp(
            phone_number=phone,
            phone_code_hash=sent.phone_code_hash,
            first_name="Again",
            last_name="",
        ),
        "PHONE_CODE_EXPIRED",
    )


async def test_devices_log_out_and_resets(api: Api) -> None:
    phone = str(next(_phones))
    first, user = await api.signed_in(phone)
    second, _ = await api.signed_in(phone)
    third, _ = await api.signed_in(phone)
    listing = await first(functions.account.GetAuthorizations())
    assert len(listing.authorizations) == 3
    current = [a for a in listing.authorizations if a.current]
    assert len(current) == 1 and current[0].hash == 0
    others = [a for a in listing.authorizations if not a.current]
    assert all(a.hash != 0 for a in others)

    await first.expect_error(functions.account.ResetAuthorization(hash=0), "HASH_INVALID")
    await first.expect_error(functions.account.ResetAuthorization(hash=12345), "HASH_INVALID")
    # Which listed device is `second`? The one whose hash second cannot see (its own is 0).
    seen_by_second = await second(functions.account.GetAuthorizations())
    second_hash = next(
        a.hash
        for a in listing.authorizations
        if not a.current and a.hash not in {b.hash for b in seen_by_second.authorizations}
    )
    assert await first(functions.account.ResetAuthorization(hash=second_hash)) is True
    assert api.sessions.closed == [second.key]
    assert await api.services.authorizations.user_for_key(second.key) is None

    assert await first(functions.auth.ResetAuthorizations()) is True
    assert api.sessions.closed == [second.key, third.key]
    assert await api.services.authorizations.user_for_key(third.key) is None

    logged_out = await first(functions.auth.LogOut())
    assert isinstance(logged_out, types.auth.LoggedOut)
    assert first.user_id is None
    await first.expect_error(functions.account.GetAuthorizations(), "AUTH_KEY_UNREGISTERED")
    assert await api.services.authorizations.user_for_key(first.key) is None
    assert user.id > 0


async def test_same_device_switches_account(api: Api) -> None:
    device, alice = await api.signed_in()
    await api.db.pool.execute(
        "INSERT INTO update_states (auth_key_id, user_id, pts) VALUES ($1, $2, 9)",
        device.key,
        alice.id,
    )
    await device(functions.auth.LogOut())
    assert (
        await api.db.pool.fetchval(
            "SELECT count(*) FROM update_states WHERE auth_key_id = $1", device.key
        )
        == 0
    )
    bob_phone = str(next(_phones))
    sent = await device(send_code(bob_phone))
    auth = await device(sign_in(bob_phone, sent.phone_code_hash, CODE))
    assert auth.user.id != alice.id and device.user_id == auth.user.id
    [me] = await device(functions.users.GetUsers(id=[types.InputUserSelf()]))
    assert me.id == auth.user.id
    alice_devices = await api.services.authorizations.devices(alice.id)
    assert alice_devices == []


# -- profile -----------------------------------------------------------------------------


async def test_profile_username_status(api: Api) -> None:
    device, me = await api.signed_in()
    rival, _ = await api.signed_in()
    user = await device(functions.account.UpdateProfile(first_name="Ada", last_name="L", about="x"))
    assert (user.first_name, user.last_name, user.self_) == ("Ada", "L", True)
    await device.expect_error(functions.account.UpdateProfile(first_name=" "), "FIRSTNAME_INVALID")
    await device.expect_error(functions.account.UpdateProfile(about="a" * 71), "ABOUT_TOO_LONG")

    assert await device(functions.account.CheckUsername(username="Ada_Lovelace")) is True
    await device.expect_error(functions.account.CheckUsername(username="1ada"), "USERNAME_INVALID")
    user = await device(functions.account.UpdateUsername(username="Ada_Lovelace"))
    assert user.username == "Ada_Lovelace"
    await device.expect_error(
        functions.account.UpdateUsername(username="Ada_Lovelace"), "USERNAME_NOT_MODIFIED"
    )
    await device.expect_error(functions.account.UpdateUsername(username="ab"), "USERNAME_INVALID")
    await rival.expect_error(
        functions.account.UpdateUsername(username="ada_lovelace"), "USERNAME_OCCUPIED"
    )
    await rival.expect_error(
        functions.account.CheckUsername(username="ADA_LOVELACE"), "USERNAME_OCCUPIED"
    )

    resolved = await rival(functions.contacts.ResolveUsername(username="ada_LOVELACE"))
    assert resolved.peer == types.PeerUser(user_id=me.id)
    [shown] = resolved.users
    assert (shown.id, shown.first_name, shown.phone, shown.self_) == (me.id, "Ada", None, False)
    await rival.expect_error(
        functions.contacts.ResolveUsername(username="nobody_at_all"), "USERNAME_NOT_OCCUPIED"
    )
    await rival.expect_error(
        functions.contacts.ResolveUsername(username="bad name"), "USERNAME_INVALID"
    )

    assert await device(functions.account.UpdateStatus(offline=False)) is True
    [seen] = await rival(functions.users.GetUsers(id=[input_user(shown)]))
    assert seen.status == types.UserStatusOnline(expires=int(NOW) + 300)
    # Last seen for contacts only (the default is everybody): Ada has no contacts.
    await device(
        functions.account.SetPrivacy(
            key=types.InputPrivacyKeyStatusTimestamp(),
            rules=[types.InputPrivacyValueAllowContacts()],
        )
    )
    await device(functions.account.UpdateStatus(offline=True))
    [seen] = await rival(functions.users.GetUsers(id=[input_user(shown)]))
    assert isinstance(seen.status, types.UserStatusRecently)  # rival does not know Ada

    full = await rival(functions.users.GetFullUser(id=input_user(shown)))
    assert full.full_user.id == me.id and full.full_user.about == "x"
    assert not full.full_user.blocked
    assert [u.id for u in full.users] == [me.id]


# -- access hashes ---------------------------------------------------------------------


async def test_forged_or_foreign_access_hashes_are_refused(api: Api) -> None:
    alice, alice_user = await api.signed_in()
    bob, bob_user = await api.signed_in()
    carol, _ = await api.signed_in()
    resolved = await bob(functions.contacts.ResolvePhone(phone=alice_user.phone))
    alice_for_bob = resolved.users[0]
    assert alice_for_bob.phone is None  # bob does not know alice

    forged = types.InputUser(user_id=alice_for_bob.id, access_hash=alice_for_bob.access_hash ^ 1)
    await bob.expect_error(functions.users.GetUsers(id=[forged]), "USER_ID_INVALID")
    await bob.expect_error(functions.users.GetFullUser(id=forged), "USER_ID_INVALID")
    await bob.expect_error(functions.users.GetUsers(id=[types.InputUserEmpty()]), "USER_ID_INVALID")
    # A hash handed to bob means nothing when carol presents it.
    await carol.expect_error(
        functions.users.GetUsers(id=[input_user(alice_for_bob)]), "USER_ID_INVALID"
    )
    await carol.expect_error(
        functions.contacts.Block(id=input_peer(alice_for_bob)), "PEER_ID_INVALID"
    )
    await bob.expect_error(
        functions.contacts.Block(id=types.InputPeerChat(chat_id=1)), "PEER_ID_INVALID"
    )
    [ok] = await bob(functions.users.GetUsers(id=[input_user(alice_for_bob)]))
    assert ok.id == alice_user.id
    await bob.expect_error(
        functions.contacts.ResolvePhone(phone=str(next(_phones))), "PHONE_NOT_OCCUPIED"
    )
    assert alice is not None and bob_user.id != alice_user.id


# -- contacts and blocks ---------------------------------------------------------------


async def test_contacts_and_blocks(api: Api) -> None:
    owner, owner_user = await api.signed_in()
    friend, friend_user = await api.signed_in()
    imported = await owner(
        functions.contacts.ImportContacts(
            contacts=[
                types.InputPhoneContact(
                    client_id=7, phone="+" + friend_user.phone, first_name="Pal", last_name=""
                ),
                types.InputPhoneContact(
                    client_id=8, phone=str(next(_phones)), first_name="No", last_name=""
                ),
            ]
        )
    )
    assert [(i.user_id, i.client_id) for i in imported.imported] == [(friend_user.id, 7)]
    [pal] = imported.users
    assert (pal.first_name, pal.contact, pal.mutual_contact, pal.phone) == (
        "Pal",
        True,
        False,
        friend_user.phone,
    )

    contacts = await owner(functions.contacts.GetContacts(hash=0))
    assert [(c.user_id, c.mutual) for c in contacts.contacts] == [(friend_user.id, False)]
    # The hash a client computes over the ids it got means "nothing changed".
    acc = 0
    for uid in sorted(c.user_id for c in contacts.contacts):
        acc ^= acc >> 21
        acc ^= (acc << 35) & (2**64 - 1)
        acc ^= acc >> 4
        acc = (acc + uid) & (2**64 - 1)
    same = await owner(functions.contacts.GetContacts(hash=acc - (1 << 64) if acc >> 63 else acc))
    assert isinstance(same, types.contacts.ContactsNotModified)

    statuses = await owner(functions.contacts.GetStatuses())
    assert [s.user_id for s in statuses] == [friend_user.id]

    # The friend now sees the owner's phone: the owner has them as a contact.
    resolved = await friend(functions.contacts.ResolvePhone(phone=owner_user.phone))
    assert resolved.users[0].phone == owner_user.phone

    owner_for_friend = resolved.users[0]
    added = await friend(
        functions.contacts.AddContact(
            id=input_user(owner_for_friend), first_name="Boss", last_name="", phone=""
        )
    )
    assert isinstance(added, types.Updates) and isinstance(added.users[0], types.User)
    assert added.users[0].mutual_contact and added.users[0].first_name == "Boss"
    await friend.expect_error(
        functions.contacts.AddContact(
            id=types.InputUserSelf(), first_name="Me", last_name="", phone=""
        ),
        "CONTACT_ID_INVALID",
    )

    deleted = await owner(functions.contacts.DeleteContacts(id=[input_user(pal)]))
    assert isinstance(deleted, types.Updates) and [u.id for u in deleted.users] == [pal.id]
    assert isinstance(deleted.users[0], types.User) and not deleted.users[0].contact
    assert (await owner(functions.contacts.GetContacts(hash=0))).contacts == []
    assert await friend(functions.contacts.DeleteByPhones(phones=[owner_user.phone])) is True
    assert (await friend(functions.contacts.GetContacts(hash=0))).contacts == []

    assert await owner(functions.contacts.Block(id=input_peer(pal))) is True
    await owner.expect_error(
        functions.contacts.Block(id=types.InputPeerSelf()), "CONTACT_ID_INVALID"
    )
    full = await owner(functions.users.GetFullUser(id=input_user(pal)))
    assert full.full_user.blocked
    blocked = await owner(functions.contacts.GetBlocked(offset=0, limit=10))
    assert isinstance(blocked, types.contacts.Blocked)
    assert [b.peer_id for b in blocked.blocked] == [types.PeerUser(user_id=pal.id)]
    assert [u.id for u in blocked.users] == [pal.id]
    third, third_user = await api.signed_in()
    third_for_owner = (await owner(functions.contacts.ResolvePhone(phone=third_user.phone))).users[
        0
    ]
    await owner(functions.contacts.Block(id=input_peer(third_for_owner)))
    page = await owner(functions.contacts.GetBlocked(offset=0, limit=1))
    assert isinstance(page, types.contacts.BlockedSlice) and page.count == 2
    assert await owner(functions.contacts.Unblock(id=input_peer(pal))) is True
    assert not (await owner(functions.users.GetFullUser(id=input_user(pal)))).full_user.blocked
    assert third is not None
