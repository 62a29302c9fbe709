"""Contacts and blocks: the owner's address book and block list.

Every change writes its owner-view event through `AccountEvents` in the same
transaction, so each of the owner's devices learns it (online or later).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.services.accounts import AccountEvents, NoAccountEvents, Origin, to_datetime
from telesrv.services.errors import (
    ContactIdInvalid,
    FloodWait,
    PhoneNotOccupied,
    PhoneNumberInvalid,
)
from telesrv.services.projection_cache import ProjectionCache
from telesrv.services.users import NAME_MAX, normalize_phone
from telesrv.store import contacts as contacts_store
from telesrv.store import users as users_store
from telesrv.store.db import Db
from telesrv.store.rate_limits import RateLimits

# Contacts handled per importContacts call; the rest are returned for a retry.
IMPORT_BATCH_MAX = 1000
BLOCKED_PAGE_MAX = 100


class PhoneLookupFlood(FloodWait):
    """Too many phone lookups: retry after ``retry_after`` seconds."""

    @property
    def retry_after(self) -> int:
        return self.seconds


@dataclass(frozen=True, slots=True)
class PhoneLookupLimits:
    """Against phone-number enumeration (importContacts, resolvePhone), per user: calls
    per minute, and distinct numbers per day. 0 turns one off."""

    per_minute: int = 0
    per_day: int = 0


def _lookup_token(phone: str) -> str:
    # Redis holds only what counting needs, not the numbers people looked up.
    return hashlib.blake2b(phone.encode(), digest_size=10).hexdigest()


@dataclass(frozen=True, slots=True)
class PhoneContact:
    client_id: int
    phone: str
    first_name: str
    last_name: str


@dataclass(frozen=True, slots=True)
class ImportResult:
    imported: list[tuple[int, int]]  # (user_id, client_id)
    retry_client_ids: list[int]


@dataclass(frozen=True, slots=True)
class Contact:
    user_id: int
    mutual: bool


@dataclass(frozen=True, slots=True)
class Blocked:
    user_id: int
    date: int  # unix time the block was made


def contacts_hash(user_ids: Sequence[int]) -> int:
    """Telegram's list hash over the sorted contact ids (contacts.getContacts hash)."""
    acc = 0
    for user_id in sorted(user_ids):
        acc ^= acc >> 21
        acc ^= (acc << 35) & 0xFFFFFFFFFFFFFFFF
        acc ^= acc >> 4
        acc = (acc + (user_id & 0xFFFFFFFFFFFFFFFF)) & 0xFFFFFFFFFFFFFFFF
    return acc - (1 << 64) if acc >= 1 << 63 else acc


# (owner, user ids) -> the ids the owner may find by phone number
FindableByPhone = Callable[[int, list[int]], Awaitable[set[int]]]


def _name(value: str) -> str:
    return value.strip()[:NAME_MAX]


