"""messages.receivedMessages: a device confirms it has the messages up to max_id, which
cancels their push notifications. This server sends no pushes to cancel; the answer still
lists the incoming messages so confirmed, as Telegram's does, and at most the last
MAX_RECEIVED of them: a client confirms each time it sees new messages, so the ones before
were confirmed by earlier calls."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.registry import method
from telesrv.services.history import History
from telesrv.services.ids import INT32_MAX
from telesrv.tl import TLObject, functions, types

MAX_RECEIVED = 100


class ReceivedHandlers:
    def __init__(self, history: History) -> None:
        self._history = history

    @method(functions.messages.ReceivedMessages)
    async def received_messages(
        self, ctx: AuthedContext, req: functions.messages.ReceivedMessages
    ) -> list[TLObject]:
        top = min(req.max_id, INT32_MAX)
        if top <= 0:
            return []
        ids = list(range(top, max(0, top - MAX_RECEIVED), -1))
        found = await self._history.messages_by_id(ctx.user_id, ids)
        return [
            types.ReceivedNotifyMessage(id=m.box_id, flags=0)
            for m in sorted(found, key=lambda m: m.box_id)
            if not m.out
        ]
