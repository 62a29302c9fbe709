"""Albums on real PostgreSQL and Redis: all items are sent or none is, the pts taken for
a refused album become noops on both sides (the logs stay dense), a retry answers the
original messages, and the send rate counts every item before any is sent."""

from __future__ import annotations

import itertools
import secrets
from typing import Any

import pytest
from conftest import MakeParts

from telesrv.parts import Parts
from telesrv.services.errors import FloodWait, MediaInvalid, RandomIdDuplicate
from telesrv.services.message_media import MessageMedia
from telesrv.services.messages import Origin, OutgoingText
from telesrv.store import files as file_store
from telesrv.store.files import DocumentRow, PhotoRow

ORIGIN = Origin(auth_key_id=31, session_id=32)
NOW = 1_900_000_000
_ids = itertools.count(8_300_000)


def new_user() -> int:
    return next(_ids)


async def a_photo(db: Any) -> MessageMedia:
    row = PhotoRow(
        id=secrets.randbits(62) + 1, access_hash=1, file_reference=b"r", owner_user_id=1,
        date=NOW, dc_id=2, has_stickers=False, stripped=None,
        sizes=[{"type": "m", "w": 1, "h": 1, "size": 1, "blob": secrets.token_hex(32)}],
    )  # fmt: skip
    await file_store.insert_photo(db.pool, row)
    return MessageMedia.photo(row)


async def a_gone_document(db: Any) -> MessageMedia:
    """A document row deleted after it was looked up (the unsent-media collector)."""
    row = DocumentRow(
        id=secrets.randbits(62) + 1, access_hash=1, file_reference=b"r", owner_user_id=1,
        date=NOW, dc_id=2, mime_type="application/octet-stream", size=1,
        blob=secrets.token_hex(32), attributes=[], thumbs=[], stripped=None,
    )  # fmt: skip
    await file_store.insert_document(db.pool, row)
    await db.pool.execute("DELETE FROM documents WHERE id = $1", row.id)
    return MessageMedia.document(row, "document")


def album(
    sender: int, recipient: int, media: list[MessageMedia], first_random_id: int
) -> list[OutgoingText]:
    return [
        OutgoingText(
            sender, recipient, first_random_id + k, f"#{k}", media=m, grouped_id=first_random_id
        )
        for k, m in enumerate(media)
    ]


async def log_of(db: Any, user: int) -> list[tuple[int, str]]:
    rows = await db.pool.fetch(
        "SELECT pts, event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts", user
    )
    return [(r["pts"], r["event_type"]) for r in rows]


async def messages_of(db: Any, sender: int) -> int:
    return int(
        await db.pool.fetchval(
            "SELECT count(*) FROM private_messages WHERE sender_user_id = $1", sender
        )
    )


async def test_an_album_failing_on_its_last_item_sends_nothing_and_keeps_pts_dense(
    db: Any, parts: Parts
) -> None:
    messages = parts.messages
    a, b = new_user(), new_user()
    await messages.send_text(OutgoingText(a, b, 1, "before"), ORIGIN, now=NOW)
    photo = await a_photo(db)
    items = album(a, b, [photo, photo, photo, await a_gone_document(db)], 100)
    with pytest.raises(MediaInvalid):
        await messages.send_album(items, ORIGIN, now=NOW)
    assert await messages_of(db, a) == 1  # the text before; no item of the album
    # Every pts taken for the album is a noop on each side, with no gap before or after.
    after = await messages.send_text(OutgoingText(a, b, 2, "after"), ORIGIN, now=NOW)
    expected = [(1, "new_message")] + [(p, "noop") for p in range(2, 6)] + [(6, "new_message")]
    assert await log_of(db, a) == expected
    assert await log_of(db, b) == expected
    assert after.pts == 6 and after.message.box_id == 6
    # The same album without the bad item goes through whole, its ids after the noops.
    sent = await messages.send_album(items[:3], ORIGIN, now=NOW)
    assert [s.message.box_id for _, s in sent] == [7, 8, 9]
    assert [s.pts for _, s in sent] == [7, 8, 9]
    assert [t for _, t in await log_of(db, b)][-3:] == ["new_message"] * 3


async def test_a_retried_album_answers_its_messages_and_takes_no_pts(db: Any, parts: Parts) -> None:
    messages = parts.messages
    a, b = new_user(), new_user()
    photo = await a_photo(db)
    items = album(a, b, [photo] * 3, 200)
    first = await messages.send_album(items, ORIGIN, now=NOW)
    assert [r for r, _ in first] == [200, 201, 202]
    assert not any(s.duplicate for _, s in first)
    again = await messages.send_album(items, ORIGIN, now=NOW + 5)
    assert [(r, s.message.box_id, s.pts) for r, s in again] == [
        (r, s.message.box_id, s.pts) for r, s in first
    ]
    assert all(s.duplicate for _, s in again)
    assert [s.message.message for _, s in again] == ["#0", "#1", "#2"]
    assert len(await log_of(db, a)) == 3 and len(await log_of(db, b)) == 3  # nothing taken
    # Ids of which only some were sent before belong to other messages: refused.
    with pytest.raises(RandomIdDuplicate):
        await messages.send_album(album(a, b, [photo] * 2, 202), ORIGIN, now=NOW)
    assert await messages_of(db, a) == 3


async def test_an_album_counts_every_item_against_the_send_rate(
    db: Any, make_parts: MakeParts
) -> None:
    limit = 12
    messages = make_parts(send_rate_limit=limit).messages
    a, b = new_user(), new_user()
    photo = await a_photo(db)
    for i in range(2):
        await messages.send_text(OutgoingText(a, b, i, "x"), ORIGIN, now=NOW)
    # 2 + 10 = the limit: the album goes through whole.
    sent = await messages.send_album(album(a, b, [photo] * 10, 100), ORIGIN, now=NOW)
    assert len(sent) == 10
    with pytest.raises(FloodWait):  # one more message is past it
        await messages.send_text(OutgoingText(a, b, 50, "x"), ORIGIN, now=NOW)

    c, d = new_user(), new_user()
    for i in range(3):
        await messages.send_text(OutgoingText(c, d, i, "x"), ORIGIN, now=NOW)
    # 3 + 10 is one past the limit: nothing of the album is sent, no pts is taken.
    with pytest.raises(FloodWait) as info:
        await messages.send_album(album(c, d, [photo] * 10, 100), ORIGIN, now=NOW)
    assert 1 <= info.value.seconds <= 60
    assert await messages_of(db, c) == 3
    assert len(await log_of(db, c)) == 3 and len(await log_of(db, d)) == 3
    # The refused album was not counted: the rest of the minute's sends still fit.
    for i in range(limit - 3):
        await messages.send_text(OutgoingText(c, d, 10 + i, "x"), ORIGIN, now=NOW)
