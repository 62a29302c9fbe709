"""Privacy rules: who may see a user's phone number, last-seen time, profile photo,
about text, and a link to them on what they wrote when it is forwarded.

A user sets an ordered list of rules per key (account.setPrivacy). For a viewer, the
first rule that matches decides: ``allow_*`` allows, ``disallow_*`` refuses, and a list
where none matches refuses. "Contacts" are the *user's* contacts, never the viewer's:
adding someone to one's own address book grants nothing. A user always sees all of
their own. A key never set has Telegram's default (``DEFAULT_RULES``).

The projection (services/projection.py) reads each pair's answers with the facts it
computes a view from (``allows``); this module owns the rules themselves.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from telesrv.services.errors import PrivacyTooLong
from telesrv.services.origin import Origin
from telesrv.services.update_log import EventType, state_event
from telesrv.store import privacy as privacy_store
from telesrv.store.db import Db
from telesrv.store.log_payloads import PrivacyChanged
from telesrv.store.users import ProjectedUserRow

# Bounds of one key's list: Telegram apps send at most a base rule and two exception
# lists (plus chat lists, refused here); the users are the exceptions' members.
MAX_RULES = 10
MAX_RULE_USERS = 1000  # over all the rules of one key


class PrivacyKey(enum.StrEnum):
    """The keys served; their values are stored (never renamed)."""

    STATUS_TIMESTAMP = "status_timestamp"
    PHONE_NUMBER = "phone_number"
    PROFILE_PHOTO = "profile_photo"
    FORWARDS = "forwards"
    ABOUT = "about"
    ADDED_BY_PHONE = "added_by_phone"
    # Stored and answered so that apps show the user's choice; nothing here consults
    # them (no calls, groups or voice notes are served).
    PHONE_CALL = "phone_call"
    PHONE_P2P = "phone_p2p"
    CHAT_INVITE = "chat_invite"
    VOICE_MESSAGES = "voice_messages"
    BIRTHDAY = "birthday"


# The keys something here asks of a viewer (``allows``): the projection evaluates the
# rules of these only, so its cost does not grow with the keys nobody consults.
CONSULTED_KEYS = frozenset(
    {
        PrivacyKey.STATUS_TIMESTAMP,
        PrivacyKey.PHONE_NUMBER,
        PrivacyKey.PROFILE_PHOTO,
        PrivacyKey.FORWARDS,
        PrivacyKey.ABOUT,
        PrivacyKey.ADDED_BY_PHONE,
    }
)
# As the projection's query takes them.
CONSULTED_KEY_NAMES: tuple[str, ...] = tuple(sorted(CONSULTED_KEYS))


class RuleKind(enum.StrEnum):
    ALLOW_ALL = "allow_all"
    ALLOW_CONTACTS = "allow_contacts"
    ALLOW_USERS = "allow_users"
    DISALLOW_ALL = "disallow_all"
    DISALLOW_CONTACTS = "disallow_contacts"
    DISALLOW_USERS = "disallow_users"


_WITH_USERS = frozenset({RuleKind.ALLOW_USERS, RuleKind.DISALLOW_USERS})
_EVERYONE = frozenset({RuleKind.ALLOW_ALL, RuleKind.DISALLOW_ALL})
_CONTACTS = frozenset({RuleKind.ALLOW_CONTACTS, RuleKind.DISALLOW_CONTACTS})


@dataclass(frozen=True, slots=True)
class Rule:
    kind: RuleKind
    users: tuple[int, ...] = ()  # allow_users / disallow_users only

    @property
    def allows(self) -> bool:
        return self.kind.startswith("allow")

    def matches(self, viewer_id: int, is_contact: bool) -> bool:
        if self.kind in _EVERYONE:
            return True
        if self.kind in _CONTACTS:
            return is_contact
        return viewer_id in self.users

    def to_json(self) -> dict[str, Any]:
        if self.kind in _WITH_USERS:
            return {"rule": str(self.kind), "users": list(self.users)}
        return {"rule": str(self.kind)}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Rule:
        return cls(RuleKind(value["rule"]), tuple(int(u) for u in value.get("users", ())))


Rules = tuple[Rule, ...]

_EVERYBODY: Rules = (Rule(RuleKind.ALLOW_ALL),)
_MY_CONTACTS: Rules = (Rule(RuleKind.ALLOW_CONTACTS),)

# Telegram's defaults: the phone number (and the rare direct connections, birthdays)
# for contacts, everything else for everybody.
DEFAULT_RULES: dict[PrivacyKey, Rules] = {key: _EVERYBODY for key in PrivacyKey} | {
    PrivacyKey.PHONE_NUMBER: _MY_CONTACTS,
    PrivacyKey.PHONE_P2P: _MY_CONTACTS,
    PrivacyKey.BIRTHDAY: _MY_CONTACTS,
}


def evaluate(rules: Sequence[Rule], viewer_id: int, is_contact: bool) -> bool:
    """Whether ``rules`` let the viewer (``is_contact``: in the owner's contacts) see."""
    for rule in rules:
        if rule.matches(viewer_id, is_contact):
            return rule.allows
    return False


# The defaults name no user, so their answer depends only on whether the viewer is in
# the user's contacts: worked out once per key, (for others, for contacts), as the
# projection asks for every pair it shows.
assert not any(rule.users for rules in DEFAULT_RULES.values() for rule in rules)
_DEFAULT_ANSWERS: dict[PrivacyKey, tuple[bool, bool]] = {
    key: (evaluate(rules, 0, False), evaluate(rules, 0, True))
    for key, rules in DEFAULT_RULES.items()
}


# What a user who blocked the viewer shows them of this, whatever the rules say: nothing
# (their profile photo gives way to the public fallback photo).
_HIDDEN_FROM_THE_BLOCKED = frozenset(
    {PrivacyKey.PROFILE_PHOTO, PrivacyKey.ABOUT, PrivacyKey.STATUS_TIMESTAMP}
)


def allows(row: ProjectedUserRow, key: PrivacyKey, viewer_id: int) -> bool:
    """Whether the target of ``row`` lets ``viewer_id`` see what ``key`` guards: the
    stored rules were evaluated with the row (store/users.py), the defaults here. A
    user who blocked the viewer shows them no photo, about text or last seen."""
    if key not in CONSULTED_KEYS:
        # The row was not built with this key's rules: add it to CONSULTED_KEYS.
        raise ValueError(f"privacy key {key} is not evaluated by the projection")
    if row.user_id == viewer_id:
        return True
    if row.blocked_viewer and key in _HIDDEN_FROM_THE_BLOCKED:
        return False
    if key in row.privacy_set:
        return key not in row.privacy_denied
    return _DEFAULT_ANSWERS[key][row.has_viewer_in_contacts]


def check_rules(rules: Sequence[Rule]) -> Rules:
    """The list as stored: bounded, each exception list without repeats."""
    if len(rules) > MAX_RULES:
        raise PrivacyTooLong()
    cleaned = tuple(
        Rule(r.kind, tuple(dict.fromkeys(r.users)) if r.kind in _WITH_USERS else ()) for r in rules
    )
    if sum(len(r.users) for r in cleaned) > MAX_RULE_USERS:
        raise PrivacyTooLong()
    return cleaned


def rule_user_ids(rules: Sequence[Rule]) -> list[int]:
    """The users the rules name, once each, in order."""
    return list(dict.fromkeys(u for r in rules for u in r.users))


# (viewer -> targets) -> the facts of each pair: the projection's rows_many.
PairRows = Callable[[dict[int, list[int]]], Awaitable[dict[int, list[ProjectedUserRow]]]]
# Users whose facts changed (after commit): the projection cache's ``changed``.
FactsChanged = Callable[[list[int]], None]


class PrivacyService:
    """Reading and setting a user's rules; answering one viewer's question about one
    user through the projection's facts (cached per pair)."""

    def __init__(
        self,
        db: Db,
        pair_rows: PairRows,
        facts_changed: FactsChanged,
        *,
        on_commit: Callable[[], None] = lambda: None,
    ) -> None:
        self._db = db
        self._pair_rows = pair_rows
        self._facts_changed = facts_changed
        self._on_commit = on_commit  # wakes the outbox delivery

    async def rules(self, user_id: int, key: PrivacyKey) -> Rules:
        stored = await privacy_store.get_rules(self._db.pool, user_id, key)
        if stored is None:
            return DEFAULT_RULES[key]
        return tuple(Rule.from_json(r) for r in stored)

    async def set_rules(
        self, user_id: int, key: PrivacyKey, rules: Sequence[Rule], origin: Origin, now: int
    ) -> Rules:
        """Store the list (replacing the key's) and tell the user's other devices
        (updatePrivacy, in the state log); the stored list."""
        stored = check_rules(rules)
        as_json = [r.to_json() for r in stored]

        async def txn(conn: asyncpg.Connection) -> None:
            await privacy_store.set_rules_txn(conn, user_id, key, as_json)
            await state_event(
                conn, user_id, EventType.PRIVACY, now, origin, payload=PrivacyChanged(key, as_json)
            )

        await self._db.run_txn("set_privacy", txn)
        # What every viewer sees of the user may have changed, here and in other
        # processes (the cache tells them).
        self._facts_changed([user_id])
        self._on_commit()
        return stored

    async def shows(self, viewer_id: int, target_id: int, key: PrivacyKey) -> bool:
        """Whether the target lets the viewer see what ``key`` guards (False: no such
        user)."""
        rows = await self._pair_rows({viewer_id: [target_id]})
        found = rows.get(viewer_id)
        if not found:
            return False
        return allows(found[0], key, viewer_id)

    async def hidden_author_names(
        self, forwarder_id: int, author_ids: Sequence[int]
    ) -> dict[int, str]:
        """author -> their own name, for the authors who do not let ``forwarder_id``
        link to them on a forward (the copy then carries that name only)."""
        rows = await self._pair_rows({forwarder_id: list(author_ids)})
        return {
            row.user_id: " ".join(n for n in (row.first_name, row.last_name) if n)
            for row in rows.get(forwarder_id, [])
            if not allows(row, PrivacyKey.FORWARDS, forwarder_id)
        }

    async def findable_by_phone(self, viewer_id: int, user_ids: Sequence[int]) -> set[int]:
        """Those of the users the viewer may find by their phone number (contact
        imports, contacts.resolvePhone): whoever may see the number, and whoever the
        AddedByPhone rules let find it."""
        rows = await self._pair_rows({viewer_id: list(user_ids)})
        return {
            row.user_id
            for row in rows.get(viewer_id, [])
            if allows(row, PrivacyKey.PHONE_NUMBER, viewer_id)
            or allows(row, PrivacyKey.ADDED_BY_PHONE, viewer_id)
        }

    async def profile_audience(self, user_id: int, limit: int) -> list[int]:
        """Who hears of the user's status, name and photo changes: those with the user in
        their contacts or their chat list, at most ``limit``."""
        return await privacy_store.profile_audience(self._db.pool, user_id, limit)
