"""editMessage / deleteMessages / deleteHistory on real PostgreSQL and Redis: the pts_count
rules, block gates, batch limits, dialog recomputation and a dense log on every path."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from delivery.test_outbox import SqlRecorder, scanned_partitions, seq_scans

from telesrv.parts import Parts
from telesrv.services.errors import (
    DeleteMessagesForbidden,
    EditMessagesForbidden,
    MessageAuthorRequired,
    MessageEmpty,
    MessageIdInvalid,
    MessageNotModified,
    MessageTooLong,
)
from telesrv.services.ids import valid_ids
from telesrv.services.messages import Origin, OutgoingText
from telesrv.store import deletes as deletes_store
from telesrv.store import dialog_list as dialog_list_store
from telesrv.store import edits as edits_store
from telesrv.store import messages as messages_store

ORIGIN = Origin(auth_key_id=31, session_id=32)
_ids = itertools.count(7_000_000)
_random = itertools.count(1)


def new_user() -> int:
    return next(_ids)


class Env:
    def __init__(self, db: Any, parts: Parts) -> None:
        self.db = db
        self.counters = parts.counters
        self.messages = parts.messages
        self.edits = parts.edits
        self.deletes = parts.deletes
        self.updates = parts.updates
        self.dialogs = parts.dialogs

    async def listing(self, owner: int, **offsets: Any) -> Any:
        """The dialog list's page (what messages.getDialogs serves) of the main folder."""
        page_args: dict[str, Any] = dict(offset_date=None, offset_id=None, offset_peer=None)
        page_args.update(offsets)
        return await self.dialogs.dialogs(
            owner, folder_id=0, exclude_pinned=False, limit=10, now=9000, **page_args
        )

    async def send(self, sender: int, recipient: int, body: str = "hello") -> int:
        """The sender's box id of a new message."""
        sent = await self.messages.send_text(
            OutgoingText(sender=sender, recipient=recipient, random_id=next(_random), text=body),
            ORIGIN,
            now=1000,
        )
        return sent.message.box_id

    async def log(self, user: int) -> list[tuple[int, int, str, list[int] | None]]:
        rows = await self.db.pool.fetch(
            "SELECT pts, pts_count, event_type, box_ids FROM user_update_events"
            " WHERE user_id = $1 ORDER BY pts",
            user,
        )
        return [(r["pts"], r["pts_count"], r["event_type"], r["box_ids"]) for r in rows]

    async def assert_dense(self, user: int) -> int:
        """Every pts 1..top is covered exactly once; returns top."""
        covered: list[int] = []
        for pts, count, _, _ in await self.log(user):
            covered.extend(range(pts - count + 1, pts + 1))
        assert covered == list(range(1, len(covered) + 1))
        assert await self.updates.contiguous(user) == len(covered)
        return len(covered)

    async def visible(self, owner: int, peer: int) -> list[int]:
        rows = await self.db.pool.fetch(
            "SELECT box_id FROM message_boxes WHERE owner_user_id = $1 AND peer_user_id = $2"
            " AND NOT deleted ORDER BY box_id",
            owner,
            peer,
        )
        return [r["box_id"] for r in rows]

    async def dialog(self, owner: int, peer: int) -> dialog_list_store.DialogRow | None:
        rows = await dialog_list_store.get_peer_dialogs(self.db.pool, owner, [peer])
        return rows[0] if rows else None

    async def block(self, owner: int, blocked: int) -> None:
        await self.db.pool.execute(
            "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)",
            owner,
            blocked,
        )

    async def outbox(self, user: int) -> list[tuple[int, int | None, int | None]]:
        rows = await self.db.pool.fetch(
            "SELECT pts, exclude_auth_key_id, exclude_session_id FROM dispatch_outbox"
            " WHERE target_user_id = $1 ORDER BY pts",
            user,
        )
        return [tuple(r.values()) for r in rows]


@pytest.fixture
async def env(db: Any, parts: Parts) -> Env:
    return Env(db, parts)


