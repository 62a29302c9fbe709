"""A send on Citus through its two per-user halves (store/send_halves.py), each a
function Citus runs whole on its user's shard: between users on two workers, the result,
dense pts logs on both sides, a retry answered as a duplicate with its pts given back as
noops, a recipient who blocked the sender getting nothing, and the commands the
coordinator sends the workers for one send (one call per user and the commit)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from telesrv.store import citus, migrate, send_halves
from telesrv.store.messages import SendParams, SendResult
from telesrv.store.refusal import DomainError

DATE = 1_700_000_000


@pytest.fixture(scope="module")
async def migrated(citus_url: str) -> AsyncIterator[str]:
    conn = await asyncpg.connect(citus_url)
    try:
        await migrate.migrate(conn, partition_count=16)
    finally:
        await conn.close()
    yield citus_url


@pytest.fixture
async def conn(migrated: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(migrated)
    try:
        yield connection
    finally:
        await connection.close()


async def worker_of(conn: asyncpg.Connection, user_id: int) -> str:
    return str(
        await conn.fetchval(
            "SELECT nodename FROM citus_shards"
            " WHERE shardid = get_shard_id_for_distribution_column('dialogs'::regclass,"
            " $1::bigint)",
            user_id,
        )
    )


async def users_on_two_workers(conn: asyncpg.Connection, first: int) -> tuple[int, int]:
    home = await worker_of(conn, first)
    for other in range(first + 1, first + 200):
        if await worker_of(conn, other) != home:
            return first, other
    raise AssertionError("no user on another worker")


def params(sender: int, recipient: int, n: int, pts: tuple[int, int], **kw: Any) -> SendParams:
    base = SendParams(
        sender=sender,
        recipient=recipient,
        random_id=9000 + n,
        date=DATE + n,
        message=f"hello {n}",
        entities=None,
        fwd_from=None,
        silent=False,
        noforwards=False,
        media_unread=False,
        reply_to=None,
        quote_text=None,
        quote_entities=None,
        quote_offset=None,
        sender_pts=pts[0],
        sender_box=pts[0],
        recipient_pts=pts[1],
        recipient_box=pts[1],
        exclude_auth_key_id=None,
        exclude_session_id=None,
    )
    return dataclasses.replace(base, **kw)


async def send(conn: asyncpg.Connection, p: SendParams) -> SendResult:
    async with conn.transaction():
        return await send_halves.send_private_message_halves_txn(conn, p)


async def log_of(conn: asyncpg.Connection, user: int) -> list[tuple[int, str]]:
    rows = await conn.fetch(
        "SELECT pts, event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts", user
    )
    return [(r["pts"], r["event_type"]) for r in rows]


async def test_the_halves_are_delegated_to_their_users_shards(conn: asyncpg.Connection) -> None:
    rows = await conn.fetch(
        "SELECT p.proname::text AS name, d.distribution_argument_index AS arg,"
        " d.force_delegation AS forced, d.colocationid = ("
        "  SELECT colocationid FROM pg_dist_partition"
        "  WHERE logicalrelid = 'dialogs'::regclass) AS colocated"
        " FROM pg_proc p JOIN pg_dist_object d"
        "  ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid"
        " WHERE p.proname = ANY($1::text[])",
        list(citus.DELEGATED),
    )
    assert {r["name"]: (r["arg"], r["forced"], r["colocated"]) for r in rows} == {
        "telesrv_send_sender_half": (0, True, True),
        "telesrv_send_sender_half_or_refusal": (0, True, True),
        "telesrv_send_recipient_half": (0, True, True),
        "telesrv_send_sender_dialog": (0, True, True),
    }


async def test_send_between_users_on_two_workers(conn: asyncpg.Connection) -> None:
    a, b = await users_on_two_workers(conn, 8_000_001)
    first = await send(conn, params(a, b, 1, (1, 1)))
    assert (first.duplicate, first.sender_box, first.sender_pts) == (False, 1, 1)
    assert (first.recipient_box, first.recipient_pts, first.recipient_folder_id) == (1, 1, 0)
    assert first.sender_bar_closed is False
    reply = await send(conn, params(b, a, 2, (2, 2), reply_to=1))
    # b > a: b's dialog written by a third call, after a's.
    assert not reply.duplicate and reply.recipient_box == 2
    assert reply.sender_bar_closed is False
    # The reply points at each side's own box of the replied-to message.
    boxes = await conn.fetch(
        "SELECT owner_user_id, box_id, out, reply_to_msg_id, message_id FROM message_boxes"
        " WHERE owner_user_id = ANY($1::bigint[]) ORDER BY owner_user_id, box_id",
        [a, b],
    )
    assert [(r["owner_user_id"], r["box_id"], r["out"], r["reply_to_msg_id"]) for r in boxes] == [
        (a, 1, True, None),
        (a, 2, False, 1),
        (b, 1, False, None),
        (b, 2, True, 1),
    ]
    assert boxes[0]["message_id"] == boxes[2]["message_id"] == first.message_id
    for owner, peer, unread in ((a, b, 1), (b, a, 1)):
        row = await conn.fetchrow(
            "SELECT top_message, unread_count FROM dialogs WHERE user_id = $1"
            " AND peer_user_id = $2",
            owner,
            peer,
        )
        assert row is not None and tuple(row) == (2, unread)
        assert [
            tuple(r)
            for r in await conn.fetch(
                "SELECT box_id, body FROM message_search WHERE owner_user_id = $1 ORDER BY box_id",
                owner,
            )
        ] == [(1, "hello 1"), (2, "hello 2")]
        assert await log_of(conn, owner) == [(1, "new_message"), (2, "new_message")]
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM dispatch_outbox WHERE target_user_id = $1", owner
            )
            == 2
        )

    # A retry of the first send (its random_id) with new pts: the original, the pts noops.
    again = await send(conn, params(a, b, 1, (3, 3)))
    assert (again.duplicate, again.message_id, again.sender_box, again.sender_pts) == (
        True,
        first.message_id,
        1,
        1,
    )
    assert again.recipient_box is None and again.recipient_pts is None
    for owner in (a, b):
        assert (await log_of(conn, owner))[2:] == [(3, "noop")]
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM message_boxes WHERE owner_user_id = $1", owner
            )
            == 2
        )


async def test_a_recipient_who_blocked_the_sender_gets_nothing(conn: asyncpg.Connection) -> None:
    a, b = await users_on_two_workers(conn, 8_100_001)
    await conn.execute(
        "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)", b, a
    )
    sent = await send(conn, params(a, b, 1, (1, 1)))
    assert not sent.duplicate and sent.sender_box == 1
    assert (sent.recipient_box, sent.recipient_pts, sent.recipient_folder_id) == (None, None, None)
    assert await log_of(conn, a) == [(1, "new_message")]
    assert await log_of(conn, b) == [(1, "noop")]
    for table, column in (("message_boxes", "owner_user_id"), ("dialogs", "user_id")):
        assert await conn.fetchval(f"SELECT count(*) FROM {table} WHERE {column} = $1", b) == 0
    assert (
        await conn.fetchval("SELECT count(*) FROM dispatch_outbox WHERE target_user_id = $1", b)
        == 0
    )


async def commands_of_send(conn: asyncpg.Connection, a: int, b: int, n: int = 1) -> list[str]:
    """The commands the coordinator sends the workers for a send from a to b (the second
    of two, numbered n and n + 1: both dialogs exist, the steady state), each cut at its
    first '('."""
    await send(conn, params(a, b, n, (n, n)))
    commands: list[str] = []

    def listen(_: Any, message: asyncpg.PostgresLogMessage) -> None:
        text = str(message.message)
        if text.startswith("issuing "):
            commands.append(text.removeprefix("issuing ").split("(", 1)[0].strip())

    await conn.execute("SET citus.log_remote_commands = on")
    await conn.execute("SET client_min_messages = log")
    conn.add_log_listener(listen)
    try:
        await send(conn, params(a, b, n + 1, (n + 1, n + 1)))
    finally:
        conn.remove_log_listener(listen)
        await conn.execute("RESET client_min_messages")
        await conn.execute("RESET citus.log_remote_commands")
    return commands


async def test_one_send_is_one_call_per_worker_and_the_commit(conn: asyncpg.Connection) -> None:
    a, b = await users_on_two_workers(conn, 8_200_001)
    commands = await commands_of_send(conn, a, b)
    calls = [c for c in commands if "telesrv_send_" in c]
    assert len(calls) == 2, commands
    assert sorted(c.split()[0] for c in commands) == sorted(
        ["BEGIN", "BEGIN", "SELECT", "SELECT", "PREPARE", "PREPARE", "COMMIT", "COMMIT"]
    ), commands
    # From the larger user id: the sender's dialog in a third call, on the open
    # connection.
    back = await commands_of_send(conn, b, a, 3)
    assert len([c for c in back if "telesrv_send_" in c]) == 3, back
    assert sorted(c.split()[0] for c in back) == sorted(
        ["BEGIN", "BEGIN", "SELECT", "SELECT", "SELECT", "PREPARE", "PREPARE", "COMMIT", "COMMIT"]
    ), back


async def test_two_users_sending_to_each_other_at_once(
    conn: asyncpg.Connection, migrated: str
) -> None:
    """The dialogs are locked in user id order: a->b and b->a (a < b), each past its
    sender's half, cannot deadlock. b->a left its own dialog for later, so a->b's
    recipient half takes b's dialog at once, and b->a's waits for a->b's commit."""
    a, b = await users_on_two_workers(conn, 8_300_001)
    other = await asyncpg.connect(migrated)
    try:
        up, down = params(a, b, 1, (1, 1)), params(b, a, 2, (2, 2))
        tx_up, tx_down = conn.transaction(), other.transaction()
        await tx_up.start()
        await tx_down.start()
        sent_up = await send_halves.sender_half_txn(conn, up)
        sent_down = await send_halves.sender_half_txn(other, down, dialog=False)
        waiting = asyncio.ensure_future(send_halves.recipient_half_txn(other, down, sent_down))
        await send_halves.recipient_half_txn(conn, up, sent_up)
        # b->a's recipient half waits for a's dialog, which a->b holds.
        deadline = asyncio.get_running_loop().time() + 60
        while not await conn.fetchval("SELECT count(*) FROM citus_lock_waits"):
            assert asyncio.get_running_loop().time() < deadline, "b->a never waited"
            await asyncio.sleep(0.05)
        assert not waiting.done()
        await tx_up.commit()
        got = await waiting
        assert got is not None and got["recipient_box"] == 2
        assert await send_halves.sender_dialog_txn(other, down) is False
        await tx_down.commit()
    finally:
        await other.close()
    for owner, peer in ((a, b), (b, a)):
        row = await conn.fetchrow(
            "SELECT top_message, unread_count FROM dialogs WHERE user_id = $1"
            " AND peer_user_id = $2",
            owner,
            peer,
        )
        assert row is not None and tuple(row) == (2, 1)
        assert await log_of(conn, owner) == [(1, "new_message"), (2, "new_message")]


