"""A group's sends written set by set (telesrv_send_group, through send_group_txn) leave
the same rows, and get the same answers, as the same sends written one at a time by the
send function: in every table a send writes, for a group that holds each case the
function tells apart (a plain send, two sends in one chat and one back, saved messages,
a reply, a bad reply, media, media gone, a retry, a random_id twice, a block, a send
with nothing for the recipient, held and unheld outbox rows)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from telesrv.store import messages as messages_store
from telesrv.store import refusals
from telesrv.store.db import Db
from telesrv.store.messages import SendParams, SendResult
from telesrv.store.refusal import DomainError

from .test_send_function import params

PHOTO_ID = 9_400_000_001
GONE_DOCUMENT_ID = 9_400_000_002
DOCUMENT_ID = 9_400_000_003
_worlds = itertools.count(9_500_000, 100)

Outcome = SendResult | Exception


def world() -> list[int]:
    """Ten fresh user ids."""
    base = next(_worlds)
    return [base + k for k in range(10)]


async def set_up(db: Db, u: list[int]) -> None:
    """What the group meets: a message u0 -> u1 (box 1 both sides) to reply to and to
    retry, and u5 blocking u4."""
    async with db.pool.acquire() as conn, conn.transaction():
        await messages_store.send_private_message_txn(conn, params(u[0], u[1], 1))
    await db.pool.execute(
        "INSERT INTO contact_blocks (owner_user_id, blocked_user_id) VALUES ($1, $2)", u[5], u[4]
    )


def group(u: list[int]) -> list[SendParams]:
    photo = {"kind": "photo", "id": PHOTO_ID}
    return [
        params(u[0], u[1], 2),  # a plain send
        params(u[0], u[1], 3, outbox_hold=30.0),  # the same chat again, held
        params(u[1], u[0], 4, random_id=5000),  # and one back
        params(u[2], u[2], 1, recipient_pts=None, recipient_box=None),  # saved messages
        params(u[0], u[1], 5, reply_to=1, quote_text="message 1", quote_offset=0),
        params(u[0], u[1], 6, reply_to=99),  # a bad reply: refused
        params(
            u[2],
            u[3],
            2,
            media=photo,
            media_id=PHOTO_ID,
            media_kind="photo",
            message="",
            media_unread=True,
        ),
        params(
            u[2],
            u[3],
            3,
            media={"kind": "document", "id": GONE_DOCUMENT_ID},
            media_id=GONE_DOCUMENT_ID,
            media_kind="document",
        ),
        # A snapshot that does not say what it is names a document.
        params(u[2], u[3], 4, media={"id": DOCUMENT_ID}, media_id=DOCUMENT_ID),
        params(u[0], u[1], 7, random_id=params(u[0], u[1], 1).random_id),  # a retry
        params(u[6], u[7], 1, random_id=77),
        params(u[6], u[7], 2, random_id=77),  # the same random_id in the group
        params(u[4], u[5], 1),  # to a recipient who blocked the sender
        params(u[8], u[9], 1, recipient_pts=None, recipient_box=None),  # nothing for u9
        params(
            u[9],
            u[8],
            1,
            recipient_pts=2,
            recipient_box=2,
            silent=True,
            noforwards=True,
            entities=b"\x01",
        ),
    ]


async def one_by_one(db: Db, sends: list[SendParams]) -> list[Outcome]:
    """The sends in order, each alone by the send function, in one transaction; a refusal
    undoes its own send only."""
    outcomes: list[Outcome] = []
    async with db.pool.acquire() as conn, conn.transaction():
        for p in sends:
            try:
                async with conn.transaction():
                    outcomes.append(await messages_store.send_private_message_txn(conn, p))
            except DomainError as e:
                outcomes.append(e)
    return outcomes


async def together(db: Db, sends: list[SendParams]) -> list[Outcome]:
    async with db.pool.acquire() as conn, conn.transaction():
        return await messages_store.send_group_txn(conn, sends)


async def tables(db: Db, u: list[int]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the sends wrote, user ids told by their place in the world and message
    ids by their order, so that two worlds compare."""
    place = {user: k for k, user in enumerate(u)}
    ids: dict[int, int] = {}

    def mapped(value: Any, column: str) -> Any:
        if column.endswith("user_id") and value in place:
            return f"u{place[value]}"
        if column in ("id", "message_id"):
            return f"m{ids.setdefault(value, len(ids))}"
        return value

    async def read(name: str, query: str) -> list[tuple[Any, ...]]:
        rows = await db.pool.fetch(query, u)
        return sorted(
            (tuple(mapped(r[c], c) for c in r.keys()) for r in rows), key=lambda t: repr(t)
        )

    return {
        "private_messages": await read(
            "private_messages",
            "SELECT id, sender_user_id, recipient_user_id, random_id, date, message, entities,"
            "       fwd_from, quote_text, quote_entities, quote_offset, media, media_id,"
            "       grouped_id FROM private_messages WHERE sender_user_id = ANY($1) ORDER BY id",
        ),
        "message_boxes": await read(
            "message_boxes",
            "SELECT owner_user_id, box_id, peer_user_id, sender_user_id, message_id, out, date,"
            "       reply_to_msg_id, silent, noforwards, media_unread, deleted"
            "  FROM message_boxes WHERE owner_user_id = ANY($1)",
        ),
        "message_search": await read(
            "message_search",
            "SELECT owner_user_id, box_id, peer_user_id, out, date, body, media_kind"
            "  FROM message_search WHERE owner_user_id = ANY($1)",
        ),
        "dialogs": await read(
            "dialogs",
            "SELECT user_id, peer_user_id, top_message, top_message_date, unread_count, folder_id"
            "  FROM dialogs WHERE user_id = ANY($1)",
        ),
        "events": await read(
            "events",
            "SELECT user_id, pts, pts_count, event_type, date, peer_user_id, max_id, box_ids,"
            "       payload FROM user_update_events WHERE user_id = ANY($1)",
        ),
        "outbox": await read(
            "outbox",
            "SELECT target_user_id AS user_id, pts, exclude_auth_key_id, exclude_session_id,"
            "       available_at > now() + interval '10 seconds' AS held"
            "  FROM dispatch_outbox WHERE target_user_id = ANY($1)",
        ),
    }


