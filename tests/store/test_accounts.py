"""Account SQL against real PostgreSQL: users, usernames, codes, authorizations, contacts."""

from __future__ import annotations

import asyncio
import itertools
import os
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from telesrv.store import auth_keys, authorizations, contacts, login_codes, refusals, users
from telesrv.store.db import Db

_phones = itertools.count(15550100000)


def new_phone() -> str:
    return str(next(_phones))


async def new_user(db: Db, first_name: str = "U") -> int:
    return (await users.create_user(db.pool, new_phone(), first_name)).user_id


async def new_key(db: Db) -> int:
    key_id = int.from_bytes(os.urandom(8), "little", signed=True)
    assert await auth_keys.save_auth_key(db.pool, key_id, os.urandom(256))
    return key_id


NOW = datetime(2026, 1, 1, tzinfo=UTC)


# -- users and usernames ---------------------------------------------------------------


async def test_user_ids_start_high_and_phone_is_unique(db: Db) -> None:
    phone = new_phone()
    user = await users.create_user(db.pool, phone, "Ann", "Lee")
    assert user.user_id >= 1_000_000
    assert (user.phone, user.first_name, user.last_name, user.username) == (
        phone,
        "Ann",
        "Lee",
        None,
    )
    with pytest.raises(refusals.PhoneNumberOccupied):
        await users.create_user(db.pool, phone, "Other")


async def test_username_is_unique_case_insensitively(db: Db) -> None:
    a = await new_user(db)
    b = await new_user(db)
    await users.set_username(db.pool, a, "CaseName1")
    with pytest.raises(refusals.UsernameOccupied):
        await users.set_username(db.pool, b, "casename1")
    with pytest.raises(refusals.UsernameOccupied):
        await users.create_user(db.pool, new_phone(), "C", username="CASENAME1")
    assert await users.get_user_id_by_username(db.pool, "cAsEnAmE1") == a
    # The owner may change the case of their own name; clearing frees it.
    assert (await users.set_username(db.pool, a, "casename1")).username == "casename1"  # type: ignore[union-attr]
    await users.set_username(db.pool, a, None)
    assert (await users.set_username(db.pool, b, "CaseName1")).username == "CaseName1"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("constraint", "username"),
    [
        ("users_username_lower", True),
        ("users_username_lower_102008", True),  # a Citus shard's
        ("users_username_lower_x", False),
        ("users_username_lower_12x", False),
        ("my_users_username_lower", False),
        ("users_phone_key_102008", False),
    ],
)
def test_a_username_conflict_is_known_by_its_constraint_field_or_message(
    constraint: str, username: bool
) -> None:
    """Citus relays a worker's unique violation without its constraint field: the
    message, which names the shard's constraint, tells then."""
    message = f'duplicate key value violates unique constraint "{constraint}"'
    relayed = asyncpg.UniqueViolationError(message)
    assert relayed.constraint_name is None
    assert users._is_username_conflict(relayed) is username
    # A worker that speaks German: the name is never translated.
    german = f"doppelter Schlüsselwert verletzt Unique-Constraint »{constraint}«"
    assert users._is_username_conflict(asyncpg.UniqueViolationError(german)) is username
    local = asyncpg.UniqueViolationError(message)
    local.constraint_name = constraint
    assert users._is_username_conflict(local) is username


async def test_concurrent_claims_of_one_username_have_one_winner(db: Db) -> None:
    claimants = [await new_user(db) for _ in range(8)]
    spellings = ["RaceName", "racename", "RACENAME", "raceName"] * 2

    async def claim(user_id: int, name: str) -> bool:
        try:
            await users.set_username(db.pool, user_id, name)
        except refusals.UsernameOccupied:
            return False
        return True

    results = await asyncio.gather(
        *(claim(u, n) for u, n in zip(claimants, spellings, strict=True))
    )
    assert sum(results) == 1
    winner = claimants[results.index(True)]
    assert await users.get_user_id_by_username(db.pool, "racename") == winner
    count = await db.pool.fetchval("SELECT count(*) FROM users WHERE lower(username) = 'racename'")
    assert count == 1


async def test_create_user_if_absent_is_safe_under_concurrency(db: Db) -> None:
    phone = new_phone()
    rows = await asyncio.gather(
        *(users.create_user_if_absent(db.pool, phone, f"N{i}") for i in range(6))
    )
    assert len({r.user_id for r in rows}) == 1


