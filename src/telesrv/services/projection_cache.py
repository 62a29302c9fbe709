"""The projection's cache: (viewer, target) -> the stored facts a view is computed
from, per process, dropped by whatever changes them."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

from telesrv.services.sightings import Sightings
from telesrv.store import users as users_store

PROJECTION_CACHE_SIZE = 200_000  # (viewer, target) rows kept per process

Pair = tuple[int, int]  # (viewer, target)


class ProjectionCache:
    """(viewer, target) -> the stored facts the projection is computed from, per process.

    The row holds everything that depends on the two users (names, phone, username,
    status times, contacts and blocks either way); the time-dependent parts of a view
    are computed from it on every use. Whatever changes one of those facts calls
    ``changed`` with the user whose data changed (for a contact or a block: its owner),
    which drops every cached pair the user takes part in, as viewer or as target, in
    this process and (through ``on_change``) in the others.

    A lookup that raced a change does not store its answer: each change bumps
    ``epoch``, and rows are only stored for lookups that began in the current one.
    A pair is kept from its second sighting (``sightings``), not its first.
    """

    def __init__(
        self, size: int = PROJECTION_CACHE_SIZE, sightings: Sightings | None = None
    ) -> None:
        self.size = size
        if sightings is None:
            sightings = Sightings() if size else Sightings(0)  # nothing kept: none to count
        self.sightings = sightings
        self.epoch = 0
        self._rows: OrderedDict[Pair, users_store.ProjectedUserRow] = OrderedDict()
        self._by_user: dict[int, set[Pair]] = {}
        # Users whose facts changed here, for other server processes to ``forget``.
        self.on_change: Callable[[list[int]], None] | None = None

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, viewer_id: int, target_id: int) -> users_store.ProjectedUserRow | None:
        pair = (viewer_id, target_id)
        row = self._rows.get(pair)
        if row is not None:
            self._rows.move_to_end(pair)
        return row

    def keeps(self, viewer_id: int, row: users_store.ProjectedUserRow) -> bool:
        """Whether ``row`` is what the cache holds for the pair: only then will a later
        lookup return this same object."""
        return self._rows.get((viewer_id, row.user_id)) is row

    def put(self, viewer_id: int, row: users_store.ProjectedUserRow, epoch: int) -> None:
        if epoch != self.epoch:
            return
        target_id = row.user_id
        pair = (viewer_id, target_id)
        rows = self._rows
        if pair in rows:
            rows.move_to_end(pair)
        elif not self.sightings.again(pair):
            return
        rows[pair] = row  # a new key goes last
        by_user = self._by_user
        for user_id in (viewer_id, target_id):
            pairs = by_user.get(user_id)
            if pairs is None:
                pairs = by_user[user_id] = set()
            pairs.add(pair)
        while len(rows) > self.size:
            old, _ = rows.popitem(last=False)
            self._unindex(old)

    def _unindex(self, pair: Pair) -> None:
        for user_id in {pair[0], pair[1]}:
            pairs = self._by_user.get(user_id)
            if pairs is not None:
                pairs.discard(pair)
                if not pairs:
                    del self._by_user[user_id]

    def forget(self, user_ids: Iterable[int] | None = None) -> None:
        """Drop every pair of these users (None: everything)."""
        self.epoch += 1
        if user_ids is None:
            self._rows.clear()
            self._by_user.clear()
            return
        for user_id in user_ids:
            for pair in self._by_user.pop(user_id, ()):
                if self._rows.pop(pair, None) is not None:
                    self._unindex(pair)

    def changed(self, user_ids: Iterable[int]) -> None:
        """These users' facts changed (after commit): forget here and everywhere."""
        ids = list(dict.fromkeys(user_ids))
        self.forget(ids)
        if ids and self.on_change is not None:
            self.on_change(ids)
