"""An account's time to live: the days of inactivity after which it would be deleted.

Nothing deletes accounts here yet; the setting is kept as its owner chose it, so that
every device shows the same choice.
"""

from __future__ import annotations

from telesrv.store import account_ttl as account_ttl_store
from telesrv.store.db import Db
from telesrv.store.refusals import TtlDaysInvalid

# What an account that never chose has (the apps offer 1, 3, 6, 12, 18 and 24 months).
DEFAULT_DAYS = 365
MIN_DAYS = 30
MAX_DAYS = 730


class AccountTtl:
    def __init__(self, db: Db) -> None:
        self._db = db

    async def days(self, user_id: int) -> int:
        chosen = await account_ttl_store.get_days(self._db.pool, user_id)
        return DEFAULT_DAYS if chosen is None else chosen

    async def set_days(self, user_id: int, days: int) -> None:
        if not MIN_DAYS <= days <= MAX_DAYS:
            raise TtlDaysInvalid()
        await account_ttl_store.set_days(self._db.pool, user_id, days)
