"""Shared by the account handlers: the origin of a change."""

from __future__ import annotations

from telesrv.rpc.context import RequestContext
from telesrv.services import accounts as domain


def origin(ctx: RequestContext) -> domain.Origin:
    """The session making a change (pushes of the change skip it)."""
    return domain.Origin(auth_key_id=ctx.auth_key_id, session_id=ctx.session_id)
