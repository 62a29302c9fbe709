"""The session that caused a change."""

from __future__ import annotations

from dataclasses import dataclass

from telesrv.store.frozen_slots import quick_init


@quick_init
@dataclass(frozen=True, slots=True)
class Origin:
    """The session that caused a change: it learns the result from its RPC answer, so
    pushes of the change skip it. Both ids are needed: one auth key can carry several
    sessions, and each must hear about changes the others made."""

    auth_key_id: int
    session_id: int
