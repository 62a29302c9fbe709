"""The forward/search handlers' TL side: options this server does not implement get explicit errors
before any work, from_id maps to a direction, filters without text matches are empty."""

from __future__ import annotations

from typing import Any, cast

import pytest

from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.forwards import ForwardHandlers, fwd_header
from telesrv.rpc.search import SearchHandlers
from telesrv.rpc.stored_tl import decode_object
from telesrv.services.search import SearchPage, SearchQuery
from telesrv.tl import functions, types
from telesrv.tl.errors import (
    EffectIdInvalid,
    FolderIdInvalid,
    PaymentUnsupported,
    PeerIdInvalid,
    ReplyMessageIdInvalid,
    ReplyToMonoforumPeerInvalid,
    ScheduleDateInvalid,
    SendAsPeerInvalid,
    ShortcutInvalid,
    StoryIdInvalid,
    SuggestedPostPeerInvalid,
    TopicIdInvalid,
)

ME, BOB, CAROL = 100, 200, 300


class FakeExtras:
    def __init__(self) -> None:
        self.searches: list[SearchQuery] = []
        self.forwards = 0

    async def forward(self, *args: Any) -> list[Any]:
        self.forwards += 1
        return []

    async def search(self, q: SearchQuery) -> SearchPage:
        self.searches.append(q)
        return SearchPage([], 0)


async def resolve(ctx: RequestContext, peer: Any) -> int:
    if isinstance(peer, types.InputPeerSelf):
        return ME
    if isinstance(peer, types.InputPeerUser):
        return int(peer.user_id)
    raise PeerIdInvalid()


async def no_users(viewer: int, ids: Any) -> list[Any]:
    return []


@pytest.fixture
def extras() -> FakeExtras:
    return FakeExtras()


class NoHiddenAuthors:
    """Privacy in which no author hides forwards."""

    async def hidden_author_names(self, viewer: int, authors: list[int]) -> dict[int, str]:
        return {}


@pytest.fixture
def forwards(extras: FakeExtras) -> ForwardHandlers:
    return ForwardHandlers(extras, resolve, no_users, NoHiddenAuthors())  # type: ignore[arg-type]


@pytest.fixture
def searches(extras: FakeExtras) -> SearchHandlers:
    return SearchHandlers(extras, resolve, no_users)  # type: ignore[arg-type]


def ctx() -> AuthedContext:
    return AuthedContext(
        auth_key_id=1, perm_auth_key_id=1, session_id=2, msg_id=3, now=1000.0, user_id=ME
    )


def forward(**kw: Any) -> Any:
    return functions.messages.ForwardMessages(
        from_peer=types.InputPeerUser(user_id=BOB, access_hash=0),
        id=[1],
        random_id=[9],
        to_peer=types.InputPeerUser(user_id=CAROL, access_hash=0),
        **kw,
    )


@pytest.mark.parametrize(
    ("option", "error"),
    [
        ({"schedule_date": 2_000_000_000}, ScheduleDateInvalid),
        ({"schedule_repeat_period": 86400}, ScheduleDateInvalid),
        ({"quick_reply_shortcut": types.InputQuickReplyShortcutId(shortcut_id=1)}, ShortcutInvalid),
        ({"effect": 5}, EffectIdInvalid),
        ({"allow_paid_stars": 10}, PaymentUnsupported),
        (
            {"suggested_post": types.SuggestedPost(accepted=False, rejected=False)},
            SuggestedPostPeerInvalid,
        ),
        ({"send_as": types.InputPeerSelf()}, SendAsPeerInvalid),
        ({"top_msg_id": 5}, TopicIdInvalid),
        (
            {"reply_to": types.InputReplyToStory(peer=types.InputPeerSelf(), story_id=1)},
            StoryIdInvalid,
        ),
        (
            {"reply_to": types.InputReplyToMonoForum(monoforum_peer_id=types.InputPeerSelf())},
            ReplyToMonoforumPeerInvalid,
        ),
        ({"reply_to": types.InputReplyToMessage(reply_to_msg_id=1)}, ReplyMessageIdInvalid),
    ],
)
async def test_out_of_scope_forward_options(
    forwards: ForwardHandlers, extras: FakeExtras, option: dict[str, Any], error: type
) -> None:
    with pytest.raises(error):
        await forwards.forward_messages(ctx(), forward(**option))
    assert extras.forwards == 0
    await forwards.forward_messages(ctx(), forward())
    assert extras.forwards == 1


