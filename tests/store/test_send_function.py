"""The send function's rows, branch by branch, read straight from the tables: both sides'
boxes, search rows, dialogs, events and outbox rows (both sides' rows of a table go in
one statement since 0016), the lock order of the two dialogs, what a retry racing its
original gets, and that a search row needs its body."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace
from typing import Any

import asyncpg
import pytest

from telesrv.store import messages as messages_store
from telesrv.store import refusals
from telesrv.store.db import Db
from telesrv.store.messages import SendParams, SendResult

DATE = 1_700_000_000
_users = itertools.count(9_300_000, 10)


def users() -> tuple[int, int]:
    """Two fresh user ids, the first the smaller."""
    first = next(_users)
    return first, first + 1


def params(sender: int, recipient: int, n: int, **changes: Any) -> SendParams:
    """The n-th send between the two (pts and box ids n on both sides)."""
    p = SendParams(
        sender=sender,
        recipient=recipient,
        random_id=1000 + n,
        date=DATE + n,
        message=f"message {n}",
        entities=None,
        fwd_from=None,
        silent=False,
        noforwards=False,
        media_unread=False,
        reply_to=None,
        quote_text=None,
        quote_entities=None,
        quote_offset=None,
        sender_pts=n,
        sender_box=n,
        recipient_pts=n,
        recipient_box=n,
        exclude_auth_key_id=7,
        exclude_session_id=8,
    )
    return replace(p, **changes)


async def send(db: Db, p: SendParams) -> SendResult:
    async with db.pool.acquire() as conn, conn.transaction():
        return await messages_store.send_private_message_txn(conn, p)


async def rows(db: Db, query: str, *args: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in await db.pool.fetch(query, *args)]


async def boxes(db: Db, owner: int) -> list[tuple[Any, ...]]:
    return await rows(
        db,
        "SELECT box_id, peer_user_id, sender_user_id, out, reply_to_msg_id, media_unread"
        "  FROM message_boxes WHERE owner_user_id = $1 ORDER BY box_id",
        owner,
    )


async def searchable(db: Db, owner: int) -> list[tuple[Any, ...]]:
    return await rows(
        db,
        "SELECT box_id, peer_user_id, out, body FROM message_search"
        " WHERE owner_user_id = $1 ORDER BY box_id",
        owner,
    )


async def events(db: Db, user: int) -> list[tuple[Any, ...]]:
    return await rows(
        db,
        "SELECT pts, pts_count, event_type, peer_user_id, box_ids FROM user_update_events"
        " WHERE user_id = $1 ORDER BY pts",
        user,
    )


async def pushes(db: Db, user: int) -> list[tuple[Any, ...]]:
    return await rows(
        db,
        "SELECT pts, exclude_auth_key_id, exclude_session_id FROM dispatch_outbox"
        " WHERE target_user_id = $1 ORDER BY id",
        user,
    )


async def dialogs(db: Db, user: int) -> list[tuple[Any, ...]]:
    return await rows(
        db,
        "SELECT peer_user_id, top_message, top_message_date, unread_count FROM dialogs"
        " WHERE user_id = $1 ORDER BY peer_user_id",
        user,
    )


@pytest.mark.parametrize("sender_is_smaller", [True, False])
async def test_a_send_writes_both_sides(db: Db, sender_is_smaller: bool) -> None:
    a, b = users()
    sender, recipient = (a, b) if sender_is_smaller else (b, a)
    first = await send(db, params(sender, recipient, 1, media_unread=True))
    second = await send(db, params(sender, recipient, 2))
    assert (first.duplicate, first.sender_box, first.sender_pts) == (False, 1, 1)
    assert (first.recipient_box, first.recipient_pts, first.date) == (1, 1, DATE + 1)
    assert first.recipient_folder_id == 0
    assert first.sender_bar_closed is False
    assert second.message_id > first.message_id

    assert await boxes(db, sender) == [
        (1, recipient, sender, True, None, False),
        (2, recipient, sender, True, None, False),
    ]
    assert await boxes(db, recipient) == [
        (1, sender, sender, False, None, True),
        (2, sender, sender, False, None, False),
    ]
    assert await searchable(db, sender) == [
        (1, recipient, True, "message 1"),
        (2, recipient, True, "message 2"),
    ]
    assert await searchable(db, recipient) == [
        (1, sender, False, "message 1"),
        (2, sender, False, "message 2"),
    ]
    assert await events(db, sender) == [
        (1, 1, "new_message", recipient, [1]),
        (2, 1, "new_message", recipient, [2]),
    ]
    assert await events(db, recipient) == [
        (1, 1, "new_message", sender, [1]),
        (2, 1, "new_message", sender, [2]),
    ]
    # only the sender's own session is left out of the push
    assert await pushes(db, sender) == [(1, 7, 8), (2, 7, 8)]
    assert await pushes(db, recipient) == [(1, None, None), (2, None, None)]
    # a new dialog starts unread at 1 for the recipient, and counts on from there
    assert await dialogs(db, sender) == [(recipient, 2, DATE + 2, 0)]
    assert await dialogs(db, recipient) == [(sender, 2, DATE + 2, 2)]


async def test_a_send_reports_the_recipients_folder_and_the_senders_bar(db: Db) -> None:
    sender, recipient = users()
    await send(db, params(sender, recipient, 1))
    await db.pool.execute(
        "UPDATE dialogs SET folder_id = 1 WHERE user_id = $1 AND peer_user_id = $2",
        recipient,
        sender,
    )
    await db.pool.execute(
        "UPDATE dialogs SET peer_settings_hidden = true WHERE user_id = $1 AND peer_user_id = $2",
        sender,
        recipient,
    )
    result = await send(db, params(sender, recipient, 2))
    assert result.recipient_folder_id == 1
    assert result.sender_bar_closed is True
    # the other way round, the sender's bar and folder are not the recipient's
    back = await send(db, params(recipient, sender, 3))
    assert back.recipient_folder_id == 0
    assert back.sender_bar_closed is False


async def test_a_send_to_oneself_writes_one_side(db: Db) -> None:
    me, _ = users()
    result = await send(db, params(me, me, 1))
    assert (result.sender_box, result.sender_pts) == (1, 1)
    assert result.sender_bar_closed is False  # the one dialog is the sender's: not NULL
    assert (result.recipient_box, result.recipient_pts, result.recipient_folder_id) == (
        None,
        None,
        None,
    )
    assert await boxes(db, me) == [(1, me, me, True, None, False)]
    assert await searchable(db, me) == [(1, me, True, "message 1")]
    assert await events(db, me) == [(1, 1, "new_message", me, [1])]
    assert await pushes(db, me) == [(1, 7, 8)]
    assert await dialogs(db, me) == [(me, 1, DATE + 1, 0)]


async def test_a_recipient_who_blocked_the_sender_gets_only_a_noop(db: Db) -> None:
    sender, recipient = users()
    await db.pool.execute(
        "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)",
        recipient,
        sender,
    )
    result = await send(db, params(sender, recipient, 1))
    assert (result.duplicate, result.sender_box, result.sender_pts) == (False, 1, 1)
    assert result.sender_bar_closed is False  # read from the sender's row alone
    assert (result.recipient_box, result.recipient_pts, result.recipient_folder_id) == (
        None,
        None,
        None,
    )
    assert await boxes(db, sender) == [(1, recipient, sender, True, None, False)]
    assert await boxes(db, recipient) == []
    assert await searchable(db, recipient) == []
    assert await events(db, recipient) == [(1, 1, "noop", None, None)]
    assert await pushes(db, sender) == [(1, 7, 8)]
    assert await pushes(db, recipient) == []
    assert await dialogs(db, sender) == [(recipient, 1, DATE + 1, 0)]
    assert await dialogs(db, recipient) == []


async def test_a_send_with_no_recipient_pts_writes_the_senders_side_only(db: Db) -> None:
    sender, recipient = users()
    result = await send(db, params(sender, recipient, 1, recipient_pts=None, recipient_box=None))
    assert result.recipient_box is None
    assert (result.recipient_folder_id, result.sender_bar_closed) == (None, False)
    assert await boxes(db, recipient) == []
    assert await events(db, recipient) == []
    assert await dialogs(db, recipient) == []
    assert await pushes(db, sender) == [(1, 7, 8)]


async def test_a_retried_send_answers_with_the_original_and_fills_the_new_pts(db: Db) -> None:
    sender, recipient = users()
    original = await send(db, params(sender, recipient, 1))
    retry = await send(db, params(sender, recipient, 2, random_id=1001))
    assert retry.duplicate
    assert (retry.message_id, retry.sender_box, retry.sender_pts, retry.date) == (
        original.message_id,
        1,
        1,
        DATE + 1,
    )
    assert (retry.recipient_box, retry.recipient_folder_id, retry.sender_bar_closed) == (
        None,
        None,
        None,
    )
    assert await events(db, sender) == [
        (1, 1, "new_message", recipient, [1]),
        (2, 1, "noop", None, None),
    ]
    assert await events(db, recipient) == [
        (1, 1, "new_message", sender, [1]),
        (2, 1, "noop", None, None),
    ]
    assert len(await boxes(db, sender)) == len(await boxes(db, recipient)) == 1
    assert await dialogs(db, recipient) == [(sender, 1, DATE + 1, 1)]
    assert await pushes(db, recipient) == [(1, None, None)]


async def test_a_reply_points_at_each_owners_own_box(db: Db) -> None:
    sender, recipient = users()
    # the recipient's box ids run ahead of the sender's
    await send(db, params(recipient, sender, 1, sender_box=5, recipient_box=1))
    reply = await send(db, params(sender, recipient, 2, sender_box=2, recipient_box=6, reply_to=1))
    assert reply.recipient_box == 6
    assert (await boxes(db, sender))[-1] == (2, recipient, sender, True, 1, False)
    assert (await boxes(db, recipient))[-1] == (6, sender, sender, False, 5, False)


async def test_a_reply_to_a_box_not_in_the_chat_is_refused_and_writes_nothing(db: Db) -> None:
    sender, recipient = users()
    with pytest.raises(refusals.ReplyMessageIdInvalid):
        await send(db, params(sender, recipient, 1, reply_to=9))
    assert await boxes(db, sender) == []
    assert await dialogs(db, sender) == []


async def test_an_album_with_a_reply_writes_every_message_on_both_sides(db: Db) -> None:
    sender, recipient = users()
    await send(db, params(sender, recipient, 1))
    batch = [
        params(sender, recipient, n, grouped_id=77, reply_to=1 if n == 2 else None)
        for n in (2, 3, 4)
    ]
    async with db.pool.acquire() as conn, conn.transaction():
        results = await messages_store.send_private_messages_txn(conn, batch)
    assert [(r.sender_box, r.recipient_box, r.duplicate) for r in results] == [
        (2, 2, False),
        (3, 3, False),
        (4, 4, False),
    ]
    assert [b[4] for b in await boxes(db, recipient)] == [None, 1, None, None]
    assert [e[0] for e in await events(db, recipient)] == [1, 2, 3, 4]
    assert [p[0] for p in await pushes(db, sender)] == [1, 2, 3, 4]
    assert await dialogs(db, recipient) == [(sender, 4, DATE + 4, 4)]


async def test_held_sends_write_held_outbox_rows_on_both_sides(db: Db) -> None:
    sender, recipient = users()
    await send(db, params(sender, recipient, 1, outbox_hold=30.0))
    due = await rows(
        db,
        "SELECT target_user_id, available_at > now() + interval '20 seconds' FROM dispatch_outbox"
        " WHERE target_user_id = ANY ($1::bigint[]) ORDER BY target_user_id",
        [sender, recipient],
    )
    assert due == [(sender, True), (recipient, True)]


async def _waiting(db: Db, pid: int) -> bool:
    return bool(
        await db.pool.fetchval(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid
        )
    )


@pytest.mark.parametrize("sender_is_smaller", [True, False])
async def test_a_send_locks_the_smaller_users_dialog_first(db: Db, sender_is_smaller: bool) -> None:
    a, b = users()
    sender, recipient = (a, b) if sender_is_smaller else (b, a)
    await send(db, params(sender, recipient, 1))  # both dialogs exist
    smaller, larger = a, b
    async with db.pool.acquire() as holder, db.pool.acquire() as sending:
        # hold the larger user's dialog: the send must stop there, holding the smaller's
        tx = holder.transaction()
        await tx.start()
        try:
            await holder.execute(
                "SELECT 1 FROM dialogs WHERE user_id = $1 AND peer_user_id = $2 FOR UPDATE",
                larger,
                smaller,
            )
            pid = sending.get_server_pid()

            async def blocked_send() -> SendResult:
                async with sending.transaction():
                    return await messages_store.send_private_message_txn(
                        sending, params(sender, recipient, 2)
                    )

            task = asyncio.create_task(blocked_send())
            while not await _waiting(db, pid):
                assert not task.done(), task.result()
                await asyncio.sleep(0.01)
            with pytest.raises(asyncpg.LockNotAvailableError):
                async with db.pool.acquire() as probe, probe.transaction():
                    await probe.execute(
                        "SELECT 1 FROM dialogs WHERE user_id = $1 AND peer_user_id = $2"
                        "   FOR UPDATE NOWAIT",
                        smaller,
                        larger,
                    )
        finally:
            await tx.rollback()
        result = await task
    assert result.sender_box == 2


async def _retry_racing_original(
    db: Db, sender: int, recipient: int, *, commit: bool
) -> tuple[SendResult, SendResult]:
    """The original send (pts 1) in a transaction, and a retry of it (same random_id,
    pts 2) on another connection that waits for it; the original then commits or rolls
    back. The original's and the retry's results."""
    async with db.pool.acquire() as first, db.pool.acquire() as second:
        tx = first.transaction()
        await tx.start()
        try:
            original = await messages_store.send_private_message_txn(
                first, params(sender, recipient, 1)
            )
            pid = second.get_server_pid()

            async def retry() -> SendResult:
                async with second.transaction():
                    return await messages_store.send_private_message_txn(
                        second, params(sender, recipient, 2, random_id=1001)
                    )

            task = asyncio.create_task(retry())
            while not await _waiting(db, pid):  # it waits for the original to end
                assert not task.done(), task.result()
                await asyncio.sleep(0.01)
        except BaseException:
            await tx.rollback()
            raise
        if commit:
            await tx.commit()
        else:
            await tx.rollback()
        return original, await task


async def test_a_retry_racing_its_uncommitted_original_gets_the_duplicate_answer(
    db: Db,
) -> None:
    sender, recipient = users()
    original, result = await _retry_racing_original(db, sender, recipient, commit=True)
    assert result.duplicate
    assert (result.message_id, result.sender_box, result.sender_pts) == (
        original.message_id,
        1,
        1,
    )
    assert await events(db, sender) == [
        (1, 1, "new_message", recipient, [1]),
        (2, 1, "noop", None, None),
    ]


async def test_a_retry_racing_an_original_that_rolls_back_sends_the_message(db: Db) -> None:
    sender, recipient = users()
    _original, result = await _retry_racing_original(db, sender, recipient, commit=False)
    assert not result.duplicate
    assert (result.sender_box, result.sender_pts) == (2, 2)
    assert await boxes(db, sender) == [(2, recipient, sender, True, None, False)]
    assert await events(db, sender) == [(2, 1, "new_message", recipient, [2])]


async def test_the_message_rows_only_unique_keys_are_the_id_and_the_random_id(db: Db) -> None:
    # The send's ON CONFLICT names no target (0017): it holds only while a conflict
    # can come from nothing but the random_id (the id comes from the sequence). A new
    # unique index on private_messages must name the target again.
    keys = await rows(
        db,
        """
        SELECT array_agg(a.attname::text ORDER BY k.ord)
          FROM pg_index i
          CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
         WHERE i.indrelid = 'private_messages'::regclass AND i.indisunique
         GROUP BY i.indexrelid
         ORDER BY 1
        """,
    )
    assert keys == [(["sender_user_id", "id"],), (["sender_user_id", "random_id"],)]
    nextval = await db.pool.fetchval(
        "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef"
        " WHERE adrelid = 'private_messages'::regclass"
        "   AND adnum = (SELECT attnum FROM pg_attribute"
        "                 WHERE attrelid = 'private_messages'::regclass AND attname = 'id')"
    )
    assert nextval == "nextval('private_messages_id_seq'::regclass)"


async def test_a_search_row_needs_its_body(db: Db) -> None:
    sender, recipient = users()
    await send(db, params(sender, recipient, 1))
    # a sent message's rows carry its body and no word vector
    assert await rows(
        db,
        "SELECT body, terms FROM message_search WHERE owner_user_id = ANY ($1::bigint[])",
        [sender, recipient],
    ) == [("message 1", None), ("message 1", None)]
    # and a writer that forgets the body is refused, not left unsearchable
    with pytest.raises(asyncpg.NotNullViolationError):
        await db.pool.execute(
            "INSERT INTO message_search (owner_user_id, box_id, peer_user_id, out, date)"
            " VALUES ($1, 2, $2, true, $3)",
            sender,
            recipient,
            DATE,
        )


async def test_no_partition_of_the_message_rows_has_a_unique_key_of_its_own(db: Db) -> None:
    # The targetless ON CONFLICT (0017) takes every unique index of the partition the
    # row is routed to: one made on a partition alone would be swallowed there too.
    keys = await rows(
        db,
        """
        SELECT p.inhrelid::regclass::text,
               count(*) FILTER (WHERE i.indisunique),
               count(*) FILTER (WHERE i.indisunique AND parent.inhparent IS NOT NULL)
          FROM pg_inherits p
          JOIN pg_index i ON i.indrelid = p.inhrelid
          LEFT JOIN pg_inherits parent ON parent.inhrelid = i.indexrelid
         WHERE p.inhparent = 'private_messages'::regclass
         GROUP BY p.inhrelid
        """,
    )
    # each partition's unique indexes: exactly the two of the parent, attached to them
    assert len(keys) >= 2
    assert {(unique, attached) for _name, unique, attached in keys} == {(2, 2)}
