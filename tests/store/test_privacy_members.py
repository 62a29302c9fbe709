"""The projection's privacy answers from the rule kinds and the rule members table
(privacy_rule_members, written with the rules): the same answers as the rules read in
order, only the keys consulted, members replaced with the list, and the cost of a
target whose every key names a thousand users."""

from __future__ import annotations

import itertools
import statistics
import time
from importlib import resources
from typing import Any

from telesrv.parts import AccountServices, Parts
from telesrv.services.origin import Origin
from telesrv.services.privacy import (
    CONSULTED_KEY_NAMES,
    CONSULTED_KEYS,
    PrivacyKey,
    Rule,
    RuleKind,
    evaluate,
)
from telesrv.store import users as users_store
from telesrv.store.db import Db

ORIGIN = Origin(auth_key_id=9, session_id=9)
_phones = itertools.count(15553100000)


async def new_user(accounts: AccountServices) -> int:
    return (await accounts.users.create(f"+{next(_phones)}", "U")).user_id


async def test_answers_match_the_rules_read_in_order(
    db: Db, accounts: AccountServices, parts: Parts
) -> None:
    target = await new_user(accounts)
    a, b, c, d = [await new_user(accounts) for _ in range(4)]
    for viewer in (b, d):
        await accounts.contacts.add_contact(target, viewer, "V", "")
    lists: dict[PrivacyKey, list[Rule]] = {
        # a named twice: the first rule naming them decides.
        PrivacyKey.PHONE_NUMBER: [
            Rule(RuleKind.DISALLOW_USERS, (a, b)),
            Rule(RuleKind.ALLOW_USERS, (a, c)),
            Rule(RuleKind.ALLOW_CONTACTS),
        ],
        PrivacyKey.STATUS_TIMESTAMP: [
            Rule(RuleKind.DISALLOW_CONTACTS),
            Rule(RuleKind.ALLOW_USERS, (d, a)),
        ],
        PrivacyKey.PROFILE_PHOTO: [Rule(RuleKind.ALLOW_USERS, (c,)), Rule(RuleKind.DISALLOW_ALL)],
        PrivacyKey.FORWARDS: [Rule(RuleKind.ALLOW_ALL), Rule(RuleKind.DISALLOW_USERS, (a,))],
        # Not consulted: never evaluated.
        PrivacyKey.BIRTHDAY: [Rule(RuleKind.DISALLOW_ALL)],
    }
    for key, rules in lists.items():
        await parts.privacy.set_rules(target, key, rules, ORIGIN, 0)
    viewers = [a, b, c, d]
    rows = await users_store.project_user_pairs(
        db.pool, viewers, [target] * len(viewers), CONSULTED_KEY_NAMES
    )
    assert sorted(v for v, _ in rows) == sorted(viewers)
    for viewer, row in rows:
        assert row.privacy_set == {k for k in lists if k in CONSULTED_KEYS}
        for name in row.privacy_set:
            expected = evaluate(lists[PrivacyKey(name)], viewer, viewer in (b, d))
            assert (name not in row.privacy_denied) == expected, (viewer, name)

    # A list set again replaces its members: a is no longer named.
    await parts.privacy.set_rules(
        target, PrivacyKey.PHONE_NUMBER, [Rule(RuleKind.ALLOW_USERS, (c,))], ORIGIN, 0
    )
    members = await db.pool.fetch(
        "SELECT member, n FROM privacy_rule_members WHERE user_id = $1 AND key = $2",
        target,
        str(PrivacyKey.PHONE_NUMBER),
    )
    assert [(r["member"], r["n"]) for r in members] == [(c, 1)]
    [(_, row_a)] = await users_store.project_user_pairs(db.pool, [a], [target], CONSULTED_KEY_NAMES)
    assert PrivacyKey.PHONE_NUMBER in row_a.privacy_denied


