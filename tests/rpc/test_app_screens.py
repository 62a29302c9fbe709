"""What apps ask for on their own screens, through the dispatcher the server builds, on real
PostgreSQL and Redis: the empty forms of what this server has none of, NotModified only for
a hash the client really holds, bounds on every input, and top peers from the chat list."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
from conftest import MakeSettings

from telesrv.app import open_resources
from telesrv.rpc.context import RequestContext
from telesrv.rpc.hashes import list_hash, not_modified
from telesrv.rpc.stories import STORIES_STATE
from telesrv.server import Server
from telesrv.store import auth_keys
from telesrv.tl import TLObject, functions, types
from telesrv.tl.service import decode_result
from telesrv.wiring import build_server

CODE = "24680"
_phones = itertools.count(15550900000)
_random_ids = itertools.count(1)


@dataclass
class Device:
    server: Server
    key: int
    user_id: int | None = None

    def ctx(self) -> RequestContext:
        return RequestContext(
            auth_key_id=self.key,
            perm_auth_key_id=self.key,
            session_id=1,
            msg_id=1,
            now=1_800_000_000.0,
            user_id=self.user_id,
        )

    async def outcome(self, request: TLObject) -> Any:
        return await self.server.gateway.dispatcher.call(self.ctx(), request)

    async def __call__(self, request: TLObject) -> Any:
        outcome = await self.outcome(request)
        if outcome.error is not None:
            raise outcome.error
        return decode_result(request, outcome.result)

    async def error(self, request: TLObject) -> str:
        outcome = await self.outcome(request)
        assert outcome.error is not None, f"{request.TL_NAME}: expected an error"
        return str(outcome.error.message)


@dataclass
class Env:
    server: Server

    async def user(self) -> tuple[Device, str]:
        key = int.from_bytes(os.urandom(8), "little", signed=True)
        assert await auth_keys.save_auth_key(self.server.resources.db.pool, key, os.urandom(256))
        device = Device(self.server, key)
        phone = str(next(_phones))
        sent = await device(
            functions.auth.SendCode(
                phone_number=phone, api_id=1, api_hash="h", settings=types.CodeSettings()
            )
        )
        auth = await device(
            functions.auth.SignIn(
                phone_number=phone, phone_code_hash=sent.phone_code_hash, phone_code=CODE
            )
        )
        device.user_id = auth.user.id
        return device, phone


@contextlib.asynccontextmanager
async def open_env(make_settings: MakeSettings, tmp_path: Any) -> AsyncIterator[Env]:
    """A server built as ``serve`` builds it, on the test's databases."""
    settings = make_settings(tmp_path, dev_login_code=CODE, auto_register=True, send_rate_limit=0)
    async with open_resources(settings, warm=False) as resources:
        yield Env(build_server(settings, resources))


@pytest.fixture
async def env(make_settings: MakeSettings, tmp_path: Any) -> AsyncIterator[Env]:
    async with open_env(make_settings, tmp_path) as built:
        yield built


async def input_peer_of(device: Device, phone: str) -> types.InputPeerUser:
    """The other user as ``device`` may name it (its access hash), by importing the phone."""
    imported = await device(
        functions.contacts.ImportContacts(
            contacts=[
                types.InputPhoneContact(client_id=1, phone=phone, first_name="X", last_name="")
            ]
        )
    )
    user = imported.users[0]
    return types.InputPeerUser(user_id=user.id, access_hash=user.access_hash)


async def send(device: Device, peer: types.TypeInputPeer, text: str = "hi") -> None:
    await device(
        functions.messages.SendMessage(peer=peer, message=text, random_id=next(_random_ids))
    )


SELF = types.InputPeerSelf()

