"""SQL for the owner-view address book (contacts) and block list (contact_blocks).

Every query is keyed by the owner, so it touches one hash partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from telesrv.store.db import Executor


@dataclass(frozen=True)
class NewContact:
    user_id: int
    first_name: str
    last_name: str
    by_phone: bool = False  # saved by the contact's number (the owner knows it)


@dataclass(frozen=True)
class ContactRow:
    user_id: int
    mutual: bool


@dataclass(frozen=True)
class BlockRow:
    user_id: int
    blocked_at: datetime


async def save_contacts(db: Executor, owner_user_id: int, contacts: Sequence[NewContact]) -> int:
    """Add contacts or rename existing ones; returns how many rows changed. Once saved
    by phone, a contact stays so."""
    if not contacts:
        return 0
    result = await db.execute(
        """
        INSERT INTO contacts (owner_user_id, contact_user_id, first_name, last_name,
                              saved_by_phone)
        SELECT $1, c.user_id, c.first_name, c.last_name, c.by_phone
          FROM unnest($2::bigint[], $3::text[], $4::text[], $5::boolean[])
               AS c (user_id, first_name, last_name, by_phone)
        ON CONFLICT (owner_user_id, contact_user_id) DO UPDATE
           SET first_name = EXCLUDED.first_name, last_name = EXCLUDED.last_name,
               saved_by_phone = contacts.saved_by_phone OR EXCLUDED.saved_by_phone
         WHERE (contacts.first_name, contacts.last_name, contacts.saved_by_phone)
               IS DISTINCT FROM (EXCLUDED.first_name, EXCLUDED.last_name,
                                 contacts.saved_by_phone OR EXCLUDED.saved_by_phone)
        """,
        owner_user_id,
        [c.user_id for c in contacts],
        [c.first_name for c in contacts],
        [c.last_name for c in contacts],
        [c.by_phone for c in contacts],
    )
    return int(result.rsplit(" ", 1)[-1])


async def add_contact_if_absent(db: Executor, owner_user_id: int, contact: NewContact) -> bool:
    """Add the contact unless it is one already (its saved name stays); whether added."""
    added = await db.fetchval(
        """
        INSERT INTO contacts (owner_user_id, contact_user_id, first_name, last_name,
                              saved_by_phone)
        VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (owner_user_id, contact_user_id) DO NOTHING
        RETURNING true
        """,
        owner_user_id,
        contact.user_id,
        contact.first_name,
        contact.last_name,
        contact.by_phone,
    )
    return bool(added)


async def delete_contacts(
    db: Executor, owner_user_id: int, contact_user_ids: Sequence[int]
) -> list[int]:
    records = await db.fetch(
        """
        DELETE FROM contacts
         WHERE owner_user_id = $1 AND contact_user_id = ANY($2::bigint[])
        RETURNING contact_user_id
        """,
        owner_user_id,
        list(contact_user_ids),
    )
    return [r["contact_user_id"] for r in records]


async def delete_contacts_by_phones(
    db: Executor, owner_user_id: int, phones: Sequence[str]
) -> list[int]:
    records = await db.fetch(
        """
        DELETE FROM contacts c
         USING users u
         WHERE c.owner_user_id = $1 AND c.contact_user_id = u.user_id
           AND u.phone = ANY($2::text[])
        RETURNING c.contact_user_id
        """,
        owner_user_id,
        list(phones),
    )
    return [r["contact_user_id"] for r in records]


async def list_contacts(
    db: Executor, owner_user_id: int, *, distributed: bool = False
) -> list[ContactRow]:
    """The owner's contacts by user id; `mutual` when the contact has the owner too.
    ``distributed`` (Citus): the owner's contacts first, then whose contacts hold the
    owner, each in a subquery of its own."""
    if distributed:
        records = await db.fetch(
            """
            WITH mine AS MATERIALIZED (
                SELECT contact_user_id FROM contacts WHERE owner_user_id = $1
            ), back AS MATERIALIZED (
                SELECT owner_user_id FROM contacts
                 WHERE owner_user_id IN (SELECT contact_user_id FROM mine)
                   AND contact_user_id = $1
            )
            SELECT m.contact_user_id,
                   EXISTS (SELECT 1 FROM back b WHERE b.owner_user_id = m.contact_user_id)
                     AS mutual
              FROM mine m
             ORDER BY m.contact_user_id
            """,
            owner_user_id,
        )
        return [ContactRow(user_id=r["contact_user_id"], mutual=r["mutual"]) for r in records]
    records = await db.fetch(
        """
        SELECT c.contact_user_id,
               EXISTS (SELECT 1 FROM contacts r
                        WHERE r.owner_user_id = c.contact_user_id
                          AND r.contact_user_id = $1) AS mutual
          FROM contacts c
         WHERE c.owner_user_id = $1
         ORDER BY c.contact_user_id
        """,
        owner_user_id,
    )
    return [ContactRow(user_id=r["contact_user_id"], mutual=r["mutual"]) for r in records]


async def count_contacts(db: Executor, owner_user_id: int) -> int:
    count = await db.fetchval(
        "SELECT count(*) FROM contacts WHERE owner_user_id = $1", owner_user_id
    )
    return int(count)


async def block(db: Executor, owner_user_id: int, blocked_user_id: int, now: datetime) -> bool:
    """True when the user was not blocked before."""
    added = await db.fetchval(
        """
        INSERT INTO contact_blocks (owner_user_id, blocked_user_id, created_at)
        VALUES ($1, $2, $3)
        ON CONFLICT (owner_user_id, blocked_user_id) DO NOTHING
        RETURNING 1
        """,
        owner_user_id,
        blocked_user_id,
        now,
    )
    return added is not None


async def unblock(db: Executor, owner_user_id: int, blocked_user_id: int) -> bool:
    """True when the user was blocked."""
    removed = await db.fetchval(
        """
        DELETE FROM contact_blocks
         WHERE owner_user_id = $1 AND blocked_user_id = $2
        RETURNING 1
        """,
        owner_user_id,
        blocked_user_id,
    )
    return removed is not None


async def is_blocked(db: Executor, owner_user_id: int, blocked_user_id: int) -> bool:
    found = await db.fetchval(
        "SELECT 1 FROM contact_blocks WHERE owner_user_id = $1 AND blocked_user_id = $2",
        owner_user_id,
        blocked_user_id,
    )
    return found is not None


async def blocks_between(db: Executor, a: int, b: int) -> tuple[bool, bool]:
    """(a blocked b, b blocked a), in one round trip."""
    row = await db.fetchrow(
        """
        SELECT EXISTS (SELECT 1 FROM contact_blocks
                        WHERE owner_user_id = $1 AND blocked_user_id = $2) AS a_blocked_b,
               EXISTS (SELECT 1 FROM contact_blocks
                        WHERE owner_user_id = $2 AND blocked_user_id = $1) AS b_blocked_a
        """,
        a,
        b,
    )
    assert row is not None
    return bool(row["a_blocked_b"]), bool(row["b_blocked_a"])


async def blocked_page(
    db: Executor, owner_user_id: int, *, offset: int, limit: int
) -> tuple[int, list[BlockRow]]:
    """(total blocked, the page of blocks newest first)."""
    total = await db.fetchval(
        "SELECT count(*) FROM contact_blocks WHERE owner_user_id = $1", owner_user_id
    )
    records = await db.fetch(
        """
        SELECT blocked_user_id, created_at
          FROM contact_blocks
         WHERE owner_user_id = $1
         ORDER BY created_at DESC, blocked_user_id DESC
         OFFSET $2 LIMIT $3
        """,
        owner_user_id,
        offset,
        limit,
    )
    return int(total), [
        BlockRow(user_id=r["blocked_user_id"], blocked_at=r["created_at"]) for r in records
    ]
