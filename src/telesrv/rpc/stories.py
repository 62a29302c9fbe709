"""Stories: nobody can post one here, so every list is empty.

stories.getAllStories carries a state string that a client sends back to ask what changed;
the state never moves, so a client that sends it back is told nothing changed."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, peer_user
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import LimitInvalid

# The one state of an account's (empty) story feed.
STORIES_STATE = "telesrv-stories-0"
# Telegram's bounds on the ids of one call (stories.getStoriesByID and friends).
MAX_STORY_IDS = 100
MAX_STORIES_LIMIT = 100


def _no_stories() -> types.stories.Stories:
    return types.stories.Stories(count=0, stories=[], chats=[], users=[])


class StoriesHandlers:
    def __init__(self, resolve_peer: PeerResolver, users_for: UsersFor) -> None:
        self._resolve_peer = resolve_peer
        self._users_for = users_for

    @method(functions.stories.GetAllStories)
    async def get_all_stories(
        self, ctx: AuthedContext, req: functions.stories.GetAllStories
    ) -> TLObject:
        stealth = types.StoriesStealthMode()
        if req.state == STORIES_STATE and not req.next:
            return types.stories.AllStoriesNotModified(state=STORIES_STATE, stealth_mode=stealth)
        # A first call (no state), a stale or foreign state, or a next page: the whole
        # feed, which is empty, with no more to come.
        return types.stories.AllStories(
            count=0,
            state=STORIES_STATE,
            peer_stories=[],
            chats=[],
            users=[],
            stealth_mode=stealth,
        )

    @method(functions.stories.GetPeerStories)
    async def get_peer_stories(
        self, ctx: AuthedContext, req: functions.stories.GetPeerStories
    ) -> TLObject:
        peer = await self._resolve_peer(ctx, req.peer)
        return types.stories.PeerStories(
            stories=types.PeerStories(peer=peer_user(peer), stories=[]),
            chats=[],
            users=await self._users_for(ctx.user_id, [peer]),
        )

    @method(functions.stories.GetPinnedStories)
    async def get_pinned_stories(
        self, ctx: AuthedContext, req: functions.stories.GetPinnedStories
    ) -> TLObject:
        if not 0 <= req.limit <= MAX_STORIES_LIMIT:
            raise LimitInvalid()
        await self._resolve_peer(ctx, req.peer)
        return _no_stories()

    @method(functions.stories.GetStoriesArchive)
    async def get_stories_archive(
        self, ctx: AuthedContext, req: functions.stories.GetStoriesArchive
    ) -> TLObject:
        if not 0 <= req.limit <= MAX_STORIES_LIMIT:
            raise LimitInvalid()
        await self._resolve_peer(ctx, req.peer)
        return _no_stories()

    @method(functions.stories.GetStoriesByID)
    async def get_stories_by_id(
        self, ctx: AuthedContext, req: functions.stories.GetStoriesByID
    ) -> TLObject:
        if len(req.id) > MAX_STORY_IDS:
            raise LimitInvalid()
        await self._resolve_peer(ctx, req.peer)
        return _no_stories()  # none of the ids names a story

    @method(functions.stories.GetStoriesViews)
    async def get_stories_views(
        self, ctx: AuthedContext, req: functions.stories.GetStoriesViews
    ) -> TLObject:
        if len(req.id) > MAX_STORY_IDS:
            raise LimitInvalid()
        await self._resolve_peer(ctx, req.peer)
        return types.stories.StoryViews(views=[], users=[])