async def bulk_chat(db: Any, sender: int, recipient: int, n: int) -> None:
    """``n`` messages sender -> recipient written straight into the tables (no events), for
    two users no counter has been used for yet: their box ids are 1..n on both sides."""
    async with db.pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """
            INSERT INTO private_messages (sender_user_id, recipient_user_id, random_id, date,
                                          message)
            SELECT $1, $2, -g, 1000 + g, 'bulk ' || g FROM generate_series(1, $3) AS g
            """,
            sender,
            recipient,
            n,
        )
        for owner, peer, out in ((sender, recipient, True), (recipient, sender, False)):
            await conn.execute(
                """
                INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id,
                                           message_id, out, date)
                SELECT $1, (-random_id)::int, $2, sender_user_id, id, $3, date
                  FROM private_messages WHERE sender_user_id = $4 AND random_id < 0
                """,
                owner,
                peer,
                out,
                sender,
            )
            await conn.execute(
                """
                INSERT INTO dialogs (user_id, peer_user_id, top_message, top_message_date,
                                     unread_count)
                VALUES ($1, $2, $3, 1000 + $3, CASE WHEN $4 THEN 0 ELSE $3 END)
                """,
                owner,
                peer,
                n,
                out,
            )


# -- edit -----------------------------------------------------------------------------


