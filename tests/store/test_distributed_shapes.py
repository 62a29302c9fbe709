"""The statements telesrv takes on Citus (``distributed=True``: one user's rows per
statement, or subqueries Citus runs first) answer as the plain PostgreSQL ones do: both
shapes run here on plain PostgreSQL over the same rows, so every CI run holds the
Citus shapes to the plain answers (tests/citus runs them on a cluster)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from store.test_send_function import params, send
from telesrv.store import (
    contacts,
    deletes,
    edits,
    files,
    people_search,
    pins,
    privacy,
    reactions,
    search,
    state_log,
    update_log,
    users,
)
from telesrv.store import history as history_store
from telesrv.store import messages as messages_store
from telesrv.store import outbox as outbox_store
from telesrv.store.db import Db

_users = itertools.count(9_700_000, 10)


async def chat(db: Db) -> tuple[int, int]:
    """Two users with 5 messages between them, both ways (box ids 1..5 on both sides)."""
    a = next(_users)
    b = a + 1
    for n in range(1, 6):
        sender, recipient = (a, b) if n % 2 else (b, a)
        await send(db, replace(params(sender, recipient, n), message=f"text {n} hello"))
    return a, b


async def test_message_reads_answer_alike(db: Db) -> None:
    a, b = await chat(db)
    pool = db.pool
    for flag in (False, True):
        got = await messages_store.get_boxes(pool, a, [1, 3, 5, 9], distributed=flag)
        assert [(m.box_id, m.message) for m in got] == [
            (5, "text 5 hello"),
            (3, "text 3 hello"),
            (1, "text 1 hello"),
        ]
    plain = await messages_store.get_boxes_within(pool, b, [4, 2, 5], 10_000)
    cut = await messages_store.get_boxes_within(pool, b, [4, 2, 5], 10_000, distributed=True)
    assert plain == cut and [m.box_id for m in cut.boxes] == [4, 2, 5]
    keys = [(a, 1), (b, 2), (a, 4), (b, 99)]

    def by_key(boxes: list[messages_store.BoxMessage]) -> list[messages_store.BoxMessage]:
        return sorted(boxes, key=lambda m: (m.owner_user_id, m.box_id))

    of_owners = by_key(await messages_store.get_boxes_of_owners(pool, keys))
    assert [(m.owner_user_id, m.box_id) for m in of_owners] == [(a, 1), (a, 4), (b, 2)]
    assert of_owners == by_key(
        await messages_store.get_boxes_of_owners(pool, keys, distributed=True)
    )
    for ascending in (False, True):
        pages = [
            await history_store.history_page(
                pool, a, b, above=1, below=5, limit=2, budget=10_000, skip=1,
                ascending=ascending, distributed=flag,
            )
            for flag in (False, True)
        ]  # fmt: skip
        assert pages[0] == pages[1] and len(pages[0].boxes) == 2


async def test_search_answers_alike(db: Db) -> None:
    a, b = await chat(db)
    query = await search.text_query(db.pool, a, "hello")
    assert query is not None
    f = search.SearchFilter(
        owner_user_id=a, peer_user_id=b, out=None, min_id=0, min_date=0, max_date=0
    )
    plain = await search.search(db.pool, f, query, limit=3, budget=10_000)
    cut = await search.search(db.pool, f, query, limit=3, budget=10_000, distributed=True)
    assert plain == cut and [m.box_id for m in cut.boxes] == [5, 4, 3]
    listed = [
        await search.list_messages(db.pool, f, limit=2, budget=10_000, skip=1, distributed=flag)
        for flag in (False, True)
    ]
    assert listed[0] == listed[1] and [m.box_id for m in listed[1].boxes] == [4, 3]


async def test_edit_and_revoke_targets_answer_alike(db: Db) -> None:
    a, b = await chat(db)
    assert await edits.edit_target(db.pool, a, b, 1) == await edits.edit_target(
        db.pool, a, b, 1, distributed=True
    )
    # Another's message: only who sent it matters (the edit is refused for that).
    theirs = await edits.edit_target(db.pool, a, b, 2, distributed=True)
    assert theirs is not None and theirs.sender_user_id == b
    assert await edits.edit_target(db.pool, a, b, 99, distributed=True) is None
    assert await deletes.revoke_targets(db.pool, a, [1, 2, 3]) == await deletes.revoke_targets(
        db.pool, a, [1, 2, 3], distributed=True
    )


async def test_log_and_projection_reads_answer_alike(db: Db) -> None:
    a, b = await chat(db)
    keys = [(a, 1), (b, 2), (a, 3)]
    plain = await update_log.events_at(db.pool, keys)
    cut = await update_log.events_at(db.pool, keys, distributed=True)
    assert sorted(plain, key=lambda e: (e.user_id, e.pts)) == sorted(
        cut, key=lambda e: (e.user_id, e.pts)
    )
    assert len(plain) == 3
    async with db.pool.acquire() as conn, conn.transaction():
        ids = [
            (user, await state_log.append_txn(conn, user, "read_outbox", 1, peer_user_id=peer))
            for user, peer in ((a, b), (b, a), (a, b))
        ]
    wanted = [*ids, (b, ids[0][1])]  # one key that is no event of its user's
    plain_state = await state_log.events_at(db.pool, wanted)
    assert plain_state == await state_log.events_at(db.pool, wanted, distributed=True)
    assert sorted(plain_state) == sorted(ids)
    await db.pool.execute(
        "INSERT INTO users (user_id, phone, first_name) VALUES ($1, $2, 'A'), ($3, $4, 'B')"
        " ON CONFLICT DO NOTHING",
        a, str(a), b, str(b),
    )  # fmt: skip
    await db.pool.execute(
        "INSERT INTO contacts (owner_user_id, contact_user_id, first_name, last_name)"
        " VALUES ($1, $2, 'Bee', '')",
        a,
        b,
    )
    # Rules of b's that answer differently for a and for b's own contacts: a users rule
    # naming a ahead of a refusal, a contacts rule a is not in (b has no contacts).
    async with db.pool.acquire() as conn, conn.transaction():
        await privacy.set_rules_txn(
            conn, b, "status_timestamp",
            [{"rule": "allow_users", "users": [a]}, {"rule": "disallow_all"}],
        )  # fmt: skip
        await privacy.set_rules_txn(conn, b, "phone_number", [{"rule": "allow_contacts"}])
        await privacy.set_rules_txn(conn, a, "phone_number", [{"rule": "disallow_all"}])
    pairs = ([a, b, a], [b, a, a])
    asked = ["status_timestamp", "phone_number", "about"]
    plain_users = await users.project_user_pairs(db.pool, *pairs, asked)
    split_users = await users.project_user_pairs(db.pool, *pairs, asked, split=True)

    def by_pair(found: list[tuple[int, users.ProjectedUserRow]]) -> list[Any]:
        # Neither shape promises an order; callers key the rows by (viewer, target).
        return sorted(found, key=lambda pair: (pair[0], pair[1].user_id))

    assert by_pair(plain_users) == by_pair(split_users)
    assert len(plain_users) == 3
    facts = {(viewer, row.user_id): row for viewer, row in plain_users}
    assert facts[a, b].privacy_set == {"status_timestamp", "phone_number"}
    assert facts[a, b].privacy_denied == {"phone_number"}
    assert facts[a, b].in_viewer_contacts and facts[a, b].saved_first_name == "Bee"
    assert facts[b, a].privacy_denied == {"phone_number"}
    assert not facts[b, a].in_viewer_contacts and facts[b, a].has_viewer_in_contacts


async def test_outbox_claim_and_deletes_per_user(db: Db) -> None:
    a, b = await chat(db)
    async with db.pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE dispatch_outbox SET available_at = now() - interval '1 hour'")
        claimed = await outbox_store.claim_batch_txn(conn, 1000, distributed=True)
        mine = [r for r in claimed if r.target_user_id in (a, b)]
        assert sorted((r.target_user_id, r.pts) for r in mine) == sorted(
            [(a, n) for n in range(1, 6)] + [(b, n) for n in range(1, 6)]
        )
        assert await outbox_store.delete_claimed_txn(conn, mine, distributed=True) == len(mine)
    assert (
        await db.pool.fetchval(
            "SELECT count(*) FROM dispatch_outbox WHERE target_user_id = ANY($1::bigint[])", [a, b]
        )
        == 0
    )


async def test_pin_reaction_and_contact_reads_answer_alike(db: Db) -> None:
    a, b = await chat(db)
    await db.pool.execute(
        "UPDATE message_boxes SET pinned = true WHERE owner_user_id = $1 AND box_id = 3", b
    )
    for box in (1, 3, 99):
        assert await pins.pin_target(db.pool, a, b, box) == await pins.pin_target(
            db.pool, a, b, box, distributed=True
        )
    assert await pins.peer_copies(db.pool, a, b, [1, 3]) == await pins.peer_copies(
        db.pool, a, b, [1, 3], distributed=True
    )
    assert await reactions.summaries(db.pool, a, b, [1, 2, 9]) == await reactions.summaries(
        db.pool, a, b, [1, 2, 9], distributed=True
    )
    await db.pool.execute(
        "INSERT INTO contacts (owner_user_id, contact_user_id, first_name, last_name)"
        " VALUES ($1, $2, 'B', ''), ($2, $1, 'A', ''), ($1, $3, 'C', '')",
        a,
        b,
        b + 5,
    )
    plain = await contacts.list_contacts(db.pool, a)
    assert plain == await contacts.list_contacts(db.pool, a, distributed=True)
    assert [(c.user_id, c.mutual) for c in plain] == [(b, True), (b + 5, False)]


async def test_people_search_answers_alike(db: Db) -> None:
    a, b = await chat(db)
    others = [b, b + 2, b + 3, b + 4]
    await db.pool.execute(
        "INSERT INTO users (user_id, phone, first_name, username)"
        " SELECT u, u::text, 'Zed', CASE WHEN u % 2 = 0 THEN 'zed' || u END"
        " FROM unnest($1::bigint[]) AS u",
        [a, *others],
    )
    await db.pool.execute(
        "INSERT INTO contacts (owner_user_id, contact_user_id, first_name, last_name)"
        " VALUES ($1, $2, 'Zed', '')",
        a,
        b + 2,
    )
    await db.pool.execute(
        "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)", b + 4, a
    )
    for prefix in (people_search.Prefix("zed", "zed"), people_search.Prefix("zed", None)):
        plain = await people_search.others_matching(db.pool, a, prefix, 10)
        assert plain == await people_search.others_matching(
            db.pool, a, prefix, 10, distributed=True
        )
        assert b + 2 not in plain and b + 4 not in plain and a not in plain


async def test_media_holding_answers_alike(db: Db) -> None:
    """Who holds a photo through messages carrying it: its sender and recipient (one
    copy forwardable), a recipient of a protected copy only (False), anyone else (None)."""
    a = next(_users)
    b, c, d = a + 1, a + 2, a + 3
    await db.pool.execute(
        "INSERT INTO photos (id, access_hash, file_reference, owner_user_id, date, sizes)"
        " VALUES ($1, 1, '\\x00', $1, 1, '[]')",
        a,
    )
    photo = {"kind": "photo", "id": a}
    for sender, recipient, n, protected in ((a, b, 1, False), (b, a, 2, True), (a, c, 3, True)):
        sent = replace(params(sender, recipient, n), noforwards=protected, media=photo)
        await send(db, replace(sent, media_id=a, media_kind="photo"))
    for user, held in ((a, True), (b, True), (c, False), (d, None)):
        for flag in (False, True):
            got = await files.media_holding(db.pool, user, "photo", a, distributed=flag)
            assert got is held, (user, flag)
        assert await files.media_holding(db.pool, user, "document", a, distributed=True) is None
