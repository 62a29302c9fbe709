"""updates.getState / updates.getDifference."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.registry import method
from telesrv.rpc.render import UpdateRenderer
from telesrv.services.update_log import UpdateEvent
from telesrv.services.updates import DIFFERENCE_BYTES, UpdatesService
from telesrv.tl import TLObject, functions, types

# An event as rendered: its updates and the users they mention.
_Rendered = tuple[list["types.TypeUpdate"], set[int]]


def _size(rendered: _Rendered) -> int:
    return sum(len(bytes(u)) for u in rendered[0])


class UpdatesHandlers:
    def __init__(
        self,
        updates: UpdatesService,
        renderer: UpdateRenderer,
        *,
        difference_bytes: int = DIFFERENCE_BYTES,
    ) -> None:
        self._updates = updates
        self._renderer = renderer
        self._difference_bytes = difference_bytes

    @method(functions.updates.GetState)
    async def get_state(self, ctx: AuthedContext, req: functions.updates.GetState) -> TLObject:
        now = int(ctx.now)
        # The state-log head is read first: whatever commits after it reaches the
        # device later (pushed, or in its next getDifference), never nothing.
        head = await self._updates.state_head(ctx.user_id)
        state = await self._updates.state(ctx.user_id, now)
        await self._updates.save_device_state(ctx.perm_auth_key_id, ctx.user_id, state.pts, now)
        await self._updates.save_state_cursor(ctx.perm_auth_key_id, ctx.user_id, head)
        return types.updates.State(
            pts=state.pts, qts=0, date=now, seq=0, unread_count=state.unread_count
        )

    @method(functions.updates.GetDifference)
    async def get_difference(
        self, ctx: AuthedContext, req: functions.updates.GetDifference
    ) -> TLObject:
        user_id, now = ctx.user_id, int(ctx.now)

        async def render(events: list[UpdateEvent]) -> list[_Rendered]:
            return await self._renderer.render_each(user_id, events)

        diff = await self._updates.get_difference(
            user_id,
            ctx.perm_auth_key_id,
            req.pts,
            now,
            render,
            _size,
            budget=self._difference_bytes,
        )
        if diff.kind == "too_long":
            return types.updates.DifferenceTooLong(pts=diff.state.pts)
        if diff.kind == "empty":
            return types.updates.DifferenceEmpty(date=now, seq=0)
        updates = [u for ups, _ in diff.rendered for u in ups]
        user_ids = {i for _, ids in diff.rendered for i in ids}
        users = await self._renderer.users(user_id, user_ids)
        new_messages = [u.message for u in updates if isinstance(u, types.UpdateNewMessage)]
        other: list[types.TypeUpdate] = [
            u for u in updates if not isinstance(u, types.UpdateNewMessage)
        ]
        state = types.updates.State(
            pts=diff.state.pts, qts=0, date=now, seq=0, unread_count=diff.state.unread_count
        )
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