async def test_users_on_one_worker_share_its_connection_and_a_plain_commit(
    conn: asyncpg.Connection,
) -> None:
    """Both halves go over one connection to that worker, even from two of its shards:
    no two-phase commit."""
    a, b = await users_on_one_worker_in_two_shards(conn, 8_400_001)
    commands = await commands_of_send(conn, a, b)
    assert [c.split()[0] for c in commands] == ["BEGIN", "SELECT", "SELECT", "COMMIT"], commands


async def users_on_one_worker_in_two_shards(
    conn: asyncpg.Connection, first: int
) -> tuple[int, int]:
    home = await worker_of(conn, first)
    shard = await shard_of(conn, first)
    for other in range(first + 1, first + 200):
        if await worker_of(conn, other) == home and await shard_of(conn, other) != shard:
            return first, other
    raise AssertionError("no user in another shard of the same worker")


async def shard_of(conn: asyncpg.Connection, user_id: int) -> int:
    return int(
        await conn.fetchval(
            "SELECT get_shard_id_for_distribution_column('dialogs'::regclass, $1::bigint)",
            user_id,
        )
    )


async def test_a_send_with_a_photo_share_locks_the_reference_row(
    conn: asyncpg.Connection,
) -> None:
    """The sender's half runs on a worker and share-locks the photo's row there (a
    reference table); a photo gone refuses the send, leaving nothing."""
    a, b = await users_on_two_workers(conn, 8_600_001)
    await conn.execute(
        "INSERT INTO photos (id, access_hash, file_reference, owner_user_id, date, sizes)"
        " VALUES (77, 1, '\\x00', $1, $2, '[]')",
        a,
        DATE,
    )
    photo = {"kind": "photo", "id": 77}
    # As open_db's connections carry it: jsonb as Python values.
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    sent = await send(conn, params(a, b, 1, (1, 1), media=photo, media_id=77, media_kind="photo"))
    assert not sent.duplicate and sent.recipient_box == 1
    assert (
        await conn.fetchval(
            "SELECT media_kind FROM message_search WHERE owner_user_id = $1 AND box_id = 1", b
        )
        == "photo"
    )
    with pytest.raises(DomainError) as refused:
        await send(conn, params(a, b, 2, (2, 2), media=photo, media_id=78, media_kind="photo"))
    assert type(refused.value).TEMPLATE == "MEDIA_INVALID"
    assert await log_of(conn, a) == [(1, "new_message")]
