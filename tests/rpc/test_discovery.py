"""Handler classes built from parts by the names of their constructors' parameters."""

from __future__ import annotations

import pytest

from telesrv.rpc.discovery import MissingPart, build_handlers, handler_classes
from telesrv.rpc.profile import ProfileHandlers
from telesrv.rpc.stickers import StickerHandlers
from telesrv.rpc.top_peers import TopPeersHandlers


def _built(parts: dict[str, object], *, partial: bool = False) -> dict[type, object]:
    return {type(h): h for h in build_handlers(parts, partial=partial)}


def test_a_missing_part_is_a_wiring_mistake() -> None:
    with pytest.raises(MissingPart, match="needs a part named"):
        build_handlers({})


def test_partial_builds_what_the_parts_allow() -> None:
    peers = object()
    built = _built({"peers": peers}, partial=True)
    assert StickerHandlers in built  # needs nothing
    assert ProfileHandlers in built
    profile = built[ProfileHandlers]
    assert isinstance(profile, ProfileHandlers) and profile._peers is peers
    assert TopPeersHandlers not in built  # needs top_peers and users_for
    assert len(built) < len(handler_classes())


def test_a_part_given_as_none_is_one_the_process_lacks() -> None:
    built = _built({"peers": None}, partial=True)
    assert ProfileHandlers not in built
    assert StickerHandlers in built
