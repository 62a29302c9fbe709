"""updates.getState / updates.getDifference."""

from __future__ import annotations

from typing import Any

from telesrv.rpc.context import RequestContext
from telesrv.rpc.registry import method
from telesrv.rpc.render import UpdateRenderer
from telesrv.services.updates import UpdatesService
from telesrv.tl import TLObject, functions, types


class UpdatesHandlers:
    def __init__(self, updates: UpdatesService, renderer: UpdateRenderer) -> None:
        self._updates = updates
        self._renderer = renderer

    @method(functions.updates.GetState)
    async def get_state(self, ctx: RequestContext, req: Any) -> TLObject:
        assert ctx.user_id is not None
        now = int(ctx.now)
        state = await self._updates.state(ctx.user_id, now)
        await self._updates.save_device_state(ctx.perm_auth_key_id, ctx.user_id, state.pts, now)
        return types.updates.State(
            pts=state.pts, qts=0, date=now, seq=0, unread_count=state.unread_count
        )

    @method(functions.updates.GetDifference)
    async def get_difference(self, ctx: RequestContext, req: Any) -> TLObject:
        assert ctx.user_id is not None
        now = int(ctx.now)
        diff = await self._updates.difference(ctx.user_id, req.pts, now)
        if diff.kind == "empty":
            return types.updates.DifferenceEmpty(date=now, seq=0)
        if diff.kind == "too_long":
            return types.updates.DifferenceTooLong(pts=diff.pts)
        updates, users = await self._renderer.render(ctx.user_id, diff.events)
        new_messages = [u.message for u in updates if isinstance(u, types.UpdateNewMessage)]
        other: list[types.TypeUpdate] = [
            u for u in updates if not isinstance(u, types.UpdateNewMessage)
        ]
        state = types.updates.State(
            pts=diff.pts, qts=0, date=now, seq=0, unread_count=diff.unread_count
        )
        await self._updates.save_device_state(ctx.perm_auth_key_id, ctx.user_id, diff.pts, now)
        if diff.kind == "slice":
            return types.updates.DifferenceSlice(
                new_messages=new_messages,
                new_encrypted_messages=[],
                other_updates=other,
                chats=[],
                users=users,
                intermediate_state=state,
            )
        return types.updates.Difference(
            new_messages=new_messages,
            new_encrypted_messages=[],
            other_updates=other,
            chats=[],
            users=users,
            state=state,
        )
