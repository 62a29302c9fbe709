"""contacts.getTopPeers (TL <-> domain; the rating is in services/top_peers.py).

Only people exist here, so only the correspondents category can have peers: bots, groups,
channels, calls and forwards are asked for and answered with no category."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext
from telesrv.rpc.hashes import list_hash, not_modified
from telesrv.rpc.registry import method
from telesrv.rpc.render import UsersFor, peer_user
from telesrv.services.top_peers import MAX_TOP_PEERS, TopPeers
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import LimitInvalid


class TopPeersHandlers:
    def __init__(self, top_peers: TopPeers, users_for: UsersFor) -> None:
        self._top_peers = top_peers
        self._users_for = users_for

    @method(functions.contacts.GetTopPeers)
    async def get_top_peers(
        self, ctx: AuthedContext, req: functions.contacts.GetTopPeers
    ) -> TLObject:
        if not 0 <= req.offset < MAX_TOP_PEERS or not 0 <= req.limit <= MAX_TOP_PEERS:
            raise LimitInvalid()
        peers: list[int] = []
        if req.correspondents:
            peers = await self._top_peers.correspondents(ctx.user_id, req.offset, req.limit)
        if not_modified(req.hash, list_hash(peers)):
            return types.contacts.TopPeersNotModified()
        categories: list[types.TopPeerCategoryPeers] = []
        if peers:
            # The most recent first, with the highest rating (clients sort by it).
            categories.append(
                types.TopPeerCategoryPeers(
                    category=types.TopPeerCategoryCorrespondents(),
                    count=len(peers),
                    peers=[
                        types.TopPeer(peer=peer_user(p), rating=float(len(peers) - i))
                        for i, p in enumerate(peers)
                    ],
                )
            )
        users = await self._users_for(ctx.user_id, peers) if peers else []
        return types.contacts.TopPeers(categories=categories, chats=[], users=users)
