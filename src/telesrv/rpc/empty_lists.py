"""The lists this server never has anything in: stickers, GIFs, emoji groups, themes,
wallpapers, emoji statuses, attachment-menu bots, message effects, tag reactions.

Each is answered with Telegram's empty form for an account that installed, saved and
was offered nothing, from one table: apps ask for these on every start and on timers,
and an error instead makes them retry. The hash of an empty list is 0, which a client
sends when it holds nothing, so the answer is always the list, never "not modified".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.registry import marked
from telesrv.tl import TLObject, functions, types

# A method -> its empty answer (an object, or a list for a Vector result), made on demand.
Empty = Callable[[], TLObject | list[TLObject]]


def _no_sets() -> TLObject:
    return types.messages.AllStickers(hash=0, sets=[])


def _no_featured() -> TLObject:
    return types.messages.FeaturedStickers(hash=0, count=0, sets=[], unread=[])


def _no_emoji_groups() -> TLObject:
    return types.messages.EmojiGroups(hash=0, groups=[])


def _no_statuses() -> TLObject:
    return types.account.EmojiStatuses(hash=0, statuses=[])


EMPTY_LISTS: dict[type[TLObject], Empty] = {
    # Stickers and GIFs.
    functions.messages.GetStickers: lambda: types.messages.Stickers(hash=0, stickers=[]),
    functions.messages.GetAllStickers: _no_sets,
    functions.messages.GetEmojiStickers: _no_sets,
    functions.messages.GetMaskStickers: _no_sets,
    functions.messages.GetFavedStickers: lambda: types.messages.FavedStickers(
        hash=0, packs=[], stickers=[]
    ),
    functions.messages.GetRecentStickers: lambda: types.messages.RecentStickers(
        hash=0, packs=[], stickers=[], dates=[]
    ),
    functions.messages.GetSavedGifs: lambda: types.messages.SavedGifs(hash=0, gifs=[]),
    functions.messages.GetFeaturedStickers: _no_featured,
    functions.messages.GetFeaturedEmojiStickers: _no_featured,
    functions.messages.SearchStickerSets: lambda: types.messages.FoundStickerSets(hash=0, sets=[]),
    # Emoji pickers.
    functions.messages.GetEmojiGroups: _no_emoji_groups,
    functions.messages.GetEmojiStatusGroups: _no_emoji_groups,
    functions.messages.GetEmojiProfilePhotoGroups: _no_emoji_groups,
    functions.messages.GetEmojiStickerGroups: _no_emoji_groups,
    # Appearance: apps fall back to their built-in themes.
    functions.account.GetThemes: lambda: types.account.Themes(hash=0, themes=[]),
    functions.account.GetWallPapers: lambda: types.account.WallPapers(hash=0, wallpapers=[]),
    functions.account.GetDefaultEmojiStatuses: _no_statuses,
    functions.account.GetRecentEmojiStatuses: _no_statuses,
    functions.account.GetChannelDefaultEmojiStatuses: _no_statuses,
    # No bots, so no attachment menu; no message effects; no tag reactions.
    functions.messages.GetAttachMenuBots: lambda: types.AttachMenuBots(hash=0, bots=[], users=[]),
    functions.messages.GetAvailableEffects: lambda: types.messages.AvailableEffects(
        hash=0, effects=[], documents=[]
    ),
    functions.messages.GetDefaultTagReactions: lambda: types.messages.Reactions(
        hash=0, reactions=[]
    ),
    # No scheduled messages (sends with a schedule date are refused), no premium gift
    # codes to buy, no time zone list to pick from.
    functions.messages.GetScheduledHistory: lambda: types.messages.Messages(
        messages=[], topics=[], chats=[], users=[]
    ),
    functions.payments.GetPremiumGiftCodeOptions: lambda: [],
    functions.help.GetTimezonesList: lambda: types.help.TimezonesList(timezones=[], hash=0),
    # Sign-ins on websites through a bot's login widget: there are no bots here.
    functions.account.GetWebAuthorizations: lambda: types.account.WebAuthorizations(
        authorizations=[], users=[]
    ),
}


def _answer(
    empty: Empty,
) -> Callable[[AuthedContext, TLObject], Awaitable[TLObject | list[TLObject]]]:
    async def handler(ctx: AuthedContext, req: TLObject) -> TLObject | list[TLObject]:
        # Never the not-modified form: an empty list's hash is 0, and a client that
        # sends 0 holds nothing (see hashes.not_modified).
        return empty()

    return handler


class EmptyListHandlers:
    """Every method of ``EMPTY_LISTS``, marked for ``register_all`` as ``@method`` marks."""

    def __init__(self) -> None:
        for function, empty in EMPTY_LISTS.items():
            name = "answer_" + function.TL_NAME.replace(".", "_")
            setattr(self, name, marked(function, _answer(empty)))
