"""What each kind of logged event carries, one type per kind.

Writers (the services, and the store where an event is written in SQL) build these;
the renderer reads them back with ``from_json``. They are stored as jsonb in the pts
and state logs, under the keys below: events already in a log keep being read, so a
key is never renamed, and reading tolerates one that is missing (its default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

Json = Mapping[str, Any] | None


class LogPayload(Protocol):
    def to_json(self) -> dict[str, Any]: ...


def _hex(data: bytes | None) -> str | None:
    return data.hex() if data else None


def _unhex(value: Any) -> bytes | None:
    return bytes.fromhex(value) if value else None


@dataclass(frozen=True, slots=True)
class DialogPinned:
    pinned: bool
    folder_id: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"pinned": self.pinned, "folder_id": self.folder_id}

    @classmethod
    def from_json(cls, p: Json) -> DialogPinned:
        p = p or {}
        return cls(bool(p.get("pinned")), int(p.get("folder_id") or 0))


@dataclass(frozen=True, slots=True)
class PinnedDialogs:
    folder_id: int
    order: list[int]

    def to_json(self) -> dict[str, Any]:
        return {"folder_id": self.folder_id, "order": self.order}

    @classmethod
    def from_json(cls, p: Json) -> PinnedDialogs:
        p = p or {}
        return cls(int(p.get("folder_id") or 0), [int(x) for x in p.get("order", [])])


@dataclass(frozen=True, slots=True)
class UnreadMark:
    unread: bool

    def to_json(self) -> dict[str, Any]:
        return {"unread": self.unread}

    @classmethod
    def from_json(cls, p: Json) -> UnreadMark:
        return cls(bool((p or {}).get("unread")))


@dataclass(frozen=True, slots=True)
class NotifySettingsChanged:
    """A scope's settings (``kind``: peer, users, chats, broadcasts; ``peer`` for a
    peer's), all None once reset to the defaults."""

    kind: str
    peer: int
    show_previews: bool | None = None
    silent: bool | None = None
    mute_until: int | None = None
    sound: bytes | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "peer": self.peer,
            "show_previews": self.show_previews,
            "silent": self.silent,
            "mute_until": self.mute_until,
            "sound": _hex(self.sound),
        }

    @property
    def is_default(self) -> bool:
        return all(
            v is None for v in (self.show_previews, self.silent, self.mute_until, self.sound)
        )

    @classmethod
    def from_json(cls, p: Json) -> NotifySettingsChanged:
        p = p or {}
        return cls(
            str(p.get("kind", "peer")),
            int(p.get("peer") or 0),
            p.get("show_previews"),
            p.get("silent"),
            p.get("mute_until"),
            _unhex(p.get("sound")),
        )


@dataclass(frozen=True, slots=True)
class DraftChanged:
    """The chat's draft as saved; ``message`` None: it was cleared."""

    date: int
    message: str | None = None
    entities: bytes | None = None
    reply_to: int | None = None
    no_webpage: bool = False
    invert_media: bool = False

    def to_json(self) -> dict[str, Any]:
        if self.message is None:
            return {"date": self.date}
        return {
            "message": self.message,
            "entities": _hex(self.entities),
            "reply_to": self.reply_to,
            "no_webpage": self.no_webpage,
            "invert_media": self.invert_media,
            "date": self.date,
        }

    @classmethod
    def from_json(cls, p: Json, date: int) -> DraftChanged:
        """``date``: the event's, for a payload without one."""
        p = p or {}
        when = int(p.get("date") or date)
        if "message" not in p:
            return cls(when)
        return cls(
            when,
            str(p["message"]),
            _unhex(p.get("entities")),
            p.get("reply_to"),
            bool(p.get("no_webpage")),
            bool(p.get("invert_media")),
        )


