"""messages.getDialogFilters, updateDialogFilter, updateDialogFiltersOrder,
toggleDialogFilterTags, getSuggestedDialogFilters (TL <-> domain; the rules are in
services/dialog_filters.py)."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.messages import checked_entities
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.stored_tl import decode_filter
from telesrv.services.dialog_filters import (
    MAX_FILTER_CHATS,
    DialogFilterService,
    FilterSpec,
    check_filter_id,
)
from telesrv.services.messages import Origin
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import (
    ChatlistExcludeInvalid,
    EmoticonInvalid,
    FilterIdInvalid,
    FilterIncludeTooMuch,
    FilterNotSupported,
)

_CATEGORIES = ("contacts", "non_contacts", "groups", "broadcasts", "bots")
# A filter's icon is one emoji; the longest (a family or a flag sequence joined by
# zero-width joiners) stays well inside this many characters.
MAX_FILTER_EMOTICON = 16


def _title(text: str) -> types.TextWithEntities:
    return types.TextWithEntities(text=text, entities=[])


# What Telegram suggests to a new user: the filters every app knows how to show.
SUGGESTED = [
    (
        types.DialogFilter(
            id=2,
            title=_title("Unread"),
            contacts=True,
            non_contacts=True,
            groups=True,
            broadcasts=True,
            bots=True,
            exclude_read=True,
            pinned_peers=[],
            include_peers=[],
            exclude_peers=[],
        ),
        "New messages from all chats",
    ),
    (
        types.DialogFilter(
            id=3,
            title=_title("Personal"),
            contacts=True,
            non_contacts=True,
            pinned_peers=[],
            include_peers=[],
            exclude_peers=[],
        ),
        "Only messages from personal chats",
    ),
]


class DialogFilterHandlers:
    def __init__(self, dialog_filters: DialogFilterService, resolve_peer: PeerResolver) -> None:
        self._filters = dialog_filters
        self._resolve_peer = resolve_peer

    @method(functions.messages.GetDialogFilters)
    async def get_dialog_filters(
        self, ctx: AuthedContext, req: functions.messages.GetDialogFilters
    ) -> TLObject:
        """The stored filters after "all chats" (dialogFilterDefault), in the user's order."""
        found = await self._filters.filters(ctx.user_id)
        listed: list[types.TypeDialogFilter] = [types.DialogFilterDefault()]
        listed += [decode_filter(f.filter) for f in found.filters]
        return types.messages.DialogFilters(tags_enabled=found.tags_enabled, filters=listed)

    @method(functions.messages.GetSuggestedDialogFilters)
    async def get_suggested_dialog_filters(
        self, ctx: AuthedContext, req: functions.messages.GetSuggestedDialogFilters
    ) -> list[TLObject]:
        return [types.DialogFilterSuggested(filter=f, description=d) for f, d in SUGGESTED]

    @method(functions.messages.UpdateDialogFilter)
    async def update_dialog_filter(
        self, ctx: AuthedContext, req: functions.messages.UpdateDialogFilter
    ) -> bool:
        origin = Origin(ctx.auth_key_id, ctx.session_id)
        f = req.filter
        if f is None:
            await self._filters.delete(ctx.user_id, req.id, origin, int(ctx.now))
            return True
        if isinstance(f, types.DialogFilterChatlist):
            raise FilterNotSupported()  # shared chat lists need chats, which do not exist
        if not isinstance(f, types.DialogFilter) or f.id != req.id:
            raise FilterIdInvalid()
        check_filter_id(f.id)
        # Bounded before any peer is resolved: a huge list costs nothing.
        if len(f.pinned_peers) + len(f.include_peers) > MAX_FILTER_CHATS:
            raise FilterIncludeTooMuch()
        if len(f.exclude_peers) > MAX_FILTER_CHATS:
            raise ChatlistExcludeInvalid()
        if f.emoticon is not None and len(f.emoticon) > MAX_FILTER_EMOTICON:
            raise EmoticonInvalid()
        # The title's entities are stored and shown like a message's: the same bounds
        # on count, offsets and carried text, and mentions become messageEntityMentionName.
        entities = await checked_entities(ctx, f.title.entities, f.title.text, self._resolve_peer)
        f.title.entities = entities or []
        for peer in [*f.pinned_peers, *f.include_peers, *f.exclude_peers]:
            await self._resolve_peer(ctx, peer)  # PEER_ID_INVALID for what it cannot see
        spec = FilterSpec(
            filter_id=f.id,
            title=f.title.text,
            any_category=any(getattr(f, c) for c in _CATEGORIES),
            pinned=len(f.pinned_peers),
            included=len(f.include_peers),
            excluded=len(f.exclude_peers),
            data=bytes(f.to_bytes()),
        )
        await self._filters.save(ctx.user_id, spec, origin, int(ctx.now))
        return True

    @method(functions.messages.UpdateDialogFiltersOrder)
    async def update_dialog_filters_order(
        self, ctx: AuthedContext, req: functions.messages.UpdateDialogFiltersOrder
    ) -> bool:
        await self._filters.reorder(
            ctx.user_id, req.order[:256], Origin(ctx.auth_key_id, ctx.session_id), int(ctx.now)
        )
        return True

    @method(functions.messages.ToggleDialogFilterTags)
    async def toggle_dialog_filter_tags(
        self, ctx: AuthedContext, req: functions.messages.ToggleDialogFilterTags
    ) -> bool:
        await self._filters.toggle_tags(
            ctx.user_id, bool(req.enabled), Origin(ctx.auth_key_id, ctx.session_id), int(ctx.now)
        )
        return True
