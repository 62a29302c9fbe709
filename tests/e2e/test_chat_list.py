"""The chat list across two devices of one account, with unmodified Telethon: pins,
reorder, unread mark, archive, mute and draft reach the other device live without a
getDifference, getDialogs shows them on both, and an offline device catches up."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from telethon import TelegramClient, errors, functions, types

from telesrv.store import dialogs as dialogs_store

from .conftest import ClientFactory, RunningServer
from .test_state_updates import collect, count_get_difference, sign_in

KINDS = (
    types.UpdateDialogPinned,
    types.UpdatePinnedDialogs,
    types.UpdateDialogUnreadMark,
    types.UpdateFolderPeers,
    types.UpdateNotifySettings,
    types.UpdateDraftMessage,
    types.UpdateDialogFilter,
    types.UpdatePeerSettings,
)
FOREVER = 2**31 - 1


def dialog_peer(entity: Any) -> types.InputDialogPeer:
    return types.InputDialogPeer(peer=entity)


async def main_list(client: TelegramClient, folder: int | None = 0) -> Any:
    return await client(
        functions.messages.GetDialogsRequest(
            offset_date=None,
            offset_id=0,
            offset_peer=types.InputPeerEmpty(),
            limit=100,
            hash=0,
            folder_id=folder,
        )
    )


async def setup(make_client: ClientFactory, *, updates: bool = True) -> tuple[Any, ...]:
    """Alice on a phone and a tablet, and three peers who each wrote to her."""
    alice = await sign_in(make_client, updates=False)
    me = await alice.get_me()
    tablet = await sign_in(make_client, "+" + me.phone, updates=updates)
    peers = []
    await alice(functions.account.UpdateUsernameRequest(f"chat{me.id}"))
    for n in range(3):
        peer = await sign_in(make_client, updates=False)
        await peer.send_message(await peer.get_input_entity(f"chat{me.id}"), f"hi {n}")
        peers.append(peer)
    ids = [(await p.get_me()).id for p in peers]
    await alice.get_dialogs()  # caches the peers' access hashes
    await tablet.get_dialogs()
    inputs = [await alice.get_input_entity(i) for i in ids]
    return alice, tablet, ids, inputs


async def error_of(call: Any) -> str:
    """The name of Telethon's class for the RPC error a call is answered with, or the
    error's own name when Telethon has no class for it."""
    try:
        await call
    except errors.BadRequestError as e:
        return e.message if type(e) is errors.BadRequestError else type(e).__name__
    raise AssertionError("no error")


async def next_update(queue: asyncio.Queue[Any], kind: type) -> Any:
    update = await asyncio.wait_for(queue.get(), 10)
    assert isinstance(update, kind), update
    return update


