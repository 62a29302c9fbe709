"""The compatibility record: which methods clients call that nothing here answers.

Every call is counted in PostgreSQL, so the counts survive restarts and the
``telesrv stats unknown-methods`` command reads them from any process; Redis would
be cheaper per call, but it is a cache here, which the server may lose and rebuild.
Unknown calls are rare (clients try a method and move on), so one upsert each costs
little. Each method is also logged once per process, with the first client seen
calling it.
"""

from __future__ import annotations

import logging

from telesrv.store import unknown_methods as unknown_methods_store
from telesrv.store.db import Db

log = logging.getLogger(__name__)

UnknownMethod = unknown_methods_store.UnknownMethod

# Methods logged in this process; a bounded set (names come from the TL schema).
_MAX_LOGGED = 10_000


class UnknownMethods:
    def __init__(self, db: Db) -> None:
        self._db = db
        self._logged: set[str] = set()

    async def record(self, method: str, layer: int | None, app_version: str | None) -> None:
        if method not in self._logged and len(self._logged) < _MAX_LOGGED:
            self._logged.add(method)
            log.warning(
                "client called unimplemented method %s (layer %s, app version %s)",
                method,
                layer if layer is not None else "unknown",
                app_version or "unknown",
            )
        await unknown_methods_store.record(self._db.pool, method, layer, app_version)

    async def counts(self) -> list[UnknownMethod]:
        return await unknown_methods_store.list_all(self._db.pool)