# The 13 methods Web K polled and telesrv answered METHOD_NOT_IMPLEMENTED (issue 31).
WEB_K_POLLED: list[TLObject] = [
    functions.messages.GetStickerSet(stickerset=types.InputStickerSetAnimatedEmoji(), hash=0),
    functions.stories.GetAllStories(hidden=True),
    functions.account.GetThemes(format="macos", hash=0),
    functions.messages.GetAttachMenuBots(hash=0),
    functions.messages.GetFavedStickers(hash=0),
    functions.messages.GetSavedGifs(hash=0),
    functions.messages.GetSavedReactionTags(hash=0),
    functions.payments.GetStarsStatus(peer=SELF),
    functions.account.GetContentSettings(),
    functions.contacts.GetTopPeers(correspondents=True, offset=0, limit=30, hash=0),
    functions.messages.GetStickers(emoticon="👍", hash=0),
    functions.messages.ReceivedMessages(max_id=5),
    functions.messages.GetAvailableEffects(hash=0),
    # and the ones it retried once a second in its first full run
    functions.help.GetTimezonesList(hash=0),
    functions.messages.GetPaidReactionPrivacy(),
    functions.messages.GetScheduledHistory(peer=types.InputPeerSelf(), hash=0),
    functions.payments.GetPremiumGiftCodeOptions(),
    # and the ones it asked once a second with a chat open, in its later runs
    functions.messages.GetSavedHistory(
        peer=SELF, offset_id=0, offset_date=0, add_offset=0, limit=50, max_id=0, min_id=0, hash=0
    ),
    functions.messages.GetSavedDialogs(
        offset_date=0, offset_id=0, offset_peer=types.InputPeerEmpty(), limit=100, hash=0
    ),
    functions.messages.GetPinnedSavedDialogs(),
    # and the one its Settings screen asks
    functions.account.GetWebAuthorizations(),
]


async def test_none_of_web_ks_polled_methods_is_unimplemented(env: Env) -> None:
    me, _ = await env.user()
    names = set(env.server.gateway.dispatcher._registry.names())
    for request in WEB_K_POLLED:
        assert request.TL_NAME in names, request.TL_NAME
        outcome = await me.outcome(request)
        assert outcome.error is None, (request.TL_NAME, outcome.error)
        decode_result(request, outcome.result)


async def test_empty_lists_with_hash_zero_and_not_modified_only_for_a_held_hash(
    env: Env,
) -> None:
    me, _ = await env.user()
    empty: dict[type[Any], tuple[type[Any], str]] = {
        functions.messages.GetSavedGifs: (types.messages.SavedGifs, "gifs"),
        functions.messages.GetFavedStickers: (types.messages.FavedStickers, "stickers"),
        functions.messages.GetRecentStickers: (types.messages.RecentStickers, "stickers"),
        functions.messages.GetAllStickers: (types.messages.AllStickers, "sets"),
        functions.messages.GetEmojiStickers: (types.messages.AllStickers, "sets"),
        functions.messages.GetMaskStickers: (types.messages.AllStickers, "sets"),
        functions.messages.GetFeaturedStickers: (types.messages.FeaturedStickers, "sets"),
        functions.messages.GetFeaturedEmojiStickers: (types.messages.FeaturedStickers, "sets"),
        functions.messages.GetEmojiGroups: (types.messages.EmojiGroups, "groups"),
        functions.messages.GetEmojiStatusGroups: (types.messages.EmojiGroups, "groups"),
        functions.messages.GetEmojiProfilePhotoGroups: (types.messages.EmojiGroups, "groups"),
        functions.messages.GetEmojiStickerGroups: (types.messages.EmojiGroups, "groups"),
        functions.messages.GetAttachMenuBots: (types.AttachMenuBots, "bots"),
        functions.messages.GetAvailableEffects: (types.messages.AvailableEffects, "effects"),
        functions.messages.GetSavedReactionTags: (types.messages.SavedReactionTags, "tags"),
        functions.messages.GetDefaultTagReactions: (types.messages.Reactions, "reactions"),
        functions.account.GetWallPapers: (types.account.WallPapers, "wallpapers"),
        functions.account.GetDefaultEmojiStatuses: (types.account.EmojiStatuses, "statuses"),
        functions.account.GetRecentEmojiStatuses: (types.account.EmojiStatuses, "statuses"),
        functions.account.GetChannelDefaultEmojiStatuses: (
            types.account.EmojiStatuses,
            "statuses",
        ),
        functions.payments.GetStarGifts: (types.payments.StarGifts, "gifts"),
    }
    for function, (answer, field) in empty.items():
        result = await me(function(hash=0))
        assert isinstance(result, answer), function.TL_NAME
        assert result.hash == 0 and getattr(result, field) == [], function.TL_NAME
        # A hash the client could not have got from us: the list again, in full.
        assert isinstance(await me(function(hash=77)), answer), function.TL_NAME
    themes = await me(functions.account.GetThemes(format="macos", hash=0))
    assert themes == types.account.Themes(hash=0, themes=[])
    stickers = await me(functions.messages.GetStickers(emoticon="😀", hash=0))
    assert stickers == types.messages.Stickers(hash=0, stickers=[])
    found = await me(functions.messages.SearchStickerSets(q="cats", hash=0))
    assert found == types.messages.FoundStickerSets(hash=0, sets=[])
    zones = await me(functions.help.GetTimezonesList(hash=0))
    assert zones == types.help.TimezonesList(timezones=[], hash=0)
    assert await me(functions.payments.GetPremiumGiftCodeOptions()) == []
    scheduled = await me(functions.messages.GetScheduledHistory(peer=types.InputPeerSelf(), hash=0))
    assert scheduled == types.messages.Messages(messages=[], topics=[], chats=[], users=[])