def answers(outcomes: list[Outcome], u: list[int]) -> list[Any]:
    first_ids: dict[int, int] = {}

    def told(o: Outcome) -> Any:
        if isinstance(o, Exception):
            return type(o).__name__
        message = first_ids.setdefault(o.message_id, len(first_ids))
        return replace(o, message_id=message)

    return [told(o) for o in outcomes]


async def test_a_group_set_by_set_writes_what_its_sends_one_by_one_write(db: Db) -> None:
    await db.pool.execute(
        "INSERT INTO photos (id, access_hash, file_reference, owner_user_id, date, sizes)"
        " VALUES ($1, 1, '\\x00', 1, 1, '[]') ON CONFLICT DO NOTHING",
        PHOTO_ID,
    )
    await db.pool.execute(
        "INSERT INTO documents (id, access_hash, file_reference, owner_user_id, date,"
        "                       mime_type, size, blob, attributes)"
        " VALUES ($1, 1, '\\x00', 1, 1, 'application/octet-stream', 1, 'b', '{}')"
        " ON CONFLICT DO NOTHING",
        DOCUMENT_ID,
    )
    worlds: dict[str, tuple[list[int], list[Outcome]]] = {}
    ways: dict[str, Callable[[Db, list[SendParams]], Any]] = {
        "one by one": one_by_one,
        "together": together,
    }
    for name, way in ways.items():
        u = world()
        await set_up(db, u)
        worlds[name] = (u, await way(db, group(u)))

    (u1, alone), (u2, grouped) = worlds["one by one"], worlds["together"]
    assert answers(grouped, u2) == answers(alone, u1)
    assert [type(o).__name__ for o in grouped] == [
        "SendResult", "SendResult", "SendResult", "SendResult", "SendResult",
        "ReplyMessageIdInvalid", "SendResult", "MediaInvalid", "SendResult", "SendResult",
        "SendResult", "SendResult", "SendResult", "SendResult", "SendResult",
    ]  # fmt: skip
    retry, twice = grouped[9], grouped[11]
    assert isinstance(retry, SendResult) and retry.duplicate
    assert isinstance(twice, SendResult) and twice.duplicate
    blocked = grouped[12]
    assert isinstance(blocked, SendResult) and blocked.recipient_pts is None

    one, other = await tables(db, u1), await tables(db, u2)
    assert one.keys() == other.keys()
    for table in one:
        assert other[table] == one[table], table
    # The group wrote something in every table, and held what it was asked to.
    assert all(one.values())
    assert ("u0", 3, 7, 8, True) in other["outbox"]
    assert ("u1", 3, None, None, True) in other["outbox"]
    assert ("u0", 2, 7, 8, False) in other["outbox"]


