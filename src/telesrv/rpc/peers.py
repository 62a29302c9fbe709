"""InputUser / InputPeer -> user id, with the access-hash check: the one place for it.

A client may only address a user this server showed it: the access hash it presents
must be the one the projection computed for this viewer. inputUserSelf and
inputPeerSelf are the caller. Anything else (a wrong hash, a chat or channel, a
*FromMessage reference, empty) is USER_ID_INVALID / PEER_ID_INVALID.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from telesrv.rpc.context import RequestContext
from telesrv.services.access_hashes import AccessHashes
from telesrv.tl import types
from telesrv.tl.errors import PeerIdInvalid, UserIdInvalid


class Peers:
    def __init__(self, access_hashes: AccessHashes) -> None:
        self._access_hashes = access_hashes

    def _checked(self, viewer_id: int, user_id: int, access_hash: int) -> bool:
        if user_id == viewer_id:
            return True  # your own id needs no proof (clients send 0 or any hash)
        return user_id > 0 and self._access_hashes.check(viewer_id, user_id, access_hash)

    async def resolve_input_user(self, ctx: RequestContext, input_user: types.TypeInputUser) -> int:
        """The user id an InputUser names; raises USER_ID_INVALID."""
        viewer = ctx.user_id
        if viewer is None:
            raise UserIdInvalid()
        if isinstance(input_user, types.InputUserSelf):
            return viewer
        if isinstance(input_user, types.InputUser) and self._checked(
            viewer, input_user.user_id, input_user.access_hash
        ):
            return int(input_user.user_id)
        raise UserIdInvalid()

    async def resolve_input_peer(self, ctx: RequestContext, input_peer: types.TypeInputPeer) -> int:
        """The user id an InputPeer names (only users exist here); raises PEER_ID_INVALID."""
        viewer = ctx.user_id
        if viewer is None:
            raise PeerIdInvalid()
        if isinstance(input_peer, types.InputPeerSelf):
            return viewer
        if isinstance(input_peer, types.InputPeerUser) and self._checked(
            viewer, input_peer.user_id, input_peer.access_hash
        ):
            return int(input_peer.user_id)
        raise PeerIdInvalid()


# (ctx, InputPeer) -> the user id it names, checking its access hash
PeerResolver = Callable[[RequestContext, "types.TypeInputPeer"], Awaitable[int]]