async def test_chat_list_changes_reach_the_other_device_live(
    make_client: ClientFactory,
) -> None:
    alice, tablet, (bob, carol, dave), (bob_in, carol_in, dave_in) = await setup(make_client)
    diffs = count_get_difference(tablet)
    seen = collect(tablet, *KINDS)

    await alice(functions.messages.ToggleDialogPinRequest(peer=dialog_peer(bob_in), pinned=True))
    pin = await next_update(seen, types.UpdateDialogPinned)
    assert pin.pinned and pin.peer == types.DialogPeer(types.PeerUser(bob))
    await alice(functions.messages.ToggleDialogPinRequest(peer=dialog_peer(carol_in), pinned=True))
    await next_update(seen, types.UpdateDialogPinned)
    await alice(
        functions.messages.ReorderPinnedDialogsRequest(
            folder_id=0, order=[dialog_peer(bob_in), dialog_peer(carol_in)], force=True
        )
    )
    order = await next_update(seen, types.UpdatePinnedDialogs)
    assert [p.peer.user_id for p in order.order] == [bob, carol]

    await alice(functions.messages.MarkDialogUnreadRequest(peer=dialog_peer(dave_in), unread=True))
    mark = await next_update(seen, types.UpdateDialogUnreadMark)
    assert mark.unread and mark.peer.peer == types.PeerUser(dave)

    archived = await alice(
        functions.folders.EditPeerFoldersRequest([types.InputFolderPeer(dave_in, folder_id=1)])
    )
    [moved] = archived.updates
    assert isinstance(moved, types.UpdateFolderPeers) and moved.pts_count == 1
    folder = await next_update(seen, types.UpdateFolderPeers)
    assert folder.folder_peers == [types.FolderPeer(types.PeerUser(dave), 1)]
    assert folder.pts == moved.pts

    await alice(
        functions.account.UpdateNotifySettingsRequest(
            peer=types.InputNotifyPeer(carol_in),
            settings=types.InputPeerNotifySettings(mute_until=FOREVER),
        )
    )
    mute = await next_update(seen, types.UpdateNotifySettings)
    assert mute.peer == types.NotifyPeer(types.PeerUser(carol))
    assert mute.notify_settings.mute_until.timestamp() == FOREVER

    work = types.DialogFilter(
        id=2,
        title=types.TextWithEntities(text="Work", entities=[]),
        pinned_peers=[carol_in],
        include_peers=[bob_in],
        exclude_peers=[],
    )
    assert await alice(functions.messages.UpdateDialogFilterRequest(id=2, filter=work))
    created = await next_update(seen, types.UpdateDialogFilter)
    assert created.id == 2 and created.filter.title.text == "Work"
    assert [p.user_id for p in created.filter.include_peers] == [bob]

    await alice(functions.messages.SaveDraftRequest(peer=bob_in, message="to be continued"))
    draft = await next_update(seen, types.UpdateDraftMessage)
    assert draft.peer == types.PeerUser(bob) and draft.draft.message == "to be continued"

    # Carol is no contact of Alice's and started the chat: her bar offers add, block
    # and report, until Alice hides it.
    bar = await tablet(functions.messages.GetPeerSettingsRequest(carol_in))
    assert bar.settings.add_contact and bar.settings.block_contact and bar.settings.report_spam
    full = (await tablet(functions.users.GetFullUserRequest(carol_in))).full_user
    assert full.settings.add_contact and full.settings.report_spam
    assert full.notify_settings.mute_until.timestamp() == FOREVER
    await alice(functions.messages.HidePeerSettingsBarRequest(carol_in))
    hidden = await next_update(seen, types.UpdatePeerSettings)
    assert hidden.peer == types.PeerUser(carol) and not hidden.settings.add_contact
    bar = await tablet(functions.messages.GetPeerSettingsRequest(carol_in))
    assert not (bar.settings.add_contact or bar.settings.block_contact or bar.settings.report_spam)
    full = (await tablet(functions.users.GetFullUserRequest(carol_in))).full_user
    assert not full.settings.add_contact

    assert diffs[0] == 0  # every change arrived live, none looked like a gap

    for client in (alice, tablet):
        listing = await main_list(client)
        rest = listing.dialogs
        assert [d.peer.user_id for d in rest] == [bob, carol]
        assert [d.pinned for d in rest] == [True, True]
        assert rest[0].draft.message == "to be continued"
        assert rest[1].notify_settings.mute_until.timestamp() == FOREVER
        archive = await main_list(client, 1)
        [only] = archive.dialogs
        assert only.peer.user_id == dave and only.folder_id == 1 and only.unread_mark
        settings = await client(
            functions.account.GetNotifySettingsRequest(types.InputNotifyPeer(carol_in))
        )
        assert settings.mute_until.timestamp() == FOREVER
        pinned = await client(functions.messages.GetPinnedDialogsRequest(folder_id=0))
        head, *pins = pinned.dialogs
        assert isinstance(head, types.DialogFolder) and head.folder.id == 1
        assert head.peer == types.PeerUser(dave)
        assert [d.peer.user_id for d in pins] == [bob, carol]
        marks = await client(functions.messages.GetDialogUnreadMarksRequest())
        assert marks == [types.DialogPeer(types.PeerUser(dave))]
        filters = await client(functions.messages.GetDialogFiltersRequest())
        default, mine = filters.filters
        assert isinstance(default, types.DialogFilterDefault)
        assert mine.id == 2 and [p.user_id for p in mine.pinned_peers] == [carol]
        in_work = await main_list(client, 2)  # the filter's chats: pinned first
        assert [d.peer.user_id for d in in_work.dialogs] == [carol, bob]
        drafts = await client(functions.messages.GetAllDraftsRequest())
        assert [u.draft.message for u in drafts.updates] == ["to be continued"]
    # Telethon's own listing (no folder: everything) marks the archived chat.
    by_id = {d.id: d for d in await tablet.get_dialogs()}
    assert by_id[dave].archived and not by_id[bob].archived and by_id[bob].pinned

    # Reading the marked chat clears the mark, and the other device is told.
    await alice(functions.messages.ReadHistoryRequest(peer=dave_in, max_id=0))
    cleared = await next_update(seen, types.UpdateDialogUnreadMark)
    assert not cleared.unread and cleared.peer.peer == types.PeerUser(dave)
    # Sending with clear_draft empties the draft on the other device; and as Alice had
    # not written in Bob's chat yet (he started it), the send closes its bar too. The
    # two are state events of two transactions after the send, whose outbox rows two
    # workers may push in either order (each carries its whole state), so both are
    # awaited, in any order.
    await alice.send_message(bob_in, "continued", clear_draft=True)
    after_send = [await asyncio.wait_for(seen.get(), 10) for _ in range(2)]
    by_kind = {type(u): u for u in after_send}
    # A getDifference gives back the state updates since the device's cursor, pushed
    # live or not (docs/updates.md): one here would show as earlier updates again.
    assert set(by_kind) == {types.UpdateDraftMessage, types.UpdatePeerSettings}, (
        after_send,
        f"getDifference calls: {diffs[0]}",
    )
    emptied = by_kind[types.UpdateDraftMessage]
    assert emptied.peer == types.PeerUser(bob)
    assert isinstance(emptied.draft, types.DraftMessageEmpty)
    closed = by_kind[types.UpdatePeerSettings]
    assert closed.peer == types.PeerUser(bob) and not closed.settings.add_contact
    assert diffs[0] == 0