async def _update_log(db: Db, user_id: int) -> list[tuple[int, int, str]]:
    rows = await db.pool.fetch(
        "SELECT pts, pts_count, event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts",
        user_id,
    )
    return [(r["pts"], r["pts_count"], r["event_type"]) for r in rows]


async def test_a_new_account_has_pts_1_taken_with_it(db: Db) -> None:
    made = await new_user(db)
    assert await _update_log(db, made) == [(1, 1, "noop")]
    signed_in = await users.create_user_if_absent(db.pool, new_phone(), "S")
    assert await _update_log(db, signed_in.user_id) == [(1, 1, "noop")]
    # The account that was there already gains nothing, and a refused insert writes none.
    again = await users.create_user_if_absent(db.pool, signed_in.phone, "T")
    assert again.user_id == signed_in.user_id
    assert await _update_log(db, signed_in.user_id) == [(1, 1, "noop")]
    with pytest.raises(refusals.PhoneNumberOccupied):
        await users.create_user(db.pool, signed_in.phone, "U")
    count = await db.pool.fetchval("SELECT count(*) FROM users WHERE phone = $1", signed_in.phone)
    assert count == 1


async def test_username_format_is_enforced_by_the_schema_too(db: Db) -> None:
    user = await new_user(db)
    import asyncpg

    with pytest.raises(asyncpg.CheckViolationError):
        await users.set_username(db.pool, user, "1abcde")


# -- the projection query --------------------------------------------------------------


async def test_project_users_joins_both_directions_of_contacts(db: Db) -> None:
    viewer = await new_user(db, "Viewer")
    saved_by_viewer = await new_user(db, "Saved")
    has_viewer = await new_user(db, "HasViewer")
    mutual = await new_user(db, "Mutual")
    stranger = await new_user(db, "Stranger")
    await contacts.save_contacts(
        db.pool,
        viewer,
        [
            contacts.NewContact(saved_by_viewer, "My", "Friend"),
            contacts.NewContact(mutual, "M", ""),
        ],
    )
    await contacts.save_contacts(db.pool, has_viewer, [contacts.NewContact(viewer, "V", "")])
    await contacts.save_contacts(db.pool, mutual, [contacts.NewContact(viewer, "V", "")])

    rows = await users.project_users(
        db.pool, viewer, [saved_by_viewer, has_viewer, mutual, stranger, 42]
    )
    by_id = {r.user_id: r for r in rows}
    assert set(by_id) == {saved_by_viewer, has_viewer, mutual, stranger}
    assert (
        by_id[saved_by_viewer].in_viewer_contacts,
        by_id[saved_by_viewer].has_viewer_in_contacts,
    ) == (True, False)
    assert (by_id[saved_by_viewer].saved_first_name, by_id[saved_by_viewer].saved_last_name) == (
        "My",
        "Friend",
    )
    assert (by_id[has_viewer].in_viewer_contacts, by_id[has_viewer].has_viewer_in_contacts) == (
        False,
        True,
    )
    assert by_id[has_viewer].saved_first_name is None
    assert (by_id[mutual].in_viewer_contacts, by_id[mutual].has_viewer_in_contacts) == (True, True)
    assert (by_id[stranger].in_viewer_contacts, by_id[stranger].has_viewer_in_contacts) == (
        False,
        False,
    )


# -- login codes -----------------------------------------------------------------------


async def issue(
    db: Db, phone: str, hash: str, *, now: datetime = NOW, limit: int = 3
) -> login_codes.IssueResult:
    return await db.run_txn(
        "t",
        lambda conn: login_codes.issue_code_txn(
            conn,
            phone=phone,
            phone_code_hash=hash,
            code="11111",
            now=now,
            ttl=timedelta(minutes=5),
            window=timedelta(minutes=10),
            max_per_window=limit,
        ),
    )


async def check(
    db: Db, phone: str, hash: str, code: str, *, now: datetime = NOW
) -> login_codes.CodeCheck:
    return await db.run_txn(
        "t",
        lambda conn: login_codes.check_code_txn(
            conn, phone=phone, phone_code_hash=hash, code=code, now=now, max_attempts=3
        ),
    )


async def test_sending_is_limited_per_phone_and_window(db: Db) -> None:
    phone, other = new_phone(), new_phone()
    for i in range(3):
        assert (await issue(db, phone, f"w{phone}{i}", now=NOW + timedelta(seconds=i))).issued
    refused = await issue(db, phone, f"w{phone}x", now=NOW + timedelta(seconds=100))
    assert not refused.issued
    assert refused.retry_after == pytest.approx(500)  # until the first send leaves the window
    assert (await issue(db, other, f"w{other}0", now=NOW)).issued
    later = await issue(db, phone, f"w{phone}y", now=NOW + timedelta(minutes=11))
    assert later.issued
    # Rows that left the window and expired are gone.
    assert await db.pool.fetchval("SELECT count(*) FROM login_codes WHERE phone = $1", phone) == 1


