"""Finding people: contacts.search.

A query finds users whose name has a word starting with it ("ali" finds "Alice" and
"Bob Alison"), or whose username starts with it (a leading '@' is ignored), whatever
the case. The viewer's contacts come apart from everyone else, and a contact also
matches by the name the viewer saved for them. Who is found is then shown through the
user projection, like every user the server renders.

Bounds: a query needs MIN_QUERY_LENGTH characters (fewer would list a large share of
all users, and a trigram index serves no shorter pattern); one longer than any name
can match nothing and is not looked up; each list holds at most MAX_SEARCH_LIMIT
users; and each user has a number of searches per minute (the settings'
people_search_rate_limit), counted in Redis across processes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from telesrv.services.errors import FloodWait, QueryTooShort, SearchQueryEmpty
from telesrv.services.users import NAME_MAX
from telesrv.store import people_search as people_store
from telesrv.store.db import Db
from telesrv.store.rate_limits import RateLimits

MIN_QUERY_LENGTH = 3
# The longest text a query can match: a full name of two NAME_MAX names and a space.
MAX_QUERY_LENGTH = 2 * NAME_MAX + 1
MAX_SEARCH_LIMIT = 50
DEFAULT_SEARCH_LIMIT = 20

_USERNAME_PREFIX = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True, slots=True)
class Found:
    my_results: list[int]  # the viewer's contacts
    results: list[int]  # everyone else


class PeopleSearch:
    def __init__(
        self, db: Db, rate_limits: RateLimits | None = None, *, per_minute: int = 0
    ) -> None:
        self._db = db
        self._rate_limits = rate_limits
        self._per_minute = per_minute

    async def search(self, viewer: int, query: str, limit: int) -> Found:
        text = " ".join(query.split())
        bare = text.removeprefix("@")
        if not bare:
            raise SearchQueryEmpty()
        if len(bare) < MIN_QUERY_LENGTH:
            raise QueryTooShort()
        if self._rate_limits is not None:
            wait = await self._rate_limits.people_search_rate_wait(viewer, self._per_minute)
            if wait:
                raise FloodWait(wait)
        if len(bare) > MAX_QUERY_LENGTH:
            return Found([], [])  # longer than any name or username: nothing to look at
        limit = min(limit, MAX_SEARCH_LIMIT) if limit > 0 else DEFAULT_SEARCH_LIMIT
        prefix = people_store.Prefix(
            name=bare, username=bare if _USERNAME_PREFIX.fullmatch(bare) else None
        )
        pool = self._db.pool
        mine = await people_store.contacts_matching(pool, viewer, prefix, limit)
        others = await people_store.others_matching(
            pool, viewer, prefix, limit, distributed=self._db.distributed
        )
        return Found(mine, others)
