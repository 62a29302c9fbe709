"""The audit lines of what clients do (see ``services/audit.py`` for the format): who
asked is the request's account, auth key and address."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from telesrv.rpc.context import RequestContext
from telesrv.services.audit import AUDIT_LOGGER, audit_line, key_hex
from telesrv.services.errors import SessionPasswordNeeded

__all__ = ["AUDIT_LOGGER", "audit", "audit_refusal", "key_hex"]


def audit(
    event: str,
    ctx: RequestContext,
    user_id: int | None,
    outcome: str = "ok",
    **details: object,
) -> None:
    """One audit line for the request in ``ctx``."""
    audit_line(event, outcome, user_id, ctx.perm_auth_key_id, ctx.client_ip, **details)


@contextmanager
def audit_refusal(event: str, ctx: RequestContext, user_id: int | None = None) -> Iterator[None]:
    """A refused attempt is audited too, named by its error (the request's own
    arguments, which hold the code or the password proof, are never written)."""
    try:
        yield
    except SessionPasswordNeeded:
        # The code was right; the key now waits for the password (check_password).
        audit(event, ctx, user_id, outcome="password_needed")
        raise
    except Exception as e:
        audit(event, ctx, user_id, outcome=f"refused:{type(e).__name__}")
        raise