async def test_paid_reaction_privacy_is_the_default(env: Env) -> None:
    me, _ = await env.user()
    answer = await me(functions.messages.GetPaidReactionPrivacy())
    assert isinstance(answer, types.Updates)
    assert answer.updates == [
        types.UpdatePaidReactionPrivacy(private=types.PaidReactionPrivacyDefault())
    ]


def test_hash_rules() -> None:
    assert list_hash([]) == 0
    assert list_hash([1]) == 1 and list_hash([1, 2]) != list_hash([2, 1])
    assert -(1 << 63) <= list_hash(range(1, 50)) < 1 << 63
    # 0 is "I hold nothing": never NotModified, even when ours is 0 too.
    assert not not_modified(0, 0) and not_modified(5, 5) and not not_modified(5, 6)


async def test_sticker_sets_system_kinds_empty_unknown_ones_invalid(env: Env) -> None:
    me, _ = await env.user()
    ids = set()
    for kind in (
        types.InputStickerSetAnimatedEmoji(),
        types.InputStickerSetAnimatedEmojiAnimations(),
        types.InputStickerSetPremiumGifts(),
        types.InputStickerSetEmojiGenericAnimations(),
        types.InputStickerSetEmojiDefaultStatuses(),
        types.InputStickerSetEmojiDefaultTopicIcons(),
        types.InputStickerSetEmojiChannelDefaultStatuses(),
        types.InputStickerSetDice(emoticon="🎲"),
    ):
        answer = await me(functions.messages.GetStickerSet(stickerset=kind, hash=0))
        assert isinstance(answer, types.messages.StickerSet)
        assert answer.set.count == 0 and answer.documents == [] and answer.set.official
        ids.add(answer.set.id)
    assert len(ids) == 8  # apps cache sets by id
    for unknown in (
        types.InputStickerSetID(id=5, access_hash=6),
        types.InputStickerSetShortName(short_name="cats"),
        types.InputStickerSetEmpty(),
    ):
        request = functions.messages.GetStickerSet(stickerset=unknown, hash=0)
        assert await me.error(request) == "STICKERSET_INVALID"
    too_many = functions.messages.GetCustomEmojiDocuments(document_id=list(range(201)))
    assert await me.error(too_many) == "LIMIT_INVALID"
    assert await me(functions.messages.GetCustomEmojiDocuments(document_id=[1, 2])) == []
    keywords = await me(
        functions.messages.GetEmojiKeywordsDifference(lang_code="en" * 50, from_version=3)
    )
    assert (keywords.version, keywords.keywords, len(keywords.lang_code)) == (3, [], 16)