async def test_edit_updates_the_body_and_gives_each_owner_an_event(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    await env.send(c, b)  # b's box 1: so b's ids differ from a's
    box = await env.send(a, b, "first")
    edited = await env.edits.edit_text(a, b, box, "second", None, ORIGIN, now=2000)
    assert edited.message.message == "second" and edited.message.edit_date == 2000
    assert edited.message.box_id == box == 1 and edited.pts == 2

    assert (await env.log(a))[-1] == (2, 1, "edit_message", [1])
    assert (await env.log(b))[-1] == (3, 1, "edit_message", [2])  # b's own id
    assert (await env.outbox(a))[-1] == (2, 31, 32)  # the editing device gets the answer
    assert (await env.outbox(b))[-1] == (3, None, None)
    [b_view] = await messages_store.get_boxes(env.db.pool, b, [2])
    assert (b_view.message, b_view.edit_date) == ("second", 2000)
    diff = await env.updates.difference(b, 2)
    assert [(e.event_type, e.pts_count) for e in diff.events] == [("edit_message", 1)]


async def test_edit_of_entities_alone_and_not_modified(env: Env) -> None:
    a, b = new_user(), new_user()
    box = await env.send(a, b, "same")
    with pytest.raises(MessageNotModified):
        await env.edits.edit_text(a, b, box, "same", None, ORIGIN, now=1)
    with pytest.raises(MessageNotModified):  # no text given: nothing to change
        await env.edits.edit_text(a, b, box, None, None, ORIGIN, now=1)
    bold = b"entities"  # opaque to the store: compared as bytes
    await env.edits.edit_text(a, b, box, "same", bold, ORIGIN, now=1)
    with pytest.raises(MessageNotModified):
        await env.edits.edit_text(a, b, box, "same", bold, ORIGIN, now=1)
    assert [e[2] for e in await env.log(a)] == ["new_message", "edit_message"]


async def test_edit_errors_spend_no_pts(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    box = await env.send(a, b)
    other = await env.send(a, c)
    with pytest.raises(MessageAuthorRequired):  # b received it
        await env.edits.edit_text(b, a, box, "mine now", None, ORIGIN, now=1)
    for wrong in (0, -1, 2**31, 999):
        with pytest.raises(MessageIdInvalid):
            await env.edits.edit_text(a, b, wrong, "x", None, ORIGIN, now=1)
    with pytest.raises(MessageIdInvalid):  # a message of another chat
        await env.edits.edit_text(a, b, other, "x", None, ORIGIN, now=1)
    with pytest.raises(MessageEmpty):
        await env.edits.edit_text(a, b, box, "  ", None, ORIGIN, now=1)
    with pytest.raises(MessageTooLong):
        await env.edits.edit_text(a, b, box, "x" * 4097, None, ORIGIN, now=1)
    await env.block(b, a)
    with pytest.raises(EditMessagesForbidden):
        await env.edits.edit_text(a, b, box, "x", None, ORIGIN, now=1)
    assert [e[2] for e in await env.log(a)] == ["new_message", "new_message"]
    assert [e[2] for e in await env.log(b)] == ["new_message"]
    [body] = await messages_store.get_boxes(env.db.pool, b, [box])
    assert body.message == "hello" and body.edit_date is None


async def test_edit_after_the_peer_deleted_its_copy_reaches_only_the_editor(env: Env) -> None:
    a, b = new_user(), new_user()
    box = await env.send(a, b)
    assert await env.deletes.delete_messages(b, [box], False, ORIGIN, now=1) is not None
    await env.edits.edit_text(a, b, box, "changed", None, ORIGIN, now=2)
    assert [e[2] for e in await env.log(b)] == ["new_message", "delete_messages"]
    assert (await env.log(a))[-1][2] == "edit_message"


async def test_edit_in_saved_messages(env: Env) -> None:
    a = new_user()
    box = await env.send(a, a, "note")
    edited = await env.edits.edit_text(a, a, box, "note!", None, ORIGIN, now=3)
    assert edited.pts == 2 and await env.log(a) == [
        (1, 1, "new_message", [1]),
        (2, 1, "edit_message", [1]),
    ]


async def test_edit_write_fills_the_pts_of_a_box_deleted_after_the_plan(env: Env) -> None:
    a, b = new_user(), new_user()
    box = await env.send(a, b)
    allocations = await env.counters.allocate([(a, 1, 0), (b, 1, 0)])
    # b deletes its copy between the plan and the write (no event: a raw soft delete)
    await env.db.pool.execute("UPDATE message_boxes SET deleted = true WHERE owner_user_id = $1", b)
    edited = await env.db.run_txn(
        "t",
        edits_store.edit_private_message_txn,
        a,
        b,
        box,
        "late",
        None,
        5,
        [(x.user_id, x.first_pts) for x in allocations],
        None,
        None,
    )
    assert [(e.owner_user_id, e.pts) for e in edited] == [(a, 2)]
    assert (await env.log(b))[-1] == (2, 1, "noop", None)


async def test_a_failed_edit_leaves_noops(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = new_user(), new_user()
    box = await env.send(a, b)
    plan = await edits_store.edit_target(env.db.pool, a, b, box)
    assert plan is not None and plan.owners == sorted([a, b])
    await env.block(b, a)

    async def stale_plan(*args: Any, **kwargs: Any) -> edits_store.EditTarget:
        return plan  # as read before the block landed

    monkeypatch.setattr(edits_store, "edit_target", stale_plan)
    with pytest.raises(EditMessagesForbidden):  # the write checks again under its locks
        await env.edits.edit_text(a, b, box, "x", None, ORIGIN, now=1)
    assert [e[2] for e in await env.log(a)] == ["new_message", "noop"]
    assert [e[2] for e in await env.log(b)] == ["new_message", "noop"]
    await env.assert_dense(a)


# -- deleteMessages -------------------------------------------------------------------


async def test_delete_counts_the_owners_ids_and_revoke_translates(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    await env.send(c, b)  # b's box 1
    boxes = [await env.send(a, b, f"m{i}") for i in range(4)]  # a: 1..4, b: 2..5
    plain = await env.deletes.delete_messages(a, [boxes[0]], False, ORIGIN, now=1)
    assert plain is not None and (plain.pts, plain.pts_count) == (5, 1)
    assert await env.visible(b, a) == [2, 3, 4, 5]  # b keeps its copy

    revoked = await env.deletes.delete_messages(a, [boxes[1], boxes[3]], True, ORIGIN, now=2)
    assert revoked is not None and (revoked.pts, revoked.pts_count) == (7, 2)
    assert revoked.box_ids == [2, 4]
    assert (await env.log(a))[-1] == (7, 2, "delete_messages", [2, 4])
    assert (await env.log(b))[-1] == (7, 2, "delete_messages", [3, 5])  # b's ids
    assert await env.visible(b, a) == [2, 4]
    assert (await env.outbox(a))[-1] == (7, 31, 32)
    assert (await env.outbox(b))[-1] == (7, None, None)
    for user in (a, b):
        await env.assert_dense(user)
    diff = await env.updates.difference(b, 5)
    assert [(e.event_type, e.pts, e.pts_count) for e in diff.events] == [("delete_messages", 7, 2)]


async def test_delete_drops_bad_ids_and_repeats_cost_nothing(env: Env) -> None:
    a, b = new_user(), new_user()
    box = await env.send(a, b)
    assert valid_ids([0, -5, 2**31, box, box, 2**31 - 1]) == [box, 2**31 - 1]
    deleted = await env.deletes.delete_messages(a, [0, -5, 2**31, box, box, 77], False, ORIGIN, 1)
    assert deleted is not None and deleted.pts_count == 1 and deleted.box_ids == [box]
    assert await env.deletes.delete_messages(a, [box], False, ORIGIN, 1) is None
    assert await env.deletes.delete_messages(a, [], True, ORIGIN, 1) is None
    assert [e[2] for e in await env.log(a)] == ["new_message", "delete_messages"]


async def test_delete_takes_at_most_a_thousand_ids(env: Env) -> None:
    a, b = new_user(), new_user()
    await bulk_chat(env.db, a, b, 1200)
    deleted = await env.deletes.delete_messages(a, list(range(1, 1201)), False, ORIGIN, 1)
    assert deleted is not None and deleted.pts_count == 1000
    assert (await env.log(a))[-1][:3] == (1000, 1000, "delete_messages")
    assert len(await env.visible(a, b)) == 200


async def test_revoke_against_a_blocker_is_forbidden_but_a_local_delete_is_not(
    env: Env,
) -> None:
    a, b = new_user(), new_user()
    box = await env.send(a, b)
    await env.block(b, a)
    with pytest.raises(DeleteMessagesForbidden):
        await env.deletes.delete_messages(a, [box], True, ORIGIN, 1)
    assert await env.visible(a, b) == [box] and await env.visible(b, a) == [1]
    assert [e[2] for e in await env.log(a)] == ["new_message"]
    assert await env.deletes.delete_messages(a, [box], False, ORIGIN, 1) is not None
    assert await env.visible(a, b) == [] and await env.visible(b, a) == [1]
    # b blocked a, not the other way round: b may still revoke
    reply = await env.send(b, a)
    assert await env.deletes.delete_messages(b, [reply], True, ORIGIN, 1) is not None
    assert await env.visible(a, b) == []


async def test_a_block_landing_before_the_write_fills_every_pts(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = new_user(), new_user()
    boxes = [await env.send(a, b) for _ in range(3)]
    plan = await deletes_store.revoke_targets(env.db.pool, a, boxes)
    assert [(t.owner_user_id, t.boxes, t.blocked_deleter) for t in plan] == [(b, 3, False)]
    await env.block(b, a)

    async def stale_plan(*args: Any, **kwargs: Any) -> list[deletes_store.RevokeTarget]:
        return plan

    monkeypatch.setattr(deletes_store, "revoke_targets", stale_plan)
    with pytest.raises(DeleteMessagesForbidden):
        await env.deletes.delete_messages(a, boxes, True, ORIGIN, 1)
    assert [e[2] for e in await env.log(a)] == ["new_message"] * 3 + ["noop"] * 3
    assert [e[2] for e in await env.log(b)] == ["new_message"] * 3 + ["noop"] * 3
    assert await env.visible(a, b) == boxes


async def test_fewer_boxes_than_pts_become_noops_before_the_event(env: Env) -> None:
    a, b = new_user(), new_user()
    boxes = [await env.send(a, b) for _ in range(3)]
    await env.deletes.delete_messages(a, [boxes[0]], False, ORIGIN, 1)  # pts 4
    (alloc,) = await env.counters.allocate([(a, 3, 0)])  # planned for all three
    result = await env.db.run_txn(
        "t",
        deletes_store.delete_message_boxes_txn,
        a,
        boxes,
        False,
        False,
        9,
        [deletes_store.PtsRange(a, alloc.first_pts, 3)],
        None,
        None,
    )
    assert [(d.user_id, d.pts, d.box_ids) for d in result] == [(a, 7, [2, 3])]
    assert (await env.log(a))[-2:] == [(5, 1, "noop", None), (7, 2, "delete_messages", [2, 3])]
    await env.assert_dense(a)


async def test_concurrent_deletes_of_the_same_ids_keep_the_logs_dense(env: Env) -> None:
    a, b = new_user(), new_user()
    boxes = [await env.send(a, b) for _ in range(5)]
    results = await asyncio.gather(
        *(env.deletes.delete_messages(a, boxes, True, ORIGIN, 1) for _ in range(4))
    )
    assert sum(r is not None and r.pts_count == 5 for r in results) >= 1
    assert sum(len(r.box_ids) for r in results if r is not None) == 5
    for user in (a, b):
        await env.assert_dense(user)
    assert await env.visible(a, b) == [] and await env.visible(b, a) == []


async def test_deleting_recomputes_top_message_and_unread_or_removes_the_dialog(
    env: Env,
) -> None:
    a, b = new_user(), new_user()
    first = await env.send(a, b, "one")
    await env.send(b, a, "reply")  # a: 2, b: 2
    third = await env.send(a, b, "three")  # a: 3, b: 3
    assert (await env.dialog(b, a)).unread_count == 2  # type: ignore[union-attr]
    await env.deletes.delete_messages(a, [third], True, ORIGIN, 1)
    a_dialog, b_dialog = await env.dialog(a, b), await env.dialog(b, a)
    assert a_dialog is not None and (a_dialog.top_message, a_dialog.unread_count) == (2, 1)
    assert b_dialog is not None and (b_dialog.top_message, b_dialog.unread_count) == (2, 1)
    await env.deletes.delete_messages(a, [first, 2], True, ORIGIN, 1)
    assert await env.dialog(a, b) is None and await env.dialog(b, a) is None
    # the next message rebuilds both dialogs
    await env.send(b, a, "again")
    assert (await env.dialog(a, b)).unread_count == 1  # type: ignore[union-attr]
    assert (await env.dialog(b, a)).top_message == 4  # type: ignore[union-attr]


# -- deleteHistory --------------------------------------------------------------------


async def test_delete_history_goes_in_batches_of_a_thousand_newest_first(env: Env) -> None:
    a, b = new_user(), new_user()
    await bulk_chat(env.db, a, b, 2500)
    calls = []
    while True:
        done = await env.deletes.delete_history(
            a, b, 0, just_clear=False, revoke=True, origin=ORIGIN, now=5
        )
        calls.append(done)
        if not done.more:
            break
    assert [(c.deleted.pts, c.deleted.pts_count, c.more) for c in calls if c.deleted] == [
        (1000, 1000, True),
        (2000, 1000, True),
        (2500, 500, False),
    ]
    assert calls[0].deleted is not None and calls[0].deleted.box_ids == list(range(1501, 2501))
    b_log = await env.log(b)
    assert [(p, n) for p, n, _, _ in b_log] == [(1000, 1000), (2000, 1000), (2500, 500)]
    assert sorted(i for *_, ids in b_log for i in ids or []) == list(range(1, 2501))
    assert await env.dialog(a, b) is None and await env.dialog(b, a) is None
    again = await env.deletes.delete_history(
        a, b, 0, just_clear=False, revoke=True, origin=ORIGIN, now=5
    )
    assert again.deleted is None and not again.more


async def test_delete_history_max_id_just_clear_and_local_only(env: Env) -> None:
    a, b = new_user(), new_user()
    boxes = [await env.send(a, b) for _ in range(4)]
    done = await env.deletes.delete_history(
        a, b, boxes[1], just_clear=True, revoke=False, origin=ORIGIN, now=5
    )
    assert done.deleted is not None and done.deleted.box_ids == boxes[:2]
    assert await env.visible(a, b) == boxes[2:] and len(await env.visible(b, a)) == 4
    done = await env.deletes.delete_history(
        a, b, 0, just_clear=True, revoke=False, origin=ORIGIN, now=5
    )
    assert done.deleted is not None and done.deleted.pts_count == 2
    kept = await env.dialog(a, b)
    assert kept is not None and (kept.top_message, kept.unread_count) == (0, 0)
    # clearing an empty chat again without just_clear removes the kept dialog
    empty = await env.deletes.delete_history(
        a, b, 0, just_clear=False, revoke=False, origin=ORIGIN, now=5
    )
    assert empty.deleted is None and await env.dialog(a, b) is None
    assert (await env.dialog(b, a)).unread_count == 4  # type: ignore[union-attr]
    assert [e[2] for e in await env.log(b)] == ["new_message"] * 4
    await env.send(b, a, "hi")
    rebuilt = await env.dialog(a, b)
    assert rebuilt is not None and rebuilt.top_message == 5 and rebuilt.unread_count == 1


async def test_delete_history_revoke_against_a_blocker(env: Env) -> None:
    a, b = new_user(), new_user()
    await env.send(a, b)
    await env.block(b, a)
    with pytest.raises(DeleteMessagesForbidden):
        await env.deletes.delete_history(
            a, b, 0, just_clear=False, revoke=True, origin=ORIGIN, now=1
        )
    await env.send(a, b)  # lands on a's side only: revoking it touches nobody else
    await env.deletes.delete_messages(a, [1], False, ORIGIN, 1)
    done = await env.deletes.delete_history(
        a, b, 0, just_clear=False, revoke=True, origin=ORIGIN, now=1
    )
    assert done.deleted is not None and done.deleted.box_ids == [2]


async def test_edit_and_revoke_from_both_sides_do_not_deadlock(env: Env) -> None:
    a, b = new_user(), new_user()
    boxes = [await env.send(a, b, f"m{i}") for i in range(20)]

    async def edit(i: int) -> None:
        try:
            await env.edits.edit_text(a, b, boxes[i], f"e{i}", None, ORIGIN, now=2)
        except MessageIdInvalid:
            pass  # deleted first

    await asyncio.wait_for(
        asyncio.gather(
            *(edit(i) for i in range(20)),
            *(env.deletes.delete_messages(b, [i + 1], True, ORIGIN, 2) for i in range(0, 20, 2)),
            *(env.deletes.delete_messages(a, [boxes[i]], True, ORIGIN, 2) for i in range(1, 20, 4)),
        ),
        timeout=60,
    )
    for user in (a, b):
        await env.assert_dense(user)
    assert await env.visible(a, b) == await env.visible(b, a)


# -- query plans ----------------------------------------------------------------------


class RowRecorder(SqlRecorder):
    async def fetchrow(self, sql: str, *args: Any) -> Any:
        self.calls.append((sql, args))
        return None


async def plan_of(db: Any, call: Callable[[Any], Awaitable[object]]) -> dict[str, Any]:
    """The JSON plan of the one statement ``call`` runs (fetchrow included)."""
    recorder = RowRecorder()
    await call(recorder)
    [(sql, args)] = recorder.calls
    text = await db.pool.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args)
    plan: dict[str, Any] = json.loads(text)[0]["Plan"]
    return plan


async def test_plan_queries_stay_in_the_owners_partition(env: Env) -> None:
    # 4000 messages among users 1..40 (none of this module's), both boxes, then ANALYZE
    await env.db.pool.execute(
        """
        INSERT INTO private_messages (sender_user_id, recipient_user_id, random_id, date, message)
        SELECT 1 + g % 40, 1 + (g + 1) % 40, g, 1700000000 + g, 'hi'
          FROM generate_series(1, 4000) AS g;
        INSERT INTO message_boxes (owner_user_id, box_id, peer_user_id, sender_user_id,
                                   message_id, out, date)
        SELECT o, row_number() OVER (PARTITION BY o ORDER BY m.id)::int, p, m.sender_user_id,
               m.id, o = m.sender_user_id, m.date
          FROM private_messages m,
               LATERAL (VALUES (m.sender_user_id, m.recipient_user_id),
                               (m.recipient_user_id, m.sender_user_id)) AS v(o, p)
         WHERE m.sender_user_id <= 40;
        ANALYZE private_messages, message_boxes, contact_blocks;
        """
    )
    newest = await plan_of(env.db, lambda c: deletes_store.newest_box_ids(c, 7, 8, 0, 1001))
    batch = list(range(1, 1001))  # a whole deleteHistory batch: a join would hash it
    visible = await plan_of(env.db, lambda c: deletes_store.visible_box_ids(c, 7, batch))
    target = await plan_of(env.db, lambda c: edits_store.edit_target(c, 7, 8, 5))
    revoke = await plan_of(env.db, lambda c: deletes_store.revoke_targets(c, 7, batch))
    assert len(scanned_partitions(newest, "message_boxes")) == 1
    assert len(scanned_partitions(visible, "message_boxes")) == 1
    assert len(scanned_partitions(target, "message_boxes")) <= 2
    for plan in (newest, visible, target, revoke):
        assert not [s for s in seq_scans(plan) if s.startswith(("message_boxes", "private"))]


async def test_a_cleared_chat_stays_listed_empty_and_dated_by_the_clear(env: Env) -> None:
    a, b, c = new_user(), new_user(), new_user()
    await env.send(a, b)
    await env.send(a, c)  # newer than the chat with b
    await env.deletes.delete_history(
        a, b, 0, just_clear=True, revoke=False, origin=ORIGIN, now=5000
    )
    page = await env.listing(a)
    assert [(d.peer_user_id, d.top_message, d.top_message_date) for d in page.rows] == [
        (b, 0, 5000),  # the clear is the chat's latest event
        (c, 2, 1000),
    ]
    assert [m.box_id for m in page.tops] == [2]
    assert (await env.dialogs.summary(a, 0))[0] == 2
    # Paging past the cleared chat by its date (and no message id) reaches the next one.
    rest = await env.listing(a, offset_date=5000, offset_id=0, offset_peer=b)
    assert [d.peer_user_id for d in rest.rows] == [c]
    # Without just_clear the chat goes away.
    await env.deletes.delete_history(
        a, c, 0, just_clear=False, revoke=False, origin=ORIGIN, now=6000
    )
    page = await env.listing(a)
    assert [d.peer_user_id for d in page.rows] == [b]