@dataclass(frozen=True, slots=True)
class PeerSettingsChanged:
    """The chat's action bar (peerSettings)."""

    report_spam: bool = False
    add_contact: bool = False
    block_contact: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "report_spam": self.report_spam,
            "add_contact": self.add_contact,
            "block_contact": self.block_contact,
        }

    @classmethod
    def from_json(cls, p: Json) -> PeerSettingsChanged:
        p = p or {}
        return cls(
            bool(p.get("report_spam")), bool(p.get("add_contact")), bool(p.get("block_contact"))
        )


@dataclass(frozen=True, slots=True)
class PeerBlocked:
    blocked: bool

    def to_json(self) -> dict[str, Any]:
        return {"blocked": self.blocked}

    @classmethod
    def from_json(cls, p: Json) -> PeerBlocked:
        return cls(bool((p or {}).get("blocked")))


@dataclass(frozen=True, slots=True)
class DialogFilterChanged:
    """A filter saved (``data``: its serialized DialogFilter) or deleted (None)."""

    filter_id: int
    data: bytes | None = None

    def to_json(self) -> dict[str, Any]:
        if self.data is None:
            return {"id": self.filter_id}
        return {"id": self.filter_id, "filter": self.data.hex()}

    @classmethod
    def from_json(cls, p: Json) -> DialogFilterChanged:
        p = p or {}
        return cls(int(p.get("id") or 0), _unhex(p.get("filter")))


@dataclass(frozen=True, slots=True)
class DialogFilterOrder:
    order: list[int]

    def to_json(self) -> dict[str, Any]:
        return {"order": self.order}

    @classmethod
    def from_json(cls, p: Json) -> DialogFilterOrder:
        return cls([int(i) for i in (p or {}).get("order", [])])


@dataclass(frozen=True, slots=True)
class DialogFiltersChanged:
    """The filters as a whole changed (tags turned on or off)."""

    tags: bool

    def to_json(self) -> dict[str, Any]:
        return {"tags": self.tags}


@dataclass(frozen=True, slots=True)
class FolderPeers:
    """Dialogs moved: (peer, folder) each."""

    peers: list[tuple[int, int]]

    def to_json(self) -> dict[str, Any]:
        return {"peers": [[peer, folder] for peer, folder in self.peers]}

    @classmethod
    def from_json(cls, p: Json) -> FolderPeers:
        return cls([(int(peer), int(folder)) for peer, folder in (p or {}).get("peers", [])])


@dataclass(frozen=True, slots=True)
class ReadInbox:
    """Written by the read function in SQL: how many messages stay unread."""

    still_unread: int

    @classmethod
    def from_json(cls, p: Json) -> ReadInbox:
        return cls(int((p or {}).get("still_unread", 0)))


@dataclass(frozen=True, slots=True)
class MessageReactions:
    """A message's reactions now: [user id, emoticon, big, date] each, oldest first, and
    whether the owner has yet to see the peer's."""

    box_id: int
    reactions: list[list[Any]] = field(default_factory=list)
    unread: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"box_id": self.box_id, "reactions": self.reactions, "unread": self.unread}

    @classmethod
    def from_json(cls, p: Json) -> MessageReactions | None:
        """None for a payload that names no message."""
        p = p or {}
        if "box_id" not in p:
            return None
        return cls(int(p["box_id"]), list(p.get("reactions") or []), bool(p.get("unread")))


@dataclass(frozen=True, slots=True)
class MessagesPinned:
    """The event's messages (its box ids) were pinned, or unpinned."""

    pinned: bool

    def to_json(self) -> dict[str, Any]:
        return {"pinned": self.pinned}

    @classmethod
    def from_json(cls, p: Json) -> MessagesPinned:
        return cls(bool((p or {}).get("pinned")))


@dataclass(frozen=True, slots=True)
class PrivacyChanged:
    """A privacy key's rules now, as stored (services/privacy.py: ``Rule.to_json``)."""

    key: str
    rules: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "rules": self.rules}

    @classmethod
    def from_json(cls, p: Json) -> PrivacyChanged:
        p = p or {}
        return cls(str(p.get("key", "")), list(p.get("rules") or []))
