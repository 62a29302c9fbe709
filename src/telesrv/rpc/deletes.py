"""messages.deleteMessages and deleteHistory (TL <-> domain)."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.services.deletes import MAX_DELETE_IDS, Deletes
from telesrv.services.messages import Origin
from telesrv.services.updates import UpdatesService
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import (
    LimitInvalid,
)


class DeleteHandlers:
    """messages.deleteMessages and deleteHistory."""

    def __init__(
        self, deletes: Deletes, updates: UpdatesService, resolve_peer: PeerResolver
    ) -> None:
        self._deletes = deletes
        self._updates = updates
        self._resolve_peer = resolve_peer

    async def _unchanged(self, ctx: AuthedContext) -> int:
        """The caller's pts when a call deleted nothing (pts_count 0)."""
        return (await self._updates.state(ctx.user_id, int(ctx.now))).pts

    @method(functions.messages.DeleteMessages)
    async def delete_messages(
        self, ctx: AuthedContext, req: functions.messages.DeleteMessages
    ) -> TLObject:
        if len(req.id) > MAX_DELETE_IDS:
            raise LimitInvalid()
        deleted = await self._deletes.delete_messages(
            ctx.user_id,
            list(req.id),
            bool(req.revoke),
            Origin(ctx.auth_key_id, ctx.session_id),
            int(ctx.now),
        )
        if deleted is None:
            return types.messages.AffectedMessages(pts=await self._unchanged(ctx), pts_count=0)
        return types.messages.AffectedMessages(pts=deleted.pts, pts_count=deleted.pts_count)

    @method(functions.messages.DeleteHistory)
    async def delete_history(
        self, ctx: AuthedContext, req: functions.messages.DeleteHistory
    ) -> TLObject:
        peer = await self._resolve_peer(ctx, req.peer)
        # min_date/max_date are accepted and ignored: only max_id bounds what goes.
        outcome = await self._deletes.delete_history(
            ctx.user_id,
            peer,
            req.max_id,
            just_clear=bool(req.just_clear),
            revoke=bool(req.revoke),
            origin=Origin(ctx.auth_key_id, ctx.session_id),
            now=int(ctx.now),
        )
        offset = 1 if outcome.more else 0
        if outcome.deleted is None:
            return types.messages.AffectedHistory(
                pts=await self._unchanged(ctx), pts_count=0, offset=offset
            )
        return types.messages.AffectedHistory(
            pts=outcome.deleted.pts, pts_count=outcome.deleted.pts_count, offset=offset
        )
