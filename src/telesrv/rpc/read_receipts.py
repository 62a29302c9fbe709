"""Read receipts: readHistory, readMessageContents and getOutboxReadDate (TL <-> domain)."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.services.ids import INT32_MAX
from telesrv.services.messages import Origin
from telesrv.services.read_receipts import ContentReads, ReadReceipts
from telesrv.services.updates import UpdatesService
from telesrv.tl import TLObject, functions, types


class ReadHistoryHandlers:
    """messages.readHistory."""

    def __init__(
        self, read_receipts: ReadReceipts, updates: UpdatesService, resolve_peer: PeerResolver
    ) -> None:
        self._read_receipts = read_receipts
        self._updates = updates
        self._resolve_peer = resolve_peer

    @method(functions.messages.ReadHistory)
    async def read_history(
        self, ctx: AuthedContext, req: functions.messages.ReadHistory
    ) -> TLObject:
        peer = await self._resolve_peer(ctx, req.peer)
        max_id = req.max_id if 0 <= req.max_id <= INT32_MAX else INT32_MAX
        outcome = await self._read_receipts.read_history(
            ctx.user_id, peer, max_id, Origin(ctx.auth_key_id, ctx.session_id), int(ctx.now)
        )
        if outcome is None:
            # Nothing new was read: no pts is spent, the client keeps its state.
            state = await self._updates.state(ctx.user_id, int(ctx.now))
            return types.messages.AffectedMessages(pts=state.pts, pts_count=0)
        return types.messages.AffectedMessages(pts=outcome.pts, pts_count=outcome.pts_count)


class ContentReadHandlers:
    """messages.readMessageContents and getOutboxReadDate."""

    def __init__(
        self, content_reads: ContentReads, updates: UpdatesService, resolve_peer: PeerResolver
    ) -> None:
        self._content_reads = content_reads
        self._updates = updates
        self._resolve_peer = resolve_peer

    @method(functions.messages.ReadMessageContents)
    async def read_message_contents(
        self, ctx: AuthedContext, req: functions.messages.ReadMessageContents
    ) -> TLObject:
        outcome = await self._content_reads.read_contents(
            ctx.user_id, list(req.id), Origin(ctx.auth_key_id, ctx.session_id), int(ctx.now)
        )
        if outcome is None:
            # Nothing was unread: no pts is spent (a repeated call gets pts_count 0).
            state = await self._updates.state(ctx.user_id, int(ctx.now))
            return types.messages.AffectedMessages(pts=state.pts, pts_count=0)
        return types.messages.AffectedMessages(pts=outcome.pts, pts_count=outcome.pts_count)

    @method(functions.messages.GetOutboxReadDate)
    async def get_outbox_read_date(
        self, ctx: AuthedContext, req: functions.messages.GetOutboxReadDate
    ) -> TLObject:
        peer = await self._resolve_peer(ctx, req.peer)
        date = await self._content_reads.outbox_read_date(ctx.user_id, peer, req.msg_id)
        return types.OutboxReadDate(date=date)
