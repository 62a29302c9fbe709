"""SQL for photos and documents (the stored objects; their bytes are blobs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from telesrv.store.db import Executor
from telesrv.store.rows import from_row


@dataclass(frozen=True)
class SizeRow:
    """One stored rendition of a photo or thumbnail."""

    type: str
    w: int
    h: int
    size: int
    blob: str

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "w": self.w, "h": self.h, "size": self.size, "blob": self.blob}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> SizeRow:
        return cls(
            type=str(value["type"]),
            w=int(value["w"]),
            h=int(value["h"]),
            size=int(value["size"]),
            blob=str(value["blob"]),
        )


@dataclass(frozen=True)
class PhotoRow:
    id: int
    access_hash: int
    file_reference: bytes
    owner_user_id: int
    date: int
    dc_id: int
    has_stickers: bool
    stripped: bytes | None
    sizes: list[Any]  # jsonb: SizeRow.to_json() values

    def size_rows(self) -> list[SizeRow]:
        return [SizeRow.from_json(s) for s in self.sizes]


# The data centre every stored photo and document is in: the server is one.
DC_ID = 2


@dataclass(frozen=True)
class DocumentRow:
    id: int
    access_hash: int
    file_reference: bytes
    owner_user_id: int
    date: int
    dc_id: int
    mime_type: str
    size: int
    blob: str
    attributes: list[bytes]
    thumbs: list[Any]  # jsonb: SizeRow.to_json() values
    stripped: bytes | None
    # Uploaded to be shown as a plain file / as a video without sound.
    force_file: bool = False
    nosound: bool = False

    def thumb_rows(self) -> list[SizeRow]:
        return [SizeRow.from_json(s) for s in self.thumbs]


async def insert_photo(db: Executor, photo: PhotoRow) -> None:
    await db.execute(
        """
        INSERT INTO photos (id, access_hash, file_reference, owner_user_id, date, dc_id,
                            has_stickers, stripped, sizes)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
        """,
        photo.id,
        photo.access_hash,
        photo.file_reference,
        photo.owner_user_id,
        photo.date,
        photo.dc_id,
        photo.has_stickers,
        photo.stripped,
        photo.sizes,
    )


async def insert_document(db: Executor, document: DocumentRow) -> None:
    await db.execute(
        """
        INSERT INTO documents (id, access_hash, file_reference, owner_user_id, date, dc_id,
                               mime_type, size, blob, attributes, thumbs, stripped,
                               force_file, nosound)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
        """,
        document.id,
        document.access_hash,
        document.file_reference,
        document.owner_user_id,
        document.date,
        document.dc_id,
        document.mime_type,
        document.size,
        document.blob,
        document.attributes,
        document.thumbs,
        document.stripped,
        document.force_file,
        document.nosound,
    )


async def get_photo(db: Executor, photo_id: int) -> PhotoRow | None:
    row = await db.fetchrow(
        """
        SELECT id, access_hash, file_reference, owner_user_id, date, dc_id, has_stickers,
               stripped, sizes
          FROM photos WHERE id = $1
        """,
        photo_id,
    )
    return None if row is None else from_row(PhotoRow, row)


async def get_document(db: Executor, document_id: int) -> DocumentRow | None:
    row = await db.fetchrow(
        """
        SELECT id, access_hash, file_reference, owner_user_id, date, dc_id, mime_type, size,
               blob, attributes, thumbs, stripped, force_file, nosound
          FROM documents WHERE id = $1
        """,
        document_id,
    )
    return None if row is None else from_row(DocumentRow, row)


async def media_holding(
    db: Executor, user_id: int, kind: str, media_id: int, *, distributed: bool = False
) -> bool | None:
    """How the user holds this photo or document (``kind`` as in a message's snapshot)
    through the undeleted boxes that show a message carrying it: None for not at all,
    True when one of those messages may be forwarded, False when all are protected
    (noforwards). Only the user's own messages are looked at (a private message is
    the sender's or the recipient's), so the cost is that of the user's copies, not
    of every copy of a much forwarded file.

    ``distributed`` (Citus): a message the user received is on its sender's shard, so
    the messages carrying the file are read first, in a subquery Citus runs on every
    shard before the join (OFFSET 0), then joined with the user's boxes on the user's
    shard."""
    return await db.fetchval(  # type: ignore[no-any-return]
        _MEDIA_HOLDING_DISTRIBUTED if distributed else _MEDIA_HOLDING,
        user_id,
        kind,
        media_id,
    )


_MEDIA_HOLDING = """
SELECT bool_or(NOT b.noforwards)
  FROM private_messages m
  JOIN message_boxes b ON b.sender_user_id = m.sender_user_id
                      AND b.message_id = m.id
 WHERE m.media_id = $3 AND m.media->>'kind' = $2
   AND (m.sender_user_id = $1 OR m.recipient_user_id = $1)
   AND b.owner_user_id = $1 AND NOT b.deleted