class ContactService:
    def __init__(
        self,
        db: Db,
        events: AccountEvents | None = None,
        *,
        rate_limits: RateLimits | None = None,
        lookup_limits: PhoneLookupLimits | None = None,
        projections: ProjectionCache | None = None,
        findable_by_phone: FindableByPhone | None = None,
    ) -> None:
        self._db = db
        self._events: AccountEvents = events or NoAccountEvents()
        self._rate_limits = rate_limits
        self._limits = lookup_limits or PhoneLookupLimits()
        # Contacts and blocks shape how users look to each other: every change tells it.
        self._projections = projections if projections is not None else ProjectionCache(size=0)
        # (owner, user ids) -> those the owner may find by phone number, as their privacy
        # rules say (services/privacy.py); None: everyone.
        self.findable_by_phone = findable_by_phone

    async def _unfindable(self, owner_id: int, phones: Sequence[str]) -> set[str]:
        """The phones among these whose accounts do not let the owner find them."""
        if self.findable_by_phone is None or not phones:
            return set()
        found = await users_store.get_user_ids_by_phones(self._db.pool, phones)
        findable = await self.findable_by_phone(owner_id, list(found.values()))
        return {phone for phone, uid in found.items() if uid not in findable}

    def _changed(self, owner_id: int) -> None:
        self._projections.changed([owner_id])

    async def _lookup_call(self, owner_id: int) -> None:
        if self._rate_limits is not None:
            wait = await self._rate_limits.phone_lookup_rate_wait(owner_id, self._limits.per_minute)
            if wait:
                raise PhoneLookupFlood(wait)

    async def _charge(self, owner_id: int, phones: Sequence[str]) -> tuple[list[bool], int]:
        """Per phone whether today's distinct-number cap lets it be looked up."""
        if self._rate_limits is None:
            return [True] * len(phones), 0
        return await self._rate_limits.charge_phone_lookups(
            owner_id, [_lookup_token(p) for p in phones], self._limits.per_day
        )

    async def import_contacts(
        self, owner_id: int, contacts: Sequence[PhoneContact], origin: Origin | None = None
    ) -> ImportResult:
        """Save the contacts whose phones have accounts (the owner's own phone excluded).
        Numbers past the owner's daily lookup cap are not looked up: they come back in
        retry_client_ids, as Telegram's retry_contacts."""
        await self._lookup_call(owner_id)
        batch = contacts[:IMPORT_BATCH_MAX]
        retry = [c.client_id for c in contacts[IMPORT_BATCH_MAX:]]
        by_phone: dict[str, PhoneContact] = {}
        for contact in batch:
            try:
                by_phone[normalize_phone(contact.phone)] = contact
            except PhoneNumberInvalid:
                continue  # not a number: nothing to import, like an unknown one
        allowed, _ = await self._charge(owner_id, list(by_phone))
        for phone, ok in zip(list(by_phone), allowed, strict=True):
            if not ok:
                retry.append(by_phone.pop(phone).client_id)
        # A number whose account hides from the owner is answered as one with no account.
        for phone in await self._unfindable(owner_id, list(by_phone)):
            del by_phone[phone]

        async def txn(conn: asyncpg.Connection) -> list[tuple[int, int]]:
            found = await users_store.get_user_ids_by_phones(conn, list(by_phone))
            found = {phone: uid for phone, uid in found.items() if uid != owner_id}
            rows = [
                contacts_store.NewContact(
                    uid,
                    _name(by_phone[phone].first_name),
                    _name(by_phone[phone].last_name),
                    by_phone=True,
                )
                for phone, uid in found.items()
            ]
            await self._events.contacts_adding(conn, owner_id, list(found.values()), origin)
            if await contacts_store.save_contacts(conn, owner_id, rows):
                await self._events.contacts_changed(conn, owner_id, origin)
            return [(uid, by_phone[phone].client_id) for phone, uid in found.items()]

        imported = await self._db.run_txn("import_contacts", txn) if by_phone else []
        if imported:
            self._changed(owner_id)
        return ImportResult(imported, retry)

    async def resolve_phone(self, owner_id: int, phone: str) -> int:
        """contacts.resolvePhone: the account with this number, within the owner's lookup
        limits (FLOOD_WAIT_X past either)."""
        await self._lookup_call(owner_id)
        normalized = normalize_phone(phone)
        [allowed], retry_after = await self._charge(owner_id, [normalized])
        if not allowed:
            raise PhoneLookupFlood(retry_after)
        found = await users_store.get_user_by_phone(self._db.pool, normalized)
        if found is None or await self._unfindable(owner_id, [normalized]):
            raise PhoneNotOccupied()
        return found.user_id

    async def add_contact(
        self,
        owner_id: int,
        user_id: int,
        first_name: str,
        last_name: str,
        origin: Origin | None = None,
        phone: str = "",
    ) -> None:
        """contacts.addContact: save a user the owner was shown (by id, not by phone).
        A `phone` that is the user's number means the owner has it: it counts as saved
        by phone (a wrong or absent one changes nothing). A number given is a lookup,
        counted as one and answered only as the user's rules let the owner find them:
        otherwise whether the contact shows its number would tell a right guess from a
        wrong one."""
        if user_id == owner_id:
            raise ContactIdInvalid()
        try:
            given = normalize_phone(phone) if phone.strip() else None
        except PhoneNumberInvalid:
            given = None
        if given is not None:
            await self._lookup_call(owner_id)
            [allowed], _ = await self._charge(owner_id, [given])
            if not allowed or await self._unfindable(owner_id, [given]):
                given = None  # a number the owner may not look up counts for nothing

        async def txn(conn: asyncpg.Connection) -> None:
            by_phone = False
            if given is not None:
                target = await users_store.get_user(conn, user_id)
                by_phone = target is not None and target.phone == given
            row = contacts_store.NewContact(user_id, _name(first_name), _name(last_name), by_phone)
            await self._events.contacts_adding(conn, owner_id, [user_id], origin)
            if await contacts_store.save_contacts(conn, owner_id, [row]):
                await self._events.contacts_changed(conn, owner_id, origin)

        await self._db.run_txn("add_contact", txn)
        self._changed(owner_id)

    async def accept_contact(
        self, owner_id: int, user_id: int, origin: Origin | None = None
    ) -> bool:
        """contacts.acceptContact, the "share my phone number" of a chat's action bar:
        the owner adds the user to their contacts under the user's own name. Whom the
        owner has in their contacts is whom their phone is shown to (the projection), so
        the user now sees the owner's number, and the chat's bar closes (the bar event
        goes to every device of the owner's). True when the user was no contact before;
        one already saved keeps the name the owner gave them."""
        if user_id == owner_id:
            raise ContactIdInvalid()

        async def txn(conn: asyncpg.Connection) -> bool:
            target = await users_store.get_user(conn, user_id)
            if target is None:
                raise ContactIdInvalid()
            row = contacts_store.NewContact(user_id, target.first_name, target.last_name)
            await self._events.contacts_adding(conn, owner_id, [user_id], origin)
            added = await contacts_store.add_contact_if_absent(conn, owner_id, row)
            if added:
                await self._events.contacts_changed(conn, owner_id, origin)
            return added

        added = await self._db.run_txn("accept_contact", txn)
        self._changed(owner_id)
        return added

    async def delete_contacts(
        self, owner_id: int, user_ids: Sequence[int], origin: Origin | None = None
    ) -> list[int]:
        async def txn(conn: asyncpg.Connection) -> list[int]:
            deleted = await contacts_store.delete_contacts(conn, owner_id, user_ids)
            if deleted:
                await self._events.contacts_changed(conn, owner_id, origin)
            return deleted

        deleted = await self._db.run_txn("delete_contacts", txn)
        self._changed(owner_id)
        return deleted

    async def delete_by_phones(
        self, owner_id: int, phones: Sequence[str], origin: Origin | None = None
    ) -> list[int]:
        normalized = []
        for phone in phones[:IMPORT_BATCH_MAX]:
            try:
                normalized.append(normalize_phone(phone))
            except PhoneNumberInvalid:
                continue

        async def txn(conn: asyncpg.Connection) -> list[int]:
            deleted = await contacts_store.delete_contacts_by_phones(conn, owner_id, normalized)
            if deleted:
                await self._events.contacts_changed(conn, owner_id, origin)
            return deleted

        deleted = await self._db.run_txn("delete_contacts_by_phones", txn)
        self._changed(owner_id)
        return deleted

    async def contacts(self, owner_id: int) -> list[Contact]:
        rows = await contacts_store.list_contacts(
            self._db.pool, owner_id, distributed=self._db.distributed
        )
        return [Contact(r.user_id, r.mutual) for r in rows]

    async def block(
        self, owner_id: int, user_id: int, now: float, origin: Origin | None = None
    ) -> bool:
        """True when the user was not blocked before."""
        if user_id == owner_id:
            raise ContactIdInvalid()

        async def txn(conn: asyncpg.Connection) -> bool:
            added = await contacts_store.block(conn, owner_id, user_id, to_datetime(now))
            if added:
                await self._events.block_changed(conn, owner_id, user_id, True, origin)
            return added

        added = await self._db.run_txn("block", txn)
        self._changed(owner_id)
        if added:
            await self._events.blocks_committed(owner_id)
        return added

    async def unblock(self, owner_id: int, user_id: int, origin: Origin | None = None) -> bool:
        """True when the user was blocked."""
        if user_id == owner_id:
            raise ContactIdInvalid()

        async def txn(conn: asyncpg.Connection) -> bool:
            removed = await contacts_store.unblock(conn, owner_id, user_id)
            if removed:
                await self._events.block_changed(conn, owner_id, user_id, False, origin)
            return removed

        removed = await self._db.run_txn("unblock", txn)
        self._changed(owner_id)
        if removed:
            await self._events.blocks_committed(owner_id)
        return removed

    async def is_blocked(self, owner_id: int, user_id: int) -> bool:
        return await contacts_store.is_blocked(self._db.pool, owner_id, user_id)

    async def blocked(self, owner_id: int, offset: int, limit: int) -> tuple[int, list[Blocked]]:
        """(total, page newest first); offset and limit are clamped to sane bounds."""
        offset = max(0, offset)
        limit = min(max(1, limit), BLOCKED_PAGE_MAX)
        total, rows = await contacts_store.blocked_page(
            self._db.pool, owner_id, offset=offset, limit=limit
        )
        return total, [Blocked(r.user_id, int(r.blocked_at.timestamp())) for r in rows]
