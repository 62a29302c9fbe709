"""Bots in the attachment menu: this server has no bots, so the menu is empty."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.hashes import not_modified
from telesrv.rpc.registry import method
from telesrv.tl import TLObject, functions, types


class AttachMenuHandlers:
    @method(functions.messages.GetAttachMenuBots)
    async def get_attach_menu_bots(
        self, ctx: AuthedContext, req: functions.messages.GetAttachMenuBots
    ) -> TLObject:
        if not_modified(req.hash, 0):
            return types.AttachMenuBotsNotModified()
        return types.AttachMenuBots(hash=0, bots=[], users=[])