async def test_an_album_after_held_lone_sends_in_a_group_is_due_at_once(db: Db) -> None:
    """A group's lone sends ask for their outbox rows to be held (their process pushes
    them), an album in the same transaction does not: its rows are due at once, for the
    outbox workers, whatever the lone sends before it asked."""
    u = world()
    album = [params(u[2], u[3], k, grouped_id=u[2]) for k in (1, 2)]
    async with db.pool.acquire() as conn, conn.transaction():
        outcomes = await messages_store.send_units_txn(
            conn, [[params(u[0], u[1], 1, outbox_hold=30.0)], album]
        )
    assert all(isinstance(o, list) for o in outcomes)
    written = await tables(db, u)
    assert sorted(written["outbox"]) == [
        ("u0", 1, 7, 8, True),
        ("u1", 1, None, None, True),
        ("u2", 1, 7, 8, False),
        ("u2", 2, 7, 8, False),
        ("u3", 1, None, None, False),
        ("u3", 2, None, None, False),
    ]


async def test_a_retry_refused_by_a_race_fails_alone(db: Db) -> None:
    """A retry of a committed reply passes the group's reply check, then the replied-to
    message is deleted by a transaction the group waits for (on the chat's dialog):
    the send function, answering the retry, refuses it. That retry fails alone; the
    group's fresh send commits."""
    u = world()
    await set_up(db, u)
    retry = params(u[0], u[1], 3, random_id=params(u[0], u[1], 1).random_id, reply_to=1)
    fresh = params(u[0], u[1], 2)
    async with db.pool.acquire() as deleter, db.pool.acquire() as conn:
        writer = await conn.fetchval("SELECT pg_backend_pid()")
        deleting = deleter.transaction()
        await deleting.start()
        await deleter.execute(
            "SELECT 1 FROM dialogs WHERE user_id = $1 AND peer_user_id = $2 FOR UPDATE",
            u[0],
            u[1],
        )
        await deleter.execute(
            "UPDATE message_boxes SET deleted = true WHERE owner_user_id = $1 AND box_id = 1",
            u[0],
        )

        async def write() -> list[Outcome]:
            async with conn.transaction():
                return await messages_store.send_group_txn(conn, [retry, fresh])

        group = asyncio.ensure_future(write())
        # The group's statement waits for the dialog the deleter holds.
        while await deleter.fetchval(
            "SELECT wait_event_type IS DISTINCT FROM 'Lock' FROM pg_stat_activity WHERE pid = $1",
            writer,
        ):
            assert not group.done(), group.result()
            await asyncio.sleep(0.01)
        await deleting.commit()
        outcomes = await group
    assert isinstance(outcomes[0], refusals.ReplyMessageIdInvalid)
    assert isinstance(outcomes[1], SendResult) and not outcomes[1].duplicate
    written = await tables(db, u)
    assert [r[1] for r in written["message_boxes"] if r[0] == "u0"] == [1, 2]