async def test_stories_feed_state_and_peer_stories(env: Env) -> None:
    me, _ = await env.user()
    bob, bob_phone = await env.user()
    assert bob.user_id is not None
    feed = await me(functions.stories.GetAllStories())
    assert isinstance(feed, types.stories.AllStories)
    assert (feed.count, feed.peer_stories, feed.state) == (0, [], STORIES_STATE)
    same = await me(functions.stories.GetAllStories(state=feed.state))
    assert isinstance(same, types.stories.AllStoriesNotModified)
    assert same.state == STORIES_STATE
    more = await me(functions.stories.GetAllStories(next=True, state=feed.state))
    assert isinstance(more, types.stories.AllStories) and not more.has_more
    stale = await me(functions.stories.GetAllStories(state="x" * 1000))
    assert isinstance(stale, types.stories.AllStories)
    peer = await input_peer_of(me, bob_phone)
    stories = await me(functions.stories.GetPeerStories(peer=peer))
    assert stories.stories.peer == types.PeerUser(user_id=bob.user_id)
    assert stories.stories.stories == [] and [u.id for u in stories.users] == [bob.user_id]
    pinned = await me(functions.stories.GetPinnedStories(peer=peer, offset_id=0, limit=10))
    assert (pinned.count, pinned.stories) == (0, [])
    archive = await me(functions.stories.GetStoriesArchive(peer=SELF, offset_id=0, limit=10))
    assert archive.count == 0
    by_id = await me(functions.stories.GetStoriesByID(peer=peer, id=[1, 2]))
    assert by_id.stories == []
    views = await me(functions.stories.GetStoriesViews(peer=peer, id=[1]))
    assert views.views == []
    wrong = types.InputPeerUser(user_id=bob.user_id, access_hash=peer.access_hash + 1)
    assert await me.error(functions.stories.GetPeerStories(peer=wrong)) == "PEER_ID_INVALID"
    big = functions.stories.GetStoriesByID(peer=peer, id=list(range(101)))
    assert await me.error(big) == "LIMIT_INVALID"
    big_page = functions.stories.GetPinnedStories(peer=peer, offset_id=0, limit=101)
    assert await me.error(big_page) == "LIMIT_INVALID"


async def test_stars_are_zero_and_only_ones_own(env: Env) -> None:
    me, _ = await env.user()
    _, bob_phone = await env.user()
    status = await me(functions.payments.GetStarsStatus(peer=SELF))
    assert status.balance == types.StarsAmount(amount=0, nanos=0)
    assert (status.chats, status.users, status.history) == ([], [], None)
    ton = await me(functions.payments.GetStarsStatus(peer=SELF, ton=True))
    assert ton.balance == types.StarsTonAmount(amount=0)
    history = await me(functions.payments.GetStarsTransactions(peer=SELF, offset="", limit=20))
    assert history.history == [] and history.next_offset is None
    subs = await me(functions.payments.GetStarsSubscriptions(peer=SELF, offset=""))
    assert subs.subscriptions == []
    assert await me(functions.payments.GetStarsTopupOptions()) == []
    bob = await input_peer_of(me, bob_phone)
    assert await me.error(functions.payments.GetStarsStatus(peer=bob)) == "PEER_ID_INVALID"


async def test_settings_defaults(env: Env) -> None:
    me, _ = await env.user()
    content = await me(functions.account.GetContentSettings())
    assert content == types.account.ContentSettings()
    assert await me(functions.account.GetGlobalPrivacySettings()) == (types.GlobalPrivacySettings())
    assert await me(functions.account.GetContactSignUpNotification()) is False


