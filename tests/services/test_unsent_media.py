"""Photos and documents no message carries are deleted once older than the ttl; those a
message carries, and recent ones, stay; deletion goes in bounded batches.

A send naming a row that was deleted fails with MEDIA_INVALID instead of carrying a
file that is gone."""

from __future__ import annotations

import secrets

import pytest

from telesrv.parts import Parts
from telesrv.services.blobs import MAX_BATCH, UnsentMediaCollector, UnsentMediaLimits
from telesrv.store import files as file_store
from telesrv.store.db import Db
from telesrv.store.files import DocumentRow, PhotoRow

NOW = 1_900_000_000
TTL = 24 * 3600


@pytest.fixture
async def media_db(db: Db) -> Db:
    return db


async def photo(db: Db, date: int) -> int:
    row = PhotoRow(
        id=secrets.randbits(62) + 1, access_hash=1, file_reference=b"r", owner_user_id=1,
        date=date, dc_id=2, has_stickers=False, stripped=None,
        sizes=[{"type": "m", "w": 1, "h": 1, "size": 1, "blob": secrets.token_hex(32)}],
    )  # fmt: skip
    await file_store.insert_photo(db.pool, row)
    return row.id


async def document(db: Db, date: int) -> int:
    row = DocumentRow(
        id=secrets.randbits(62) + 1, access_hash=1, file_reference=b"r", owner_user_id=1,
        date=date, dc_id=2, mime_type="application/octet-stream", size=1,
        blob=secrets.token_hex(32), attributes=[], thumbs=[], stripped=None,
    )  # fmt: skip
    await file_store.insert_document(db.pool, row)
    return row.id


async def carried_by_a_message(db: Db, media_id: int) -> None:
    await db.pool.execute(
        """
        INSERT INTO private_messages (sender_user_id, recipient_user_id, random_id, date,
                                      message, media_id)
        VALUES (1, 2, $1, $2, '', $3)
        """,
        secrets.randbits(62),
        NOW,
        media_id,
    )


async def exists(db: Db, table: str, row_id: int) -> bool:
    query = {
        "photos": "SELECT EXISTS (SELECT 1 FROM photos WHERE id = $1)",
        "documents": "SELECT EXISTS (SELECT 1 FROM documents WHERE id = $1)",
    }[table]
    return bool(await db.pool.fetchval(query, row_id))


async def test_unsent_media_past_the_ttl_goes_the_rest_stays(media_db: Db) -> None:
    db = media_db
    await db.pool.execute("DELETE FROM photos; DELETE FROM documents")
    old_photo, old_document = await photo(db, NOW - TTL - 1), await document(db, NOW - TTL - 1)
    sent_photo, sent_document = await photo(db, NOW - TTL - 1), await document(db, 0)
    await carried_by_a_message(db, sent_photo)
    await carried_by_a_message(db, sent_document)
    at_ttl = await document(db, NOW - TTL)  # exactly the ttl old: kept
    fresh = await photo(db, NOW)
    collector = UnsentMediaCollector(db, UnsentMediaLimits(ttl=TTL))
    assert await collector.collect(NOW) == 2
    assert not await exists(db, "photos", old_photo)
    assert not await exists(db, "documents", old_document)
    for table, row_id in (
        ("photos", sent_photo), ("documents", sent_document),
        ("documents", at_ttl), ("photos", fresh),
    ):  # fmt: skip
        assert await exists(db, table, row_id), (table, row_id)
    assert await collector.collect(NOW + 1) == 1  # now past the ttl
    assert not await exists(db, "documents", at_ttl)


async def test_unsent_media_goes_in_bounded_batches(media_db: Db) -> None:
    db = media_db
    await db.pool.execute("DELETE FROM photos; DELETE FROM documents")
    for _ in range(5):
        await document(db, 0)
    one_batch = await file_store.delete_unsent_media_txn(db.pool, NOW, 2)
    assert one_batch == 2
    collector = UnsentMediaCollector(db, UnsentMediaLimits(ttl=TTL, batch=2))
    assert await collector.collect(NOW) == 3


def test_unsent_media_limits_at_and_past_their_bounds() -> None:
    UnsentMediaLimits(ttl=3600.0, batch=1)
    UnsentMediaLimits(batch=MAX_BATCH)
    with pytest.raises(ValueError, match="ttl"):
        UnsentMediaLimits(ttl=3599.0)
    for batch in (0, MAX_BATCH + 1):
        with pytest.raises(ValueError, match="batch"):
            UnsentMediaLimits(batch=batch)


async def test_a_send_naming_a_deleted_row_fails_and_takes_no_message(
    media_db: Db, parts: Parts
) -> None:
    """The collector and a send of the same row are ordered by the row lock: a send
    after the deletion is refused (MEDIA_INVALID), a send before it keeps the row."""
    from telesrv.services.errors import MediaInvalid
    from telesrv.services.message_media import MessageMedia
    from telesrv.services.messages import Origin, OutgoingText

    db = media_db
    await db.pool.execute("DELETE FROM photos; DELETE FROM documents")
    messages = parts.messages
    sender, recipient = 8_100_001, 8_100_002
    kept = await file_store.get_photo(db.pool, await photo(db, 0))
    gone = await file_store.get_document(db.pool, await document(db, 0))
    assert kept is not None and gone is not None
    origin = Origin(auth_key_id=1, session_id=1)
    sent = await messages.send_text(
        OutgoingText(sender, recipient, 1, "", media=MessageMedia.photo(kept)),
        origin,
        now=NOW,
    )
    assert sent.message.box_id == 1
    collector = UnsentMediaCollector(db, UnsentMediaLimits(ttl=TTL))
    assert await collector.collect(NOW) == 1  # the document; the sent photo stays
    assert await exists(db, "photos", kept.id)
    with pytest.raises(MediaInvalid):
        await messages.send_text(
            OutgoingText(sender, recipient, 2, "", media=MessageMedia.document(gone, "document")),
            origin,
            now=NOW,
        )
    count = await db.pool.fetchval(
        "SELECT count(*) FROM private_messages WHERE sender_user_id = $1", sender
    )
    assert count == 1
