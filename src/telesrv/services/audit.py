"""The audit log: one INFO line on the ``telesrv.audit`` logger for each change of
who is signed in where, whoever makes it: a client (sign-in, sign-up, logout,
session resets, QR login, the two-step password check; written by ``rpc/audit.py``)
or the operator's commands (a device ended, a phone's login blocked with its
sessions, a password removed).

The lines never hold a login code, a password or anything derived from one: they
say what happened and to whom. An operator may route the logger elsewhere (it is
a plain ``logging`` logger) or silence it with its level.
"""

from __future__ import annotations

import logging

AUDIT_LOGGER = "telesrv.audit"
log = logging.getLogger(AUDIT_LOGGER)

_U64 = (1 << 64) - 1


def key_hex(auth_key_id: int) -> str:
    """An auth key id as the audit lines write it: 16 hex digits, unsigned."""
    return f"{auth_key_id & _U64:016x}"


def audit_line(
    event: str,
    outcome: str,
    user_id: int | None,
    auth_key_id: int | None,
    ip: str | None,
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
        "-" if auth_key_id is None else key_hex(auth_key_id),
        ip or "-",
        extra,
    )