async def test_an_offline_device_catches_up_on_the_chat_list(make_client: ClientFactory) -> None:
    alice, tablet, (bob, _, dave), (bob_in, _, dave_in) = await setup(make_client, updates=False)
    await alice(functions.messages.ToggleDialogPinRequest(peer=dialog_peer(bob_in), pinned=True))
    await alice(
        functions.folders.EditPeerFoldersRequest([types.InputFolderPeer(dave_in, folder_id=1)])
    )
    before = await tablet(functions.updates.GetStateRequest())
    await tablet.disconnect()

    await alice(functions.messages.ToggleDialogPinRequest(peer=dialog_peer(bob_in), pinned=False))
    await alice(
        functions.folders.EditPeerFoldersRequest([types.InputFolderPeer(dave_in, folder_id=0)])
    )

    await tablet.connect()
    diff = await tablet(
        functions.updates.GetDifferenceRequest(pts=before.pts, date=before.date, qts=0)
    )
    assert isinstance(diff, types.updates.Difference) and diff.new_messages == []
    kinds = {type(u): u for u in diff.other_updates}
    unpinned = kinds[types.UpdateDialogPinned]
    assert not unpinned.pinned and unpinned.peer.peer == types.PeerUser(bob)
    back = kinds[types.UpdateFolderPeers]
    assert back.folder_peers == [types.FolderPeer(types.PeerUser(dave), 0)]
    assert diff.state.pts == before.pts + 1 == back.pts  # only the folder move took a pts
    listing = await main_list(tablet)
    assert {d.peer.user_id for d in listing.dialogs} >= {bob, dave}
    assert not any(getattr(d, "pinned", False) for d in listing.dialogs)
    assert not any(isinstance(d, types.DialogFolder) for d in listing.dialogs)