async def test_profile_of_a_chat(env: Env) -> None:
    me, _ = await env.user()
    bob, bob_phone = await env.user()
    peer = await input_peer_of(me, bob_phone)
    user = types.InputUser(user_id=peer.user_id, access_hash=peer.access_hash)
    needs = await me(functions.users.GetRequirementsToContact(id=[user, types.InputUserSelf()]))
    assert needs == [types.RequirementToContactEmpty(), types.RequirementToContactEmpty()]
    too_many = functions.users.GetRequirementsToContact(id=[user] * 101)
    assert await me.error(too_many) == "LIMIT_INVALID"
    forged = types.InputUser(user_id=peer.user_id, access_hash=peer.access_hash ^ 1)
    bad = functions.users.GetRequirementsToContact(id=[forged])
    assert await me.error(bad) == "USER_ID_INVALID"
    photos = await me(functions.photos.GetUserPhotos(user_id=user, offset=0, max_id=0, limit=10))
    assert photos == types.photos.Photos(photos=[], users=[])
    common = await me(functions.messages.GetCommonChats(user_id=user, max_id=0, limit=10))
    assert common == types.messages.Chats(chats=[])
    revenue = await me(functions.account.GetPaidMessagesRevenue(user_id=user))
    assert revenue.stars_amount == 0


async def test_top_peers_are_the_most_recent_private_chats(env: Env) -> None:
    me, _ = await env.user()
    others = [await env.user() for _ in range(3)]
    peers = [await input_peer_of(me, phone) for _, phone in others]
    empty = await me(
        functions.contacts.GetTopPeers(correspondents=True, offset=0, limit=30, hash=0)
    )
    assert empty == types.contacts.TopPeers(categories=[], chats=[], users=[])
    for peer in peers:
        await send(me, peer)
    await send(me, peers[0])  # the first is now the most recent
    await send(me, SELF)  # saved messages: not a correspondent
    top = await me(functions.contacts.GetTopPeers(correspondents=True, offset=0, limit=30, hash=0))
    assert isinstance(top, types.contacts.TopPeers)
    [category] = top.categories
    assert isinstance(category.category, types.TopPeerCategoryCorrespondents)
    order = [cast(types.PeerUser, p.peer).user_id for p in category.peers]
    assert order == [peers[0].user_id, peers[2].user_id, peers[1].user_id]
    ratings = [p.rating for p in category.peers]
    assert ratings == sorted(ratings, reverse=True)
    assert {u.id for u in top.users} == set(order)
    ours = list_hash(order)
    again = functions.contacts.GetTopPeers(correspondents=True, offset=0, limit=30, hash=ours)
    assert isinstance(await me(again), types.contacts.TopPeersNotModified)
    page = await me(functions.contacts.GetTopPeers(correspondents=True, offset=1, limit=1, hash=0))
    assert [p.peer.user_id for p in page.categories[0].peers] == [peers[2].user_id]
    # Categories of bots, groups and channels: nothing here has any.
    bots = await me(functions.contacts.GetTopPeers(bots_inline=True, offset=0, limit=30, hash=0))
    assert bots == types.contacts.TopPeers(categories=[], chats=[], users=[])
    for offset, limit in ((-1, 10), (100, 10), (0, 101), (0, -1)):
        bad = functions.contacts.GetTopPeers(
            correspondents=True, offset=offset, limit=limit, hash=0
        )
        assert await me.error(bad) == "LIMIT_INVALID"


async def test_received_messages_lists_incoming_ones_up_to_max_id(env: Env) -> None:
    me, me_phone = await env.user()
    bob, bob_phone = await env.user()
    to_me = await input_peer_of(bob, me_phone)
    for _ in range(3):
        await send(bob, to_me)
    await send(me, await input_peer_of(me, bob_phone))
    received = await me(functions.messages.ReceivedMessages(max_id=2))
    assert [r.id for r in received] == [1, 2]
    everything = await me(functions.messages.ReceivedMessages(max_id=4))
    assert [r.id for r in everything] == [1, 2, 3]  # 4 is the caller's own message
    # Only the last 100 ids up to max_id are looked at: a far max_id finds none of them.
    assert await me(functions.messages.ReceivedMessages(max_id=2**31 - 1)) == []
    assert await me(functions.messages.ReceivedMessages(max_id=0)) == []
    assert await me(functions.messages.ReceivedMessages(max_id=-5)) == []


