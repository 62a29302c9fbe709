"""Emoji reactions on private messages.

A reaction change rewrites the message's reactions and, when the peer reacted to the
author's message, the author's "unseen reaction" mark (the dialog's
unread_reactions_count counts those marks). updateMessageReactions has no pts: each
side's devices get it through the state log (durable, pushed live, handed to an
offline device by getDifference), each in its own message ids, carrying the whole
resulting state so that applying it twice is harmless.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from telesrv.services.errors import (
    MessageIdInvalid,
    PremiumAccountRequired,
    ReactionInvalid,
    YouBlockedUser,
)
from telesrv.services.history import MAX_ANSWER_BYTES, MAX_HISTORY_LIMIT
from telesrv.services.ids import INT32_MAX, INT64_MAX
from telesrv.services.messages import Origin
from telesrv.services.update_log import EventType, state_event
from telesrv.store import contacts as contacts_store
from telesrv.store import messages as messages_store
from telesrv.store import reactions as reactions_store
from telesrv.store.db import Db
from telesrv.store.log_payloads import MessageReactions

# The emoji reactions every account may use, as Telegram offers them without Premium.
AVAILABLE_REACTIONS: tuple[str, ...] = (
    "👍", "👎", "❤", "🔥", "🥰", "👏", "😁", "🤔", "🤯", "😱", "🤬", "😢", "🎉", "🤩",
    "🤮", "💩", "🙏", "👌", "🕊", "🤡", "🥱", "🥴", "😍", "🐳", "❤‍🔥", "🌚", "🌭", "💯",
    "🤣", "⚡", "🍌", "🏆", "💔", "🤨", "😐", "🍓", "🍾", "💋", "🖕", "😈", "😴", "😭",
    "🤓", "👻", "👨‍💻", "👀", "🎃", "🙈", "😇", "😨", "🤝", "✍", "🤗", "🫡", "🎅", "🎄",
    "☃", "💅", "🤪", "🗿", "🆒", "💘", "🙉", "🦄", "😘", "💊", "🙊", "😎", "👾", "🤷‍♂",
    "🤷", "🤷‍♀", "😡",
)  # fmt: skip
_AVAILABLE = frozenset(AVAILABLE_REACTIONS)
DEFAULT_REACTION = "👍"
# Reactions one user may put on one message, as Telegram allows without Premium (the
# app config's reactions_user_max_default).
MAX_REACTIONS_PER_USER = 1
MAX_REACTIONS_LIST_LIMIT = 100  # messages.getMessageReactionsList per page
MAX_READ_REACTIONS = 100  # messages cleared by one messages.readReactions call
MAX_ADD_OFFSET = 100
MAX_RECENT_REACTIONS = 50  # kept per user for messages.getRecentReactions


@dataclass(frozen=True, slots=True)
class ReactionState:
    """A message's reactions as one owner sees them."""

    box_id: int
    reactions: list[list[Any]]  # [[user_id, emoticon, big, date], ...] oldest first
    unread: bool  # the owner has not seen the peer's reaction


@dataclass(frozen=True, slots=True)
class ReactionsRead:
    cleared: int
    remaining: int


ReactionRow = reactions_store.ReactionRow


def check_reactions(reactions: Sequence[str]) -> list[str]:
    """The distinct reactions asked for, in order; REACTION_INVALID for one that is not
    available, PREMIUM_ACCOUNT_REQUIRED past the per-user limit."""
    wanted = list(dict.fromkeys(reactions))
    if any(r not in _AVAILABLE for r in wanted):
        raise ReactionInvalid()
    if len(wanted) > MAX_REACTIONS_PER_USER:
        raise PremiumAccountRequired()
    return wanted


