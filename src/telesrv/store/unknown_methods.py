"""Counts of the methods clients called that the server does not implement."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from telesrv.store.db import Executor

MAX_APP_VERSION = 128


@dataclass(frozen=True, slots=True)
class UnknownMethod:
    method: str
    calls: int
    first_seen: datetime
    last_seen: datetime
    last_layer: int | None
    last_app_version: str | None


async def record(db: Executor, method: str, layer: int | None, app_version: str | None) -> None:
    await db.execute(
        """
        INSERT INTO unknown_methods AS u (method, calls, last_layer, last_app_version,
                                          last_seen)
        VALUES ($1, 1, $2, $3, now())
        ON CONFLICT (method) DO UPDATE
           SET calls = u.calls + 1,
               last_seen = EXCLUDED.last_seen,
               last_layer = COALESCE(EXCLUDED.last_layer, u.last_layer),
               last_app_version = COALESCE(EXCLUDED.last_app_version, u.last_app_version)
        """,
        method,
        layer,
        app_version[:MAX_APP_VERSION] if app_version is not None else None,
    )


async def list_all(db: Executor) -> list[UnknownMethod]:
    """Every method recorded, most called first."""
    rows = await db.fetch(
        """
        SELECT method, calls, first_seen, last_seen, last_layer, last_app_version
          FROM unknown_methods
         ORDER BY calls DESC, method
        """
    )
    return [
        UnknownMethod(
            method=r["method"],
            calls=r["calls"],
            first_seen=r["first_seen"],
            last_seen=r["last_seen"],
            last_layer=r["last_layer"],
            last_app_version=r["last_app_version"],
        )
        for r in rows
    ]