async def test_chat_list_errors(make_client: ClientFactory) -> None:
    alice, _, _, inputs = await setup(make_client, updates=False)
    stranger = await sign_in(make_client, updates=False)
    stranger_me = await stranger.get_me()
    await stranger(functions.account.UpdateUsernameRequest(f"nobody{stranger_me.id}"))
    nobody = await alice.get_input_entity(f"nobody{stranger_me.id}")
    assert (
        await error_of(
            alice(functions.messages.ToggleDialogPinRequest(peer=dialog_peer(nobody), pinned=True))
        )
        == "PeerHistoryEmptyError"
    )
    assert (
        await error_of(
            alice(functions.messages.MarkDialogUnreadRequest(peer=dialog_peer(nobody), unread=True))
        )
        == "PeerIdInvalidError"
    )
    assert (
        await error_of(alice(functions.messages.GetPinnedDialogsRequest(folder_id=2)))
        == "FolderIdInvalidError"
    )
    assert await error_of(main_list(alice, 2)) == "FolderIdInvalidError"
    assert (
        await error_of(
            alice(functions.folders.EditPeerFoldersRequest([types.InputFolderPeer(inputs[0], 5)]))
        )
        == "FolderIdInvalidError"
    )
    assert (
        await error_of(
            alice(
                functions.messages.ReorderPinnedDialogsRequest(
                    folder_id=3, order=[dialog_peer(inputs[0])]
                )
            )
        )
        == "FolderIdInvalidError"
    )
    assert (
        await error_of(
            alice(functions.messages.SaveDraftRequest(peer=inputs[0], message="x" * 4097))
        )
        == "MessageTooLongError"
    )
    assert (
        await error_of(
            alice(
                functions.account.GetNotifySettingsRequest(
                    types.InputNotifyForumTopic(peer=inputs[0], top_msg_id=1)
                )
            )
        )
        == "PeerIdInvalidError"
    )
    too_many = [types.InputFolderPeer(inputs[0], 1)] * 101
    assert await error_of(alice(functions.folders.EditPeerFoldersRequest(too_many))) == (
        "LimitInvalidError"
    )
    assert await error_of(
        alice(
            functions.messages.SaveDraftRequest(
                peer=inputs[0], message="x", media=types.InputMediaDice("🎲")
            )
        )
    ) == ("MediaInvalidError")
    assert await error_of(
        alice(
            functions.messages.SaveDraftRequest(
                peer=inputs[0],
                message="x",
                reply_to=types.InputReplyToStory(peer=inputs[0], story_id=1),
            )
        )
    ) == ("REPLY_MESSAGE_ID_INVALID")
    title = types.TextWithEntities(text="Friends", entities=[])

    def friends(**kw: Any) -> Any:
        values: dict[str, Any] = {
            "id": 2,
            "title": title,
            "pinned_peers": [],
            "include_peers": [inputs[0]],
            "exclude_peers": [],
        }
        values.update(kw)
        return functions.messages.UpdateDialogFilterRequest(
            id=values["id"], filter=types.DialogFilter(**values)
        )

    assert await error_of(alice(friends(id=1))) == "FilterIdInvalidError"
    assert await error_of(alice(friends(title=types.TextWithEntities("", [])))) == (
        "FilterTitleEmptyError"
    )
    assert await error_of(alice(friends(include_peers=[]))) == "FilterIncludeEmptyError"
    assert await error_of(alice(friends(include_peers=[nobody] * 101))) == (
        "FILTER_INCLUDE_TOO_MUCH"
    )
    assert await error_of(alice(friends(include_peers=[types.InputPeerUser(1, 1)]))) == (
        "PeerIdInvalidError"
    )
    chatlist = types.DialogFilterChatlist(
        id=3, title=title, pinned_peers=[], include_peers=[inputs[0]]
    )
    assert await error_of(
        alice(functions.messages.UpdateDialogFilterRequest(id=3, filter=chatlist))
    ) == ("FilterNotSupportedError")
    for filter_id in range(2, 12):
        assert await alice(friends(id=filter_id))
    assert await error_of(alice(friends(id=12))) == "DIALOG_FILTERS_TOO_MUCH"
    # Three chats pinned, then two more reach the main list's limit of five; a sixth
    # is one too many.
    for peer in inputs:
        await alice(functions.messages.ToggleDialogPinRequest(peer=dialog_peer(peer), pinned=True))
    extra = []
    alice_id = (await alice.get_me()).id
    for _ in range(3):
        other = await sign_in(make_client, updates=False)
        await other.send_message(await other.get_input_entity(f"chat{alice_id}"), "hey")
    pinned_ids = {i.user_id for i in inputs}
    for d in await alice.get_dialogs():
        if d.id not in pinned_ids:
            extra.append(d.input_entity)
    for peer in extra[:2]:
        await alice(functions.messages.ToggleDialogPinRequest(peer=dialog_peer(peer), pinned=True))
    assert (
        await error_of(
            alice(
                functions.messages.ToggleDialogPinRequest(peer=dialog_peer(extra[2]), pinned=True)
            )
        )
        == "PinnedDialogsTooMuchError"
    )