def test_built_header_names_author_and_date() -> None:
    header = decode_object(fwd_header(BOB, 1234))
    assert isinstance(header, types.MessageFwdHeader)
    assert header.from_id == types.PeerUser(user_id=BOB) and header.date == 1234


def search(peer: Any, **kw: Any) -> Any:
    values: dict[str, Any] = dict(
        peer=peer,
        q="x",
        filter=types.InputMessagesFilterEmpty(),
        min_date=0,
        max_date=0,
        offset_id=0,
        add_offset=0,
        limit=10,
        max_id=0,
        min_id=0,
        hash=0,
    )
    values.update(kw)
    return functions.messages.Search(**values)


async def test_search_maps_from_id_to_a_direction(
    searches: SearchHandlers, extras: FakeExtras
) -> None:
    bob = types.InputPeerUser(user_id=BOB, access_hash=0)
    carol = types.InputPeerUser(user_id=CAROL, access_hash=0)
    await searches.search(ctx(), search(bob, from_id=types.InputPeerSelf()))
    await searches.search(ctx(), search(bob, from_id=bob))
    await searches.search(ctx(), search(types.InputPeerEmpty(), from_id=carol))
    await searches.search(ctx(), search(types.InputPeerEmpty()))
    assert [(q.peer, q.out) for q in extras.searches] == [
        (BOB, True),
        (BOB, False),
        (CAROL, False),  # another user's messages are all in the chat with them
        (None, None),
    ]
    # Someone who is not in the chat wrote nothing in it; there are no topics.
    empty = [
        await searches.search(ctx(), search(bob, from_id=carol)),
        await searches.search(ctx(), search(bob, top_msg_id=1)),
    ]
    assert all(isinstance(r, types.messages.Messages) and not r.messages for r in empty)
    assert len(extras.searches) == 4
    # The pinned filter searches the chat's pinned messages, of every kind.
    await searches.search(ctx(), search(bob, filter=types.InputMessagesFilterPinned()))
    assert len(extras.searches) == 5
    assert extras.searches[-1].pinned and extras.searches[-1].media_kinds is None
    # Topic 0 is no topic (Web K sends it so): the chat is searched.
    await searches.search(ctx(), search(bob, top_msg_id=0, q="history 14"))
    assert len(extras.searches) == 6 and extras.searches[-1].text == "history 14"
    # Saved messages all sit under the user's own notes: searching that saved sub-chat
    # of their own chat searches the chat; any other sub-chat has nothing.
    me = types.InputPeerSelf()
    await searches.search(ctx(), search(me, saved_peer_id=me))
    assert len(extras.searches) == 7 and extras.searches[-1].peer == ME
    nothing = [
        await searches.search(ctx(), search(me, saved_peer_id=bob)),
        await searches.search(ctx(), search(bob, saved_peer_id=me)),
    ]
    assert all(not cast(types.messages.Messages, r).messages for r in nothing)
    assert len(extras.searches) == 7
    # A shared-media filter searches the messages of its kinds.
    await searches.search(ctx(), search(bob, filter=types.InputMessagesFilterPhotoVideo()))
    assert extras.searches[-1].media_kinds == ("photo", "video")


async def test_search_global_options(searches: SearchHandlers, extras: FakeExtras) -> None:
    def request(**kw: Any) -> Any:
        values: dict[str, Any] = dict(
            q="x",
            filter=types.InputMessagesFilterEmpty(),
            min_date=0,
            max_date=0,
            offset_rate=0,
            offset_peer=types.InputPeerEmpty(),
            offset_id=0,
            limit=10,
        )
        values.update(kw)
        return functions.messages.SearchGlobal(**values)

    with pytest.raises(FolderIdInvalid):
        await searches.search_global(ctx(), request(folder_id=5))
    for kw in (
        {"broadcasts_only": True},
        {"groups_only": True},
        {"filter": types.InputMessagesFilterMyMentions()},
    ):
        answer = await searches.search_global(ctx(), request(**kw))
        assert isinstance(answer, types.messages.Messages) and not answer.messages
    assert extras.searches == []
    await searches.search_global(ctx(), request(users_only=True, offset_id=50, max_date=70))
    [q] = extras.searches
    assert (q.peer, q.offset_id, q.max_date) == (None, 50, 70)