"""

_MEDIA_HOLDING_DISTRIBUTED = """
SELECT bool_or(NOT b.noforwards)
  FROM (SELECT m.sender_user_id, m.id FROM private_messages m
         WHERE m.media_id = $3 AND m.media->>'kind' = $2
           AND (m.sender_user_id = $1 OR m.recipient_user_id = $1)
        OFFSET 0) m
  JOIN message_boxes b ON b.sender_user_id = m.sender_user_id
                      AND b.message_id = m.id
 WHERE b.owner_user_id = $1 AND NOT b.deleted
"""


async def referenced_blobs(db: Executor, keys: list[str]) -> set[str]:
    """Which of ``keys`` a photo size, a document or a document thumbnail uses.

    One pass over each table per call (the key list is hashed), so callers pass keys in
    batches of some thousands."""
    rows = await db.fetch(
        """
        SELECT DISTINCT ref FROM (
            SELECT blob AS ref FROM documents WHERE blob = ANY($1::text[])
            UNION ALL
            SELECT t.value ->> 'blob' FROM documents, jsonb_array_elements(thumbs) AS t
             WHERE t.value ->> 'blob' = ANY($1::text[])
            UNION ALL
            SELECT s.value ->> 'blob' FROM photos, jsonb_array_elements(sizes) AS s
             WHERE s.value ->> 'blob' = ANY($1::text[])
        ) AS refs
        """,
        keys,
    )
    return {str(r["ref"]) for r in rows}


async def delete_unsent_media_txn(db: Executor, dated_before: int, limit: int) -> int:
    """Delete up to ``limit`` photos and up to ``limit`` documents dated before
    ``dated_before`` (unix time) that no message carries: uploadMedia results that were
    never sent. Their blobs become unused; the blob collector removes them later.
    Photos that are someone's profile or personal photo are kept (store/profile_photos.py);
    one that stops being either is removed by a later pass.

    Works once private messages name the photo or document they carry
    (``private_messages.media_id``); a server whose messages do not is not asked to
    run it. A send that reuses an existing object takes a share lock on its row
    before inserting the message (``SELECT ... FOR SHARE``), so the row is either
    deleted first (and the send fails as for an unknown object) or skipped here
    (locked rows are passed over; NOT EXISTS then sees the message next time). The
    check looks messages up by media_id, which wants an index on that column."""
    deleted = await db.fetchval(
        """
        WITH doomed_photos AS (
            SELECT p.id FROM photos p
             WHERE p.date < $1
               AND NOT EXISTS (SELECT 1 FROM private_messages m WHERE m.media_id = p.id)
               AND NOT EXISTS (SELECT 1 FROM profile_photos pp WHERE pp.photo_id = p.id)
               AND NOT EXISTS (SELECT 1 FROM personal_photos pe WHERE pe.photo_id = p.id)
             ORDER BY p.date
             LIMIT $2
               FOR UPDATE SKIP LOCKED
        ), doomed_documents AS (
            SELECT d.id FROM documents d
             WHERE d.date < $1
               AND NOT EXISTS (SELECT 1 FROM private_messages m WHERE m.media_id = d.id)
             ORDER BY d.date
             LIMIT $2
               FOR UPDATE SKIP LOCKED
        ), gone_photos AS (
            DELETE FROM photos WHERE id IN (SELECT id FROM doomed_photos) RETURNING 1
        ), gone_documents AS (
            DELETE FROM documents WHERE id IN (SELECT id FROM doomed_documents) RETURNING 1
        )
        SELECT (SELECT count(*) FROM gone_photos) + (SELECT count(*) FROM gone_documents)
        """,
        dated_before,
        limit,
    )
    return int(deleted)
