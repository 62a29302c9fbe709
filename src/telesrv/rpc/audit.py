"""The audit log: one INFO line on the ``telesrv.audit`` logger for each change of
who is signed in where (sign-in, sign-up, logout, session resets, QR login, the
two-step password check), with the account, the auth key and the client's address.

The lines never hold a login code, a password or anything derived from one: they
say what happened and to whom. An operator may route the logger elsewhere (it is
a plain ``logging`` logger) or silence it with its level.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from telesrv.rpc.context import RequestContext
from telesrv.services.errors import SessionPasswordNeeded

AUDIT_LOGGER = "telesrv.audit"
log = logging.getLogger(AUDIT_LOGGER)

_U64 = (1 << 64) - 1


def key_hex(auth_key_id: int) -> str:
    """An auth key id as the audit lines write it: 16 hex digits, unsigned."""
    return f"{auth_key_id & _U64:016x}"


def audit(
    event: str,
    ctx: RequestContext,
    user_id: int | None,
    outcome: str = "ok",
    **details: object,
) -> None:
    """``<event> <outcome> user=<id> auth_key=<hex> ip=<address> [key=value...]``."""
    if not log.isEnabledFor(logging.INFO):
        return
    extra = "".join(f" {name}={value}" for name, value in details.items())
    log.info(
        "%s %s user=%s auth_key=%s ip=%s%s",
        event,
        outcome,
        "-" if user_id is None else user_id,
        key_hex(ctx.perm_auth_key_id),
        ctx.client_ip or "-",
        extra,
    )


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