async def test_the_bar_goes_live_when_the_contact_is_added_or_the_user_replies(
    make_client: ClientFactory,
) -> None:
    alice, tablet, (bob, carol, dave), (bob_in, carol_in, dave_in) = await setup(make_client)
    diffs = count_get_difference(tablet)
    seen = collect(tablet, types.UpdatePeerSettings)
    tablet_in = {p: await tablet.get_input_entity(p) for p in (bob, carol, dave)}
    for peer in (bob, carol, dave):
        bar = await tablet(functions.messages.GetPeerSettingsRequest(tablet_in[peer]))
        assert bar.settings.add_contact and bar.settings.report_spam

    await alice(
        functions.contacts.AddContactRequest(
            id=types.InputUser(bob_in.user_id, bob_in.access_hash),
            first_name="Bob",
            last_name="",
            phone="",
        )
    )
    added = await next_update(seen, types.UpdatePeerSettings)
    assert added.peer == types.PeerUser(bob) and not added.settings.add_contact

    await alice.send_message(carol_in, "hello Carol")
    replied = await next_update(seen, types.UpdatePeerSettings)
    assert replied.peer == types.PeerUser(carol) and not replied.settings.report_spam

    for peer in (bob, carol):
        bar = await tablet(functions.messages.GetPeerSettingsRequest(tablet_in[peer]))
        assert not (bar.settings.add_contact or bar.settings.report_spam)
    bar = await tablet(functions.messages.GetPeerSettingsRequest(tablet_in[dave]))
    assert bar.settings.add_contact and bar.settings.block_contact
    assert diffs[0] == 0


