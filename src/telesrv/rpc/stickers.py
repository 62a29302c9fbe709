"""Sticker sets, custom emoji and emoji keywords: this server has none, so each answer is
Telegram's empty form (the plain lists of stickers and GIFs are in empty_lists.py).

Apps ask for these on every start and again on timers; an error instead of the empty form
makes them retry (Web K asks again each time it wants a set it could not load).
"""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.hashes import not_modified
from telesrv.rpc.registry import method
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import LimitInvalid, StickersetInvalid

# Telegram takes at most 200 custom emoji ids per messages.getCustomEmojiDocuments.
MAX_CUSTOM_EMOJI_IDS = 200
# Language codes are short ("en", "pt-br"); an echoed one is cut to this.
MAX_LANG_CODE = 16

# The sets Telegram itself provides, which apps load by kind rather than by id: each is
# answered as an empty official set (the client caches it and stops asking) with an id of
# its own, since apps key their cache by the set's id.
_SYSTEM_SETS: dict[type[TLObject], tuple[int, str, bool]] = {
    types.InputStickerSetAnimatedEmoji: (1, "AnimatedEmojies", False),
    types.InputStickerSetAnimatedEmojiAnimations: (2, "EmojiAnimations", False),
    types.InputStickerSetPremiumGifts: (3, "GiftsPremium", False),
    types.InputStickerSetEmojiGenericAnimations: (4, "EmojiGenericAnimations", True),
    types.InputStickerSetEmojiDefaultStatuses: (5, "StatusEmojiWhite", True),
    types.InputStickerSetEmojiDefaultTopicIcons: (6, "Topics", True),
    types.InputStickerSetEmojiChannelDefaultStatuses: (7, "ChannelStatusEmoji", True),
    types.InputStickerSetTonGifts: (8, "TonGifts", False),
    types.InputStickerSetDice: (9, "Dice", False),
}


def empty_system_set(kind: type[TLObject]) -> types.messages.StickerSet:
    set_id, short_name, emojis = _SYSTEM_SETS[kind]
    return types.messages.StickerSet(
        set=types.StickerSet(
            id=set_id,
            access_hash=0,
            title=short_name,
            short_name=short_name,
            count=0,
            hash=0,
            official=True,
            emojis=emojis,
        ),
        packs=[],
        keywords=[],
        documents=[],
    )


class StickerHandlers:
    """messages.getStickerSet, custom emoji and emoji keywords (the empty lists are in
    empty_lists.py)."""

    @method(functions.messages.GetStickerSet)
    async def get_sticker_set(
        self, ctx: AuthedContext, req: functions.messages.GetStickerSet
    ) -> TLObject:
        kind = type(req.stickerset)
        if kind not in _SYSTEM_SETS:
            # By id or short name: no such set exists here (Telegram's answer for an
            # unknown set). inputStickerSetEmpty names none.
            raise StickersetInvalid()
        answer = empty_system_set(kind)
        if not_modified(req.hash, answer.set.hash):
            return types.messages.StickerSetNotModified()
        return answer

    @method(functions.messages.GetCustomEmojiDocuments)
    async def get_custom_emoji_documents(
        self, ctx: AuthedContext, req: functions.messages.GetCustomEmojiDocuments
    ) -> list[TLObject]:
        if len(req.document_id) > MAX_CUSTOM_EMOJI_IDS:
            raise LimitInvalid()
        return []  # no custom emoji exist here: none of the ids names one

    @method(functions.messages.GetEmojiKeywords)
    async def get_emoji_keywords(
        self, ctx: AuthedContext, req: functions.messages.GetEmojiKeywords
    ) -> TLObject:
        return types.EmojiKeywordsDifference(
            lang_code=req.lang_code[:MAX_LANG_CODE], from_version=0, version=0, keywords=[]
        )

    @method(functions.messages.GetEmojiKeywordsDifference)
    async def get_emoji_keywords_difference(
        self, ctx: AuthedContext, req: functions.messages.GetEmojiKeywordsDifference
    ) -> TLObject:
        # No keywords, ever: the client's version stays where it is.
        version = max(0, req.from_version)
        return types.EmojiKeywordsDifference(
            lang_code=req.lang_code[:MAX_LANG_CODE],
            from_version=version,
            version=version,
            keywords=[],
        )
