"""updates.getState / updates.getDifference."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.registry import method
from telesrv.rpc.render import UpdateRenderer
from telesrv.services.updates import UpdatesService
from telesrv.tl import TLObject, functions, types

# Serialized updates per getDifference answer, pts and state events together. Past it
# the answer is a differenceSlice ending at the last event that fits (at least one
# event, so the client always moves).
DIFFERENCE_BYTES = 512 * 1024


def cut_to_budget(sizes: list[int], budget: int) -> int:
    """How many leading items fit in ``budget`` bytes; never fewer than one."""
    total = 0
    for index, size in enumerate(sizes):
        total += size
        if total > budget:
            return max(1, index)
    return len(sizes)


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
        user_id, device = ctx.user_id, ctx.perm_auth_key_id
        now = int(ctx.now)
        diff = await self._updates.difference(user_id, req.pts, now)
        if diff.kind == "too_long":
            # The client reloads its dialogs, contacts and blocks from scratch: the state
            # events so far are part of what it loads.
            head = await self._updates.state_head(user_id)
            await self._updates.save_state_cursor(device, user_id, head)
            return types.updates.DifferenceTooLong(pts=diff.pts)
        state_diff = await self._updates.state_difference(device, user_id)
        if diff.kind == "empty" and not state_diff.events:
            if state_diff.cursor is not None:
                await self._updates.save_state_cursor(device, user_id, state_diff.cursor)
            return types.updates.DifferenceEmpty(date=now, seq=0)

        events, pts, sliced = diff.events, diff.pts, diff.kind == "slice"
        rendered = await self._renderer.render_each(user_id, events)
        state_rendered = await self._renderer.render_each(user_id, state_diff.events)
        # One budget for the whole answer: pts events first, then state events.
        keep = cut_to_budget(
            [sum(len(bytes(u)) for u in ups) for ups, _ in rendered + state_rendered],
            self._difference_bytes,
        )
        if keep < len(events):
            events, rendered, sliced = events[:keep], rendered[:keep], True
            pts = events[-1].pts
        state_keep = max(0, keep - len(events))
        state_cursor = state_diff.cursor
        if state_keep < len(state_diff.events):
            # The rest of the state events come in the next call: the cursor stops at
            # the last one given (or stays put when none was), and the slice makes the
            # client ask again.
            state_rendered, sliced = state_rendered[:state_keep], True
            state_cursor = state_diff.ids[state_keep - 1] if state_keep else None
        updates = [u for ups, _ in rendered + state_rendered for u in ups]
        user_ids = {i for _, ids in rendered + state_rendered for i in ids}
        users = await self._renderer.users(user_id, user_ids)
        new_messages = [u.message for u in updates if isinstance(u, types.UpdateNewMessage)]
        other: list[types.TypeUpdate] = [
            u for u in updates if not isinstance(u, types.UpdateNewMessage)
        ]
        state = types.updates.State(pts=pts, qts=0, date=now, seq=0, unread_count=diff.unread_count)
        await self._updates.save_device_state(device, user_id, pts, now)
        if state_cursor is not None:
            await self._updates.save_state_cursor(device, user_id, state_cursor)
        if sliced or state_diff.more:
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