async def test_a_target_with_every_key_naming_a_thousand_users(
    db: Db, accounts: AccountServices, parts: Parts
) -> None:
    """250 viewers of one target: with no rules, then with 11 keys x 1,000 users each.
    The membership test is an index probe (the plan says so); the times are printed
    for the record only."""
    ids = [
        r["user_id"]
        for r in await db.pool.fetch(
            """
            INSERT INTO users (phone, first_name)
            SELECT (17780000000 + n)::text, 'B' || n FROM generate_series(1, 1251) AS n
            RETURNING user_id
            """
        )
    ]
    target, others = ids[0], ids[1:]
    viewers = others[:250]
    await db.pool.execute("ANALYZE users")

    async def measure() -> float:
        times = []
        for _ in range(15):
            started = time.perf_counter()
            rows = await users_store.project_user_pairs(
                db.pool, viewers, [target] * len(viewers), CONSULTED_KEY_NAMES
            )
            times.append(time.perf_counter() - started)
            assert len(rows) == len(viewers)
        return statistics.median(times) * 1000

    empty = await measure()
    disallowed, allowed = others[::2][:500], others[1::2][:500]
    rules = [
        Rule(RuleKind.DISALLOW_USERS, tuple(disallowed)),
        Rule(RuleKind.ALLOW_USERS, tuple(allowed)),
        Rule(RuleKind.ALLOW_CONTACTS),
    ]
    for key in PrivacyKey:
        await parts.privacy.set_rules(target, key, rules, ORIGIN, 0)
    await db.pool.execute("ANALYZE privacy_rules, privacy_rule_members")
    full = await measure()
    rows = await users_store.project_user_pairs(
        db.pool, viewers, [target] * len(viewers), CONSULTED_KEY_NAMES
    )
    for viewer, row in rows:
        assert row.privacy_set == CONSULTED_KEYS
        assert row.privacy_denied == (CONSULTED_KEYS if viewer in set(disallowed) else set())
    plan = await db.pool.fetch(
        """
        EXPLAIN SELECT m.n FROM privacy_rule_members m
         WHERE m.user_id = $1 AND m.key = $2 AND m.member = $3
        """,
        target,
        "phone_number",
        viewers[0],
    )
    assert "privacy_rule_members_pkey" in " ".join(r[0] for r in plan)
    print(f"\n250 pairs: no rules {empty:.1f} ms, 11 keys x 1,000 users {full:.1f} ms")


async def test_migration_backfill_writes_what_set_rules_writes(
    db: Db, accounts: AccountServices, parts: Parts
) -> None:
    """0029 fills kinds and members for lists stored before it: the same as setPrivacy
    writes now (run here on a list whose derived rows were wiped, then rolled back)."""
    target = await new_user(accounts)
    a, b = await new_user(accounts), await new_user(accounts)
    rules = [
        Rule(RuleKind.DISALLOW_USERS, (a,)),
        Rule(RuleKind.ALLOW_USERS, (b, a)),
        Rule(RuleKind.ALLOW_CONTACTS),
    ]
    await parts.privacy.set_rules(target, PrivacyKey.ABOUT, rules, ORIGIN, 0)
    key = str(PrivacyKey.ABOUT)

    async def derived(conn: Any) -> tuple[list[str], list[tuple[int, int]]]:
        kinds = await conn.fetchval(
            "SELECT kinds FROM privacy_rules WHERE user_id = $1 AND key = $2", target, key
        )
        members = await conn.fetch(
            "SELECT member, n FROM privacy_rule_members WHERE user_id = $1 AND key = $2"
            " ORDER BY member",
            target,
            key,
        )
        return list(kinds), [(r["member"], r["n"]) for r in members]

    written = await derived(db.pool)
    assert written == (
        ["disallow_users", "allow_users", "allow_contacts"],
        sorted([(a, 1), (b, 2)]),
    )
    source = resources.files("telesrv.store.migrations").joinpath("0029_privacy_rule_members.sql")
    statements = [
        s.strip()
        for s in "\n".join(
            line for line in source.read_text().splitlines() if not line.startswith("--")
        ).split(";")
    ]
    backfill = [
        s
        for s in statements
        if s.startswith(("UPDATE privacy_rules", "INSERT INTO privacy_rule_members"))
    ]
    assert len(backfill) == 2
    async with db.pool.acquire() as conn:
        txn = conn.transaction()
        await txn.start()
        try:
            # As before 0029: no kinds, no members (the backfill writes every row's).
            await conn.execute("UPDATE privacy_rules SET kinds = '{}'")
            await conn.execute("DELETE FROM privacy_rule_members")
            for statement in backfill:
                await conn.execute(statement)
            assert await derived(conn) == written
        finally:
            await txn.rollback()
    assert await derived(db.pool) == written
