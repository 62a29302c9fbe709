"""Appearance: cloud themes, wallpapers and emoji statuses. None are stored here, so each
list is Telegram's empty form and apps fall back to their built-in themes."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.hashes import not_modified
from telesrv.rpc.registry import method
from telesrv.tl import TLObject, functions, types


def _no_statuses(req_hash: int) -> TLObject:
    if not_modified(req_hash, 0):
        return types.account.EmojiStatusesNotModified()
    return types.account.EmojiStatuses(hash=0, statuses=[])


class ThemeHandlers:
    @method(functions.account.GetThemes)
    async def get_themes(self, ctx: AuthedContext, req: functions.account.GetThemes) -> TLObject:
        if not_modified(req.hash, 0):
            return types.account.ThemesNotModified()
        return types.account.Themes(hash=0, themes=[])

    @method(functions.account.GetWallPapers)
    async def get_wall_papers(
        self, ctx: AuthedContext, req: functions.account.GetWallPapers
    ) -> TLObject:
        if not_modified(req.hash, 0):
            return types.account.WallPapersNotModified()
        return types.account.WallPapers(hash=0, wallpapers=[])

    @method(functions.account.GetDefaultEmojiStatuses)
    async def get_default_emoji_statuses(
        self, ctx: AuthedContext, req: functions.account.GetDefaultEmojiStatuses
    ) -> TLObject:
        return _no_statuses(req.hash)

    @method(functions.account.GetRecentEmojiStatuses)
    async def get_recent_emoji_statuses(
        self, ctx: AuthedContext, req: functions.account.GetRecentEmojiStatuses
    ) -> TLObject:
        return _no_statuses(req.hash)

    @method(functions.account.GetChannelDefaultEmojiStatuses)
    async def get_channel_default_emoji_statuses(
        self, ctx: AuthedContext, req: functions.account.GetChannelDefaultEmojiStatuses
    ) -> TLObject:
        return _no_statuses(req.hash)