async def test_the_bar_goes_live_when_the_contact_is_imported(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    me = await alice.get_me()
    tablet = await sign_in(make_client, "+" + me.phone)
    erin = await sign_in(make_client, updates=False)
    erin_me = await erin.get_me()
    await alice(functions.account.UpdateUsernameRequest(f"imp{me.id}"))
    await erin.send_message(await erin.get_input_entity(f"imp{me.id}"), "hi")
    await tablet.get_dialogs()
    diffs = count_get_difference(tablet)
    seen = collect(tablet, types.UpdatePeerSettings)
    imported = await alice(
        functions.contacts.ImportContactsRequest(
            [
                types.InputPhoneContact(
                    client_id=1, phone=erin_me.phone, first_name="Erin", last_name=""
                )
            ]
        )
    )
    assert [i.user_id for i in imported.imported] == [erin_me.id]
    update = await next_update(seen, types.UpdatePeerSettings)
    assert update.peer == types.PeerUser(erin_me.id) and not update.settings.add_contact
    assert diffs[0] == 0


async def test_telethon_lists_the_main_folder_with_the_archive_in_use(
    make_client: ClientFactory,
) -> None:
    # getDialogs lists a folder's chats only; the archive's entry (dialogFolder) comes
    # with the main list's pins (getPinnedDialogs), where Telegram puts it. Telethon's
    # own listing of folder 0 knows no dialogFolder and failed on it.
    alice, _, (bob, carol, dave), (_, _, dave_in) = await setup(make_client, updates=False)
    await alice(
        functions.folders.EditPeerFoldersRequest([types.InputFolderPeer(dave_in, folder_id=1)])
    )
    for listing in (await alice.get_dialogs(folder=0), await alice.get_dialogs(archived=False)):
        assert {d.id for d in listing} == {bob, carol}
        assert not any(d.archived for d in listing)
    assert [d.id for d in await alice.get_dialogs(archived=True)] == [dave]
    raw = await main_list(alice)
    assert all(isinstance(d, types.Dialog) for d in raw.dialogs)
    pinned = await alice(functions.messages.GetPinnedDialogsRequest(folder_id=0))
    [head] = pinned.dialogs
    assert isinstance(head, types.DialogFolder) and head.folder.id == 1 and head.pinned
    assert head.peer == types.PeerUser(dave)
    assert any(m.id == head.top_message for m in pinned.messages)


async def test_get_dialogs_counts_every_page_and_answers_an_unchanged_list(
    make_client: ClientFactory, server: RunningServer
) -> None:
    # Every folder, the main list and the archive, each paged one dialog at a time: each
    # page carries the folder's count. Only a first page with the list's hash is told
    # "not modified"; any other hash, or a later page, gets the dialogs.
    alice, _, ids, (_, _, dave_in) = await setup(make_client, updates=False)
    await alice(
        functions.folders.EditPeerFoldersRequest([types.InputFolderPeer(dave_in, folder_id=1)])
    )
    me = (await alice.get_me()).id

    async def page(folder: int | None, offset: Any = None, digest: int = 0) -> Any:
        top = offset.dialogs[-1] if offset is not None else None
        last = next((m for m in offset.messages if m.id == top.top_message), None) if top else None
        return await alice(
            functions.messages.GetDialogsRequest(
                offset_date=last.date if last else None,
                offset_id=last.id if last else 0,
                offset_peer=(
                    await alice.get_input_entity(top.peer) if top else types.InputPeerEmpty()
                ),
                limit=1,
                hash=digest,
                folder_id=folder,
            )
        )

    for folder, expected in ((None, ids), (0, ids[:2]), (1, ids[2:])):
        seen: list[int] = []
        answer = await page(folder)
        while answer.dialogs:
            if isinstance(answer, types.messages.Dialogs):  # the whole list in one page
                assert not seen and len(answer.dialogs) == len(expected)
            else:
                assert isinstance(answer, types.messages.DialogsSlice)
                assert answer.count == len(expected)
            seen += [d.peer.user_id for d in answer.dialogs]
            answer = await page(folder, answer)
        assert sorted(seen) == sorted(expected)
        count, digest = await dialogs_store.summary(server.resources.db.pool, me, folder)
        assert count == len(expected)
        digest &= 0x7FFFFFFFFFFFFFFF
        same = await page(folder, digest=digest)
        assert isinstance(same, types.messages.DialogsNotModified) and same.count == count
        assert (await page(folder, digest=digest ^ 1)).dialogs
        later = await page(folder, await page(folder), digest=digest)
        assert isinstance(later, types.messages.DialogsSlice) and later.count == count


async def test_a_custom_folder_answers_an_unchanged_list(
    make_client: ClientFactory, server: RunningServer
) -> None:
    # getDialogs on a dialog filter: its first page with the hash of what it shows is
    # "not modified"; a stale hash, or a change to what it shows, gets the dialogs.
    alice, _, (bob, carol, dave), (bob_in, carol_in, _) = await setup(make_client, updates=False)
    me = (await alice.get_me()).id
    work = types.DialogFilter(
        id=2,
        title=types.TextWithEntities(text="Work", entities=[]),
        pinned_peers=[carol_in],
        include_peers=[bob_in],
        exclude_peers=[],
    )
    assert await alice(functions.messages.UpdateDialogFilterRequest(id=2, filter=work))
    rule = dialogs_store.FilterRule(
        pinned=[carol], included=[bob], excluded=[], contacts=False, non_contacts=False,
        exclude_muted=False, exclude_read=False, exclude_archived=False,
    )  # fmt: skip

    async def listing(digest: int) -> Any:
        return await alice(
            functions.messages.GetDialogsRequest(
                offset_date=None,
                offset_id=0,
                offset_peer=types.InputPeerEmpty(),
                limit=10,
                hash=digest,
                folder_id=2,
            )  # fmt: skip
        )

    async def current() -> tuple[int, int]:
        pool = server.resources.db.pool
        count, digest = await dialogs_store.filter_summary(pool, me, rule, int(time.time()))
        return count, digest & 0x7FFFFFFFFFFFFFFF

    full = await listing(0)
    assert [d.peer.user_id for d in full.dialogs] == [carol, bob]
    count, digest = await current()
    assert count == 2
    same = await listing(digest)
    assert isinstance(same, types.messages.DialogsNotModified) and same.count == 2
    assert (await listing(digest ^ 1)).dialogs
    # A new message in a chat the folder shows changes its hash.
    await alice.send_message(bob_in, "news")
    changed = await listing(digest)
    assert [d.peer.user_id for d in changed.dialogs] == [carol, bob]
    assert (await current())[1] != digest
    assert dave not in [d.peer.user_id for d in changed.dialogs]