class ReactionService:
    def __init__(
        self,
        db: Db,
        *,
        on_commit: Callable[[], None] = lambda: None,
        answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self._db = db
        self._on_commit = on_commit  # wakes the outbox delivery
        self._answer_bytes = answer_bytes

    async def send_reaction(
        self,
        owner: int,
        peer: int,
        box_id: int,
        reactions: Sequence[str],
        big: bool,
        origin: Origin,
        now: int,
        *,
        add_to_recent: bool = False,
    ) -> ReactionState:
        """Set the owner's reactions on a message of their chat with ``peer`` (none:
        remove them); the message's resulting state in the owner's view. With
        ``add_to_recent`` the reactions head the owner's recent list."""
        wanted = check_reactions(reactions)

        async def txn(conn: asyncpg.Connection) -> tuple[ReactionState, bool]:
            box = await reactions_store.box_for_update_txn(conn, owner, peer, box_id)
            if box is None:
                raise MessageIdInvalid()
            # Across a block, as with messages: whoever blocked the other may not react
            # (YOU_BLOCKED_USER; taking a reaction back stays allowed), and a reaction
            # to someone who blocked you is kept on your side alone: it is stored hidden
            # from them, neither shown, counted nor announced to them, and stays so
            # after an unblock, the way a message sent meanwhile is never delivered.
            # The reactor is not told; a refusal would reveal the block.
            blocked_peer, blocked_by_peer = False, False
            if peer != owner:
                blocked_peer, blocked_by_peer = await contacts_store.blocks_between(
                    conn, owner, peer
                )
            if blocked_peer and wanted:
                raise YouBlockedUser()
            if add_to_recent and wanted:
                await reactions_store.add_recent_txn(conn, owner, wanted, MAX_RECENT_REACTIONS)
            before = await reactions_store.user_reactions_txn(
                conn, box.sender_user_id, box.message_id, owner
            )
            if sorted(before) == sorted(wanted) and not (big and wanted):
                found = await reactions_store.summaries(
                    conn, owner, peer, [box_id], distributed=self._db.distributed
                )
                return ReactionState(box_id, found[0][2], box.reaction_unread), False
            summary = await reactions_store.set_reactions_txn(
                conn,
                box.sender_user_id,
                box.message_id,
                owner,
                wanted,
                big,
                now,
                hidden=blocked_by_peer,
            )
            # What the other side sees of the owner's reactions, before and after.
            seen_before = sorted(r for r, hidden in before.items() if not hidden)
            seen_after = sorted(r for r in wanted if not before.get(r, blocked_by_peer))
            other = None
            if peer != owner and (not blocked_by_peer or seen_before != seen_after):
                other = await reactions_store.other_box_txn(
                    conn, peer, box.sender_user_id, box.message_id
                )
            other_unread = other.reaction_unread if other is not None else False
            if other is not None and other.owner_user_id == box.sender_user_id:
                # The peer reacted to the author's message: a new reaction is unseen
                # until read; taking one's reaction back takes its mark with it. Across
                # the peer's block nothing new shows, only a visible one can go.
                other_unread = (
                    bool(seen_after) and other.reaction_unread if blocked_by_peer else bool(wanted)
                )
                if other_unread != other.reaction_unread:
                    await reactions_store.set_reaction_unread_txn(
                        conn, other.owner_user_id, other.box_id, other_unread
                    )
            mine = ReactionState(box_id, summary, box.reaction_unread)
            events: list[tuple[int, int, ReactionState, Origin | None]] = [
                (owner, peer, mine, origin)
            ]
            if other is not None:
                theirs = ReactionState(other.box_id, summary, other_unread)
                events.append((peer, owner, theirs, None))
            # Each append holds its user's state-log head until commit: ascending user
            # ids, so A reacting to B while B reacts to A cannot deadlock.
            for user, chat, state, source in sorted(events, key=lambda e: e[0]):
                await self._event(conn, user, chat, state, now, source)
            return mine, True

        state, changed = await self._db.run_txn("send_reaction", txn)
        if changed:
            self._on_commit()
        return state

    @staticmethod
    async def _event(
        conn: asyncpg.Connection,
        owner: int,
        peer: int,
        state: ReactionState,
        now: int,
        origin: Origin | None,
    ) -> None:
        await state_event(
            conn,
            owner,
            EventType.MESSAGE_REACTIONS,
            now,
            origin,
            peer=peer,
            payload=MessageReactions(state.box_id, state.reactions, state.unread),
        )

    async def states(self, owner: int, peer: int, box_ids: Sequence[int]) -> list[ReactionState]:
        """The reactions of the owner's messages among ``box_ids`` (missing ones left out)."""
        found = await reactions_store.summaries(
            self._db.pool, owner, peer, box_ids, distributed=self._db.distributed
        )
        return [ReactionState(b, summary, unread) for b, unread, summary in found]

    async def reaction_list(
        self,
        owner: int,
        peer: int,
        box_id: int,
        *,
        reaction: str | None,
        offset: str | None,
        limit: int,
    ) -> tuple[int, list[ReactionRow], str | None]:
        """(count, a page, the next page's offset) of who reacted to a message, oldest
        first; ``reaction`` keeps only that one."""
        if reaction is not None and reaction not in _AVAILABLE:
            raise ReactionInvalid()
        limit = max(1, min(limit, MAX_REACTIONS_LIST_LIMIT))
        pool = self._db.pool
        message = await reactions_store.message_of_box(pool, owner, peer, box_id)
        if message is None:
            raise MessageIdInvalid()
        after = _decode_offset(offset)
        count, rows = await reactions_store.reaction_list(
            pool,
            message[0],
            message[1],
            viewer=owner,
            reaction=reaction,
            after=after,
            limit=limit + 1,
        )
        more = len(rows) > limit
        rows = rows[:limit]
        next_offset = None
        if more and rows:
            last = rows[-1]
            next_offset = f"{last.date}:{last.user_id}:{last.reaction}"
        return count, rows, next_offset

    async def unread_reactions(
        self,
        owner: int,
        peer: int,
        *,
        offset_id: int,
        add_offset: int,
        limit: int,
        max_id: int,
        min_id: int,
    ) -> tuple[list[messages_store.BoxMessage], int]:
        """A page of the owner's messages in the chat with a reaction they have not seen,
        newest first, and how many there are; paged as history is (offset_id, a
        clamped add_offset, max_id, min_id)."""
        limit = max(1, min(limit, MAX_HISTORY_LIMIT)) if limit > 0 else 20
        add_offset = max(-MAX_ADD_OFFSET, min(add_offset, MAX_ADD_OFFSET))
        pool = self._db.pool
        above = max(0, min_id)
        top = max_id if 0 < max_id <= INT32_MAX else None
        boundary = min(offset_id, INT32_MAX) if offset_id > 0 else None
        older_below = top if boundary is None else min(boundary, top or boundary)
        ids: list[int] = []
        older_limit, skip = limit, add_offset
        if add_offset < 0:
            skip = 0
            newer: list[int] = []
            if boundary is not None:
                newer = await reactions_store.unread_box_ids(
                    pool,
                    owner,
                    peer,
                    above=max(above, boundary - 1),
                    below=top,
                    limit=-add_offset,
                    ascending=True,
                )
            take = len(newer) + add_offset + limit
            window = newer[max(0, len(newer) - take) :] if take > 0 else []
            ids = list(reversed(window))
            older_limit = max(0, take - len(window))
        if older_limit > 0:
            ids += await reactions_store.unread_box_ids(
                pool, owner, peer, above=above, below=older_below, limit=older_limit, skip=skip
            )
        boxes: list[messages_store.BoxMessage] = []
        if ids:
            boxes = (
                await messages_store.get_boxes_within(
                    pool, owner, ids, self._answer_bytes, distributed=self._db.distributed
                )
            ).boxes
        return boxes, await reactions_store.count_unread(pool, owner, peer)

    async def read_reactions(self, owner: int, peer: int, now: int) -> ReactionsRead:
        """Mark the owner's unseen reactions in the chat as seen, up to
        MAX_READ_REACTIONS messages per call (``remaining`` says how many are left).
        Every device of the owner gets each cleared message's state (no pts is taken)."""

        async def txn(conn: asyncpg.Connection) -> list[int]:
            cleared = await reactions_store.clear_unread_txn(conn, owner, peer, MAX_READ_REACTIONS)
            if cleared:
                for box_id, _, summary in await reactions_store.summaries(
                    conn, owner, peer, cleared, distributed=self._db.distributed
                ):
                    state = ReactionState(box_id, summary, False)
                    await self._event(conn, owner, peer, state, now, None)
            return cleared

        cleared = await self._db.run_txn("read_reactions", txn)
        if cleared:
            self._on_commit()
        remaining = await reactions_store.count_unread(self._db.pool, owner, peer)
        return ReactionsRead(len(cleared), remaining)

    async def unread_counts(self, owner: int, peers: Sequence[int]) -> dict[int, int]:
        if not peers:
            return {}
        return await reactions_store.unread_counts(self._db.pool, owner, peers)

    # -- recently used ----------------------------------------------------------------------

    async def recent_reactions(self, owner: int, limit: int) -> list[str]:
        limit = max(0, min(limit, MAX_RECENT_REACTIONS))
        return await reactions_store.recent(self._db.pool, owner, limit) if limit else []

    async def clear_recent_reactions(self, owner: int) -> None:
        await reactions_store.clear_recent(self._db.pool, owner)

    # -- the double-tap reaction -----------------------------------------------------------

    async def default_reaction(self, owner: int) -> str:
        return await reactions_store.default_reaction(self._db.pool, owner) or DEFAULT_REACTION

    async def set_default_reaction(self, owner: int, reaction: str) -> None:
        check_reactions([reaction])
        await reactions_store.set_default_reaction(self._db.pool, owner, reaction)


def _decode_offset(offset: str | None) -> tuple[int, int, str] | None:
    """The (date, user, reaction) key a page offset names; None for none or a bad one.
    A forged offset is the client's own: numbers past their columns' ranges or a
    reaction that is not offered read as no offset rather than reaching the database."""
    if not offset:
        return None
    parts = offset.split(":", 2)
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts[:2]):
        return None
    if len(parts[0]) > 10 or len(parts[1]) > 19:
        return None
    date, user = int(parts[0]), int(parts[1])
    if date > INT32_MAX or user > INT64_MAX or parts[2] not in _AVAILABLE:
        return None
    return date, user, parts[2]