def saved_history(peer: Any, limit: int = 50, **kw: Any) -> functions.messages.GetSavedHistory:
    args: dict[str, Any] = dict(offset_id=0, offset_date=0, add_offset=0, max_id=0, min_id=0)
    args.update(kw)
    return functions.messages.GetSavedHistory(peer=peer, limit=limit, hash=0, **args)


async def test_saved_history_is_the_users_own_notes(env: Env) -> None:
    me, _ = await env.user()
    bob, bob_phone = await env.user()
    to_bob = await input_peer_of(me, bob_phone)
    await send(me, to_bob, "to bob")
    for n in range(3):
        await send(me, SELF, f"note {n}")
    notes = await me(saved_history(SELF))
    assert [m.message for m in notes.messages] == ["note 2", "note 1", "note 0"]
    # Paged as history is.
    page = await me(saved_history(SELF, limit=1, offset_id=notes.messages[0].id))
    assert [m.message for m in page.messages] == ["note 1"]
    # Nothing here is saved under another peer.
    other = await me(saved_history(to_bob))
    assert other == types.messages.Messages(messages=[], topics=[], chats=[], users=[])
    # A channel's direct-message topics do not exist here.
    bad = functions.messages.GetSavedHistory(
        parent_peer=to_bob,
        peer=SELF,
        offset_id=0,
        offset_date=0,
        add_offset=0,
        limit=10,
        max_id=0,
        min_id=0,
        hash=0,
    )
    assert await me.error(bad) == "PEER_ID_INVALID"


def saved_dialogs(**kw: Any) -> functions.messages.GetSavedDialogs:
    args: dict[str, Any] = dict(
        offset_date=0, offset_id=0, offset_peer=types.InputPeerEmpty(), limit=100, hash=0
    )
    args.update(kw)
    return functions.messages.GetSavedDialogs(**args)


async def test_saved_dialogs_are_the_users_own_notes_only(env: Env) -> None:
    me, _ = await env.user()
    bob, bob_phone = await env.user()
    empty = types.messages.SavedDialogs(dialogs=[], messages=[], chats=[], users=[])
    assert await me(saved_dialogs()) == empty  # no notes yet
    await send(me, await input_peer_of(me, bob_phone), "to bob")
    assert await me(saved_dialogs()) == empty  # a chat with bob is no saved dialog
    await send(me, SELF, "note 1")
    await send(me, SELF, "note 2")
    listed = await me(saved_dialogs())
    assert isinstance(listed, types.messages.SavedDialogs)
    [dialog] = listed.dialogs
    assert isinstance(dialog, types.SavedDialog) and me.user_id is not None
    assert dialog.peer == types.PeerUser(user_id=me.user_id) and not dialog.pinned
    [top] = listed.messages
    assert isinstance(top, types.Message)
    assert top.id == dialog.top_message and top.message == "note 2"
    assert [u.id for u in listed.users] == [me.user_id]
    # Sent whole each time, with the newest note on top.
    await send(me, SELF, "note 3")
    again = await me(saved_dialogs(hash=12345))
    assert [m.message for m in again.messages] == ["note 3"]
    assert again.dialogs[0].top_message == again.messages[0].id
    # The one dialog is on the first page only; nothing is pinned; no channel topics.
    assert await me(saved_dialogs(offset_id=top.id, offset_date=1)) == empty
    assert await me(functions.messages.GetPinnedSavedDialogs()) == empty
    assert await me.error(saved_dialogs(parent_peer=SELF)) == "PEER_ID_INVALID"
