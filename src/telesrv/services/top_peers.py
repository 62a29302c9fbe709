"""Top peers: the people an account talks to most, which clients show above search.

Telegram rates peers by how often and how recently they were written to; here the rating
is recency alone, read from the chat list (the dialogs an account has, newest first), so
it needs no counters of its own and follows every message at once."""

from __future__ import annotations

from telesrv.store import dialogs as dialogs_store
from telesrv.store.db import Db

# Telegram's bounds on contacts.getTopPeers: at most 100 peers from an offset under 100.
MAX_TOP_PEERS = 100


class TopPeers:
    def __init__(self, db: Db) -> None:
        self._db = db

    async def correspondents(self, owner: int, offset: int, limit: int) -> list[int]:
        """Up to ``limit`` private-chat peers of ``owner`` after the first ``offset``, most
        recent chat first, in every folder; the owner's own chat (saved messages) is not a
        correspondent."""
        offset = max(0, min(offset, MAX_TOP_PEERS))
        limit = max(0, min(limit, MAX_TOP_PEERS - offset))
        if limit == 0:
            return []
        rows = await dialogs_store.page(
            self._db.pool,
            owner,
            folder_id=None,
            exclude_pinned=False,
            offset_date=None,
            offset_id=None,
            offset_peer=None,
            limit=offset + limit + 1,  # one more, in case the owner's own chat is among them
        )
        peers = [r.peer_user_id for r in rows if r.peer_user_id != owner]
        return peers[offset : offset + limit]
