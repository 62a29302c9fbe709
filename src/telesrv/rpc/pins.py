"""messages.updatePinnedMessage and unpinAllMessages (TL <-> domain; the rules are in
services/pins.py)."""

from __future__ import annotations

from telesrv.rpc.account_common import origin
from telesrv.rpc.context import AuthedContext
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, peer_user
from telesrv.services.pins import Pins
from telesrv.services.updates import UpdatesService
from telesrv.tl import TLObject, functions, types


class PinsHandlers:
    def __init__(
        self,
        pins: Pins,
        updates: UpdatesService,
        resolve_peer: PeerResolver,
        users_for: UsersFor,
    ) -> None:
        self._pins = pins
        self._updates = updates
        self._resolve_peer = resolve_peer
        self._users_for = users_for

    @method(functions.messages.UpdatePinnedMessage)
    async def update_pinned_message(
        self, ctx: AuthedContext, req: functions.messages.UpdatePinnedMessage
    ) -> TLObject:
        peer = await self._resolve_peer(ctx, req.peer)
        pinned = not req.unpin
        # ``silent`` only spares the peer a notification, and a pin sends none here
        # (no service message); it is accepted and has nothing to change.
        outcome = await self._pins.update_pinned(
            ctx.user_id,
            peer,
            req.id,
            pinned=pinned,
            one_side=bool(req.pm_oneside),
            origin=origin(ctx),
            now=int(ctx.now),
        )
        updates: list[types.TypeUpdate] = []
        if outcome is not None:
            updates.append(
                types.UpdatePinnedMessages(
                    pinned=pinned,
                    peer=peer_user(peer),
                    messages=outcome.box_ids,
                    pts=outcome.pts,
                    pts_count=1,
                )
            )
        return types.Updates(
            updates=updates,
            users=await self._users_for(ctx.user_id, [peer]),
            chats=[],
            date=int(ctx.now),
            seq=0,
        )

    @method(functions.messages.UnpinAllMessages)
    async def unpin_all_messages(
        self, ctx: AuthedContext, req: functions.messages.UnpinAllMessages
    ) -> TLObject:
        peer = await self._resolve_peer(ctx, req.peer)
        unpinned = None
        # No topics or saved sub-chats here (topic 0 is none): nothing is pinned in them.
        if not req.top_msg_id and req.saved_peer_id is None:
            unpinned = await self._pins.unpin_all(ctx.user_id, peer, origin(ctx), int(ctx.now))
        if unpinned is None or unpinned.outcome is None:
            state = await self._updates.state(ctx.user_id, int(ctx.now))
            more = unpinned is not None and unpinned.more
            return types.messages.AffectedHistory(
                pts=state.pts, pts_count=0, offset=1 if more else 0
            )
        return types.messages.AffectedHistory(
            pts=unpinned.outcome.pts, pts_count=1, offset=1 if unpinned.more else 0
        )