async def test_concurrent_sends_cannot_exceed_the_limit(db: Db) -> None:
    phone = new_phone()
    results = await asyncio.gather(*(issue(db, phone, f"c{phone}{i}") for i in range(8)))
    assert sum(r.issued for r in results) == 3


async def test_wrong_codes_are_counted_and_then_the_code_is_dead(db: Db) -> None:
    phone = new_phone()
    await issue(db, phone, "h-attempts")
    for _ in range(3):
        assert await check(db, phone, "h-attempts", "99999") is login_codes.CodeCheck.WRONG
    # Even the right code no longer works.
    assert await check(db, phone, "h-attempts", "11111") is login_codes.CodeCheck.EXPIRED


async def test_codes_expire_and_belong_to_their_phone(db: Db) -> None:
    phone = new_phone()
    await issue(db, phone, "h-expire")
    assert await check(db, new_phone(), "h-expire", "11111") is login_codes.CodeCheck.EXPIRED
    assert await check(db, phone, "h-unknown", "11111") is login_codes.CodeCheck.EXPIRED
    late = NOW + timedelta(minutes=5)
    assert await check(db, phone, "h-expire", "11111", now=late) is login_codes.CodeCheck.EXPIRED
    assert await check(db, phone, "h-expire", "11111") is login_codes.CodeCheck.OK


async def test_verified_code_is_used_once_by_sign_up(db: Db) -> None:
    phone = new_phone()
    await issue(db, phone, "h-signup")
    assert not await login_codes.consume_verified_code(
        db.pool, phone=phone, phone_code_hash="h-signup", now=NOW
    )  # not verified yet
    assert await check(db, phone, "h-signup", "11111") is login_codes.CodeCheck.OK
    assert await login_codes.consume_verified_code(
        db.pool, phone=phone, phone_code_hash="h-signup", now=NOW
    )
    assert not await login_codes.consume_verified_code(
        db.pool, phone=phone, phone_code_hash="h-signup", now=NOW
    )
    assert await check(db, phone, "h-signup", "11111") is login_codes.CodeCheck.EXPIRED


async def test_pending_codes_lists_usable_codes_only(db: Db) -> None:
    phone = new_phone()
    await issue(db, phone, "h-p1")
    await issue(db, phone, "h-p2", now=NOW + timedelta(seconds=1))
    await login_codes.cancel_code(db.pool, phone=phone, phone_code_hash="h-p1")
    pending = await login_codes.pending_codes(db.pool, phone, NOW, max_attempts=3)
    assert [p.phone_code_hash for p in pending] == ["h-p2"]
    assert pending[0].code == "11111"


# -- authorizations --------------------------------------------------------------------


async def bind(db: Db, key: int, user: int, hash: int = 7) -> int | None:
    return await db.run_txn("t", authorizations.bind_txn, key, user, hash, NOW)


async def add_state(db: Db, key: int, user: int) -> None:
    await db.pool.execute(
        "INSERT INTO update_states (auth_key_id, user_id, pts) VALUES ($1, $2, 5)", key, user
    )


async def states(db: Db, key: int) -> list[int]:
    rows = await db.pool.fetch(
        "SELECT user_id FROM update_states WHERE auth_key_id = $1 ORDER BY user_id", key
    )
    return [r["user_id"] for r in rows]


async def test_bind_replaces_the_previous_account_and_its_device_state(db: Db) -> None:
    key = await new_key(db)
    alice, bob = await new_user(db), await new_user(db)
    assert await bind(db, key, alice) is None
    await add_state(db, key, alice)
    assert await authorizations.get_user_id(db.pool, key) == alice
    assert await bind(db, key, bob) == alice
    assert await authorizations.get_user_id(db.pool, key) == bob
    assert await states(db, key) == []  # nothing of alice's is left on this device


async def test_unbind_removes_only_this_devices_state(db: Db) -> None:
    key, other_key = await new_key(db), await new_key(db)
    user = await new_user(db)
    await bind(db, key, user, 1)
    await bind(db, other_key, user, 2)
    await add_state(db, key, user)
    await add_state(db, other_key, user)
    assert await db.run_txn("t", authorizations.unbind_txn, key) == user
    assert await authorizations.get_user_id(db.pool, key) is None
    assert await states(db, key) == []
    assert await states(db, other_key) == [user]
    assert await db.run_txn("t", authorizations.unbind_txn, key) is None


async def test_unbind_others_and_by_hash(db: Db) -> None:
    keys = [await new_key(db) for _ in range(3)]
    user, stranger = await new_user(db), await new_user(db)
    for i, key in enumerate(keys):
        await bind(db, key, user, 100 + i)
    assert await db.run_txn("t", authorizations.unbind_by_hash_txn, stranger, 101) is None
    assert await db.run_txn("t", authorizations.unbind_by_hash_txn, user, 101) == keys[1]
    ended = await db.run_txn("t", authorizations.unbind_others_txn, user, keys[0])
    assert ended == [keys[2]]
    remaining = await authorizations.list_for_user(db.pool, user)
    assert [r.auth_key_id for r in remaining] == [keys[0]]


async def test_list_for_user_reports_client_details(db: Db) -> None:
    key = await new_key(db)
    user = await new_user(db)
    await bind(db, key, user, 55)
    await auth_keys.record_client_info(
        db.pool, key, auth_keys.ClientInfo(9, "Pixel", "Android 14", "1.2", "en", "", "en", 229)
    )
    [row] = await authorizations.list_for_user(db.pool, user)
    assert (
        row.hash,
        row.api_id,
        row.device_model,
        row.system_version,
        row.app_version,
        row.layer,
    ) == (
        55,
        9,
        "Pixel",
        "Android 14",
        "1.2",
        229,
    )


async def test_deleting_a_key_ends_its_authorization(db: Db) -> None:
    key = await new_key(db)
    await bind(db, key, await new_user(db))
    await auth_keys.delete_auth_key(db.pool, key)
    assert await authorizations.get_user_id(db.pool, key) is None


# -- contacts and blocks ---------------------------------------------------------------


async def test_contacts_save_rename_list_delete(db: Db) -> None:
    owner, a, b = await new_user(db), await new_user(db), await new_user(db)
    assert (
        await contacts.save_contacts(
            db.pool, owner, [contacts.NewContact(a, "A", ""), contacts.NewContact(b, "B", "")]
        )
        == 2
    )
    assert await contacts.save_contacts(db.pool, owner, [contacts.NewContact(a, "A", "")]) == 0
    assert await contacts.save_contacts(db.pool, owner, [contacts.NewContact(a, "A2", "")]) == 1
    await contacts.save_contacts(db.pool, b, [contacts.NewContact(owner, "O", "")])
    assert await contacts.list_contacts(db.pool, owner) == [
        contacts.ContactRow(a, False),
        contacts.ContactRow(b, True),
    ]
    assert await contacts.delete_contacts(db.pool, owner, [a, 12345]) == [a]
    b_phone = (await users.get_user(db.pool, b)).phone  # type: ignore[union-attr]
    assert await contacts.delete_contacts_by_phones(db.pool, owner, [b_phone]) == [b]
    assert await contacts.count_contacts(db.pool, owner) == 0


async def test_blocks_are_idempotent_and_paged_newest_first(db: Db) -> None:
    owner = await new_user(db)
    targets = [await new_user(db) for _ in range(3)]
    for i, target in enumerate(targets):
        assert await contacts.block(db.pool, owner, target, NOW + timedelta(seconds=i))
    assert not await contacts.block(db.pool, owner, targets[0], NOW)
    assert await contacts.is_blocked(db.pool, owner, targets[1])
    assert not await contacts.is_blocked(db.pool, targets[1], owner)
    total, page = await contacts.blocked_page(db.pool, owner, offset=1, limit=5)
    assert total == 3
    assert [r.user_id for r in page] == [targets[1], targets[0]]
    assert await contacts.unblock(db.pool, owner, targets[1])
    assert not await contacts.unblock(db.pool, owner, targets[1])
    assert not await contacts.is_blocked(db.pool, owner, targets[1])


async def test_issuing_sweeps_long_dead_codes_of_other_phones(db: Db) -> None:
    abandoned, active = new_phone(), new_phone()
    await issue(db, abandoned, "h-abandoned", now=NOW - timedelta(hours=2))
    await issue(db, active, "h-active", now=NOW)
    assert (
        await db.pool.fetchval("SELECT count(*) FROM login_codes WHERE phone = $1", abandoned) == 0
    )
