"""The chat list on real PostgreSQL and Redis: pins and their limits, unread marks, the
archive (a pts event), notification settings and drafts (state-log events, no pts)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from telesrv.parts import AccountServices, Parts
from telesrv.services.dialogs import PINNED_LIMITS
from telesrv.services.errors import (
    FolderIdInvalid,
    MessageTooLong,
    PeerHistoryEmpty,
    PeerIdInvalid,
    PinnedDialogsTooMuch,
)
from telesrv.services.messages import Origin, OutgoingText
from telesrv.store import dialogs as dialogs_store
from telesrv.store import drafts as drafts_store
from telesrv.store import notify_settings as notify_settings_store
from telesrv.store import state_log

ORIGIN = Origin(auth_key_id=11, session_id=22)
_ids = itertools.count(9_000_000)


def new_user() -> int:
    return next(_ids)


class Env:
    def __init__(self, db: Any, parts: Parts, accounts: AccountServices) -> None:
        self.db = db
        self.counters = parts.counters
        self.dialogs = parts.dialogs
        self.notify_settings = parts.notify_settings
        self.drafts = parts.drafts
        self.messages = parts.messages
        self.forwards = parts.forwards
        self.deletes = parts.deletes
        self.read_receipts = parts.read_receipts
        self.updates = parts.updates
        self.contacts = accounts.contacts
        self._rid = itertools.count(1)

    async def send(self, sender: int, recipient: int, **kw: Any) -> None:
        msg = OutgoingText(
            sender=sender, recipient=recipient, random_id=next(self._rid), text="hi", **kw
        )
        await self.messages.send_text(msg, ORIGIN, now=1000)

    async def events(self, user: int) -> list[tuple[str, int | None, Any]]:
        return [
            (e.event_type, e.peer_user_id, e.payload)
            for _, e in await state_log.events_after(self.db.pool, user, 0, 1000)
        ]

    async def pts_events(self, user: int) -> list[tuple[int, str]]:
        rows = await self.db.pool.fetch(
            "SELECT pts, event_type FROM user_update_events WHERE user_id = $1 ORDER BY pts", user
        )
        return [(r["pts"], r["event_type"]) for r in rows]

    async def pinned(self, user: int, folder: int = 0) -> list[int]:
        return [d.peer_user_id for d in await dialogs_store.pinned(self.db.pool, user, folder)]

    async def chats(self, owner: int, n: int) -> list[int]:
        """n dialogs of ``owner``, each with one incoming message."""
        peers = [new_user() for _ in range(n)]
        for p in peers:
            await self.send(p, owner)
        return peers


@pytest.fixture
def env(db: Any, parts: Parts, accounts: AccountServices) -> Env:
    return Env(db, parts, accounts)


async def test_pins_go_on_top_and_each_change_is_one_state_event(env: Env) -> None:
    a = new_user()
    b, c = await env.chats(a, 2)
    await env.dialogs.toggle_pin(a, b, True, ORIGIN, 1)
    await env.dialogs.toggle_pin(a, c, True, ORIGIN, 2)
    assert await env.pinned(a) == [c, b]
    await env.dialogs.toggle_pin(a, c, True, ORIGIN, 3)  # already pinned: nothing
    await env.dialogs.reorder_pinned(a, 0, [b, c], False, ORIGIN, 4)
    assert await env.pinned(a) == [b, c]
    await env.dialogs.toggle_pin(a, b, False, ORIGIN, 5)
    assert await env.pinned(a) == [c]
    assert await env.events(a) == [
        ("dialog_pinned", b, {"pinned": True, "folder_id": 0}),
        ("dialog_pinned", c, {"pinned": True, "folder_id": 0}),
        ("pinned_dialogs", None, {"folder_id": 0, "order": [b, c]}),
        ("dialog_pinned", b, {"pinned": False, "folder_id": 0}),
    ]
    # None of it took a pts: only the two incoming messages did.
    assert [t for _, t in await env.pts_events(a)] == ["new_message", "new_message"]


async def test_pinning_a_chat_without_messages_is_peer_history_empty(env: Env) -> None:
    a, stranger = new_user(), new_user()
    with pytest.raises(PeerHistoryEmpty):
        await env.dialogs.toggle_pin(a, stranger, True, ORIGIN, 1)
    assert await env.events(a) == []


async def test_main_list_pins_up_to_the_limit(env: Env) -> None:
    a = new_user()
    limit = PINNED_LIMITS[0]
    peers = await env.chats(a, limit + 1)
    for p in peers[:limit]:
        await env.dialogs.toggle_pin(a, p, True, ORIGIN, 1)
    assert len(await env.pinned(a)) == limit  # at the limit
    with pytest.raises(PinnedDialogsTooMuch):
        await env.dialogs.toggle_pin(a, peers[limit], True, ORIGIN, 2)  # past it
    with pytest.raises(PinnedDialogsTooMuch):
        await env.dialogs.reorder_pinned(a, 0, peers, False, ORIGIN, 3)
    assert await env.pinned(a) == list(reversed(peers[:limit]))
    # force replaces the list: the new order may drop pins and add one.
    await env.dialogs.reorder_pinned(a, 0, [peers[limit], peers[0]], True, ORIGIN, 4)
    assert await env.pinned(a) == [peers[limit], peers[0]]


async def test_the_archive_pins_up_to_its_own_limit(env: Env) -> None:
    a = new_user()
    limit = PINNED_LIMITS[1]
    # Archived dialogs written directly: a hundred sends would only slow the test.
    peers = [new_user() for _ in range(limit + 1)]
    await env.db.pool.execute(
        """
        INSERT INTO dialogs (user_id, peer_user_id, top_message, top_message_date, folder_id)
        SELECT $1, p, 0, 1, 1 FROM unnest($2::bigint[]) AS p
        """,
        a,
        peers,
    )
    await env.dialogs.reorder_pinned(a, 1, peers[:limit], True, ORIGIN, 1)
    assert await env.pinned(a, 1) == peers[:limit]
    with pytest.raises(PinnedDialogsTooMuch):
        await env.dialogs.toggle_pin(a, peers[limit], True, ORIGIN, 2)
    with pytest.raises(PinnedDialogsTooMuch):
        await env.dialogs.reorder_pinned(a, 1, peers, True, ORIGIN, 3)
    assert await env.pinned(a) == []  # the main list's pins are its own


async def test_folder_ids_other_than_0_and_1_are_invalid(env: Env) -> None:
    a = new_user()
    (b,) = await env.chats(a, 1)
    with pytest.raises(FolderIdInvalid):
        await env.dialogs.reorder_pinned(a, 2, [b], False, ORIGIN, 1)
    with pytest.raises(FolderIdInvalid):
        await env.dialogs.pinned_dialogs(a, 2, 1)
    with pytest.raises(FolderIdInvalid):
        await env.dialogs.edit_folders(a, [(b, 2)], ORIGIN, 1)


async def test_unread_mark_set_and_cleared_by_reading(env: Env) -> None:
    a = new_user()
    (b,) = await env.chats(a, 1)
    await env.dialogs.mark_unread(a, b, True, ORIGIN, 1)
    await env.dialogs.mark_unread(a, b, True, ORIGIN, 2)  # no change, no event
    assert await env.dialogs.unread_marks(a) == [b]
    await env.read_receipts.read_history(a, b, 0, ORIGIN, 3)
    assert await env.dialogs.unread_marks(a) == []
    # A marked chat with nothing left to read is cleared by opening it too.
    await env.dialogs.mark_unread(a, b, True, ORIGIN, 4)
    await env.read_receipts.read_history(a, b, 0, ORIGIN, 5)
    assert await env.dialogs.unread_marks(a) == []
    marks = [(p, e["unread"]) for t, p, e in await env.events(a) if t == "dialog_unread_mark"]
    assert marks == [(b, True), (b, False), (b, True), (b, False)]
    with pytest.raises(PeerIdInvalid):
        await env.dialogs.mark_unread(a, new_user(), True, ORIGIN, 6)


async def test_archiving_takes_one_pts_and_unpins(env: Env) -> None:
    a = new_user()
    b, c = await env.chats(a, 2)
    await env.dialogs.toggle_pin(a, b, True, ORIGIN, 1)
    moved = await env.dialogs.edit_folders(a, [(b, 1), (c, 1)], ORIGIN, 2)
    assert moved is not None and moved.moves == [(b, 1), (c, 1)] and moved.pts == 3
    assert await env.pts_events(a) == [(1, "new_message"), (2, "new_message"), (3, "folder_peers")]
    assert await env.pinned(a) == []
    # Nothing to move: no pts is taken at all.
    assert await env.dialogs.edit_folders(a, [(b, 1)], ORIGIN, 3) is None
    assert len(await env.pts_events(a)) == 3
    page = await env.dialogs.dialogs(
        a,
        folder_id=0,
        exclude_pinned=False,
        offset_date=None,
        offset_id=None,
        offset_peer=None,
        limit=10,
        now=4,
    )
    assert page.rows == [] and page.archive is None  # the entry comes with the pins
    pins = await env.dialogs.pinned_dialogs(a, 0, 4)
    assert pins.rows == [] and pins.archive is not None
    assert pins.archive.unread_unmuted_peers == 2 and pins.archive.unread_unmuted_messages == 2
    assert (await env.dialogs.pinned_dialogs(a, 1, 4)).archive is None
    archived = await env.dialogs.dialogs(
        a,
        folder_id=1,
        exclude_pinned=False,
        offset_date=None,
        offset_id=None,
        offset_peer=None,
        limit=10,
        now=4,
    )
    assert {d.peer_user_id for d in archived.rows} == {b, c} and archived.archive is None


async def test_a_new_message_brings_back_an_unmuted_archived_chat(env: Env) -> None:
    a = new_user()
    b, c = await env.chats(a, 2)
    await env.dialogs.edit_folders(a, [(b, 1), (c, 1)], ORIGIN, 2)
    muted = notify_settings_store.NotifyRow("peer", c, None, None, 2**31 - 1, None)
    await env.notify_settings.update_notify_settings(a, muted, ORIGIN, 3)
    await env.send(b, a)
    await env.send(c, a)
    folders = {
        d.peer_user_id: d.folder_id
        for d in await dialogs_store.page(
            env.db.pool,
            a,
            folder_id=None,
            exclude_pinned=False,
            offset_date=None,
            offset_id=None,
            offset_peer=None,
            limit=10,
        )
    }
    assert folders == {b: 0, c: 1}
    assert [t for _, t in await env.pts_events(a)][-3:] == [
        "new_message",
        "folder_peers",
        "new_message",
    ]


async def test_notify_settings_per_peer_and_per_type(env: Env) -> None:
    a = new_user()
    (b,) = await env.chats(a, 1)
    await env.notify_settings.update_notify_settings(
        a, notify_settings_store.NotifyRow("peer", b, False, True, 2000, None), ORIGIN, 1
    )
    await env.notify_settings.update_notify_settings(
        a, notify_settings_store.NotifyRow("users", 0, None, None, 5000, None), ORIGIN, 2
    )
    assert (
        await env.notify_settings.notify_settings(a, "peer", b)
    ) == notify_settings_store.NotifyRow("peer", b, False, True, 2000, None)
    assert (await env.notify_settings.notify_settings(a, "users", 0)).mute_until == 5000  # type: ignore[union-attr]
    await env.notify_settings.reset_notify_settings(a, ORIGIN, 3)
    assert await env.notify_settings.notify_settings(a, "peer", b) is None
    kinds = [(e["kind"], e.get("mute_until")) for t, _, e in await env.events(a)]
    assert kinds == [("peer", 2000), ("users", 5000), ("peer", None), ("users", None)]


async def test_drafts_saved_cleared_and_bounded(env: Env) -> None:
    a = new_user()
    b, c = await env.chats(a, 2)

    def draft(peer: int, text: str) -> drafts_store.DraftRow:
        return drafts_store.DraftRow(peer, text, None, None, False, False, 10)

    await env.drafts.save_draft(a, draft(b, "x" * 4096), ORIGIN, 10)  # at the limit
    with pytest.raises(MessageTooLong):
        await env.drafts.save_draft(a, draft(b, "x" * 4097), ORIGIN, 11)  # past it
    await env.drafts.save_draft(a, draft(c, "later"), ORIGIN, 12)
    assert [d.peer_user_id for d in await env.drafts.all_drafts(a)] == [c, b]  # newest first
    # Sending with clear_draft empties that chat's draft only.
    await env.send(a, b, clear_draft=True)
    assert [d.peer_user_id for d in await env.drafts.all_drafts(a)] == [c]
    # An empty draft deletes it.
    await env.drafts.save_draft(a, draft(c, ""), ORIGIN, 13)
    assert await env.drafts.all_drafts(a) == []
    drafts = [(p, "message" in e) for t, p, e in await env.events(a) if t == "draft"]
    assert drafts == [(b, True), (c, True), (b, False), (c, False)]
    await env.drafts.save_draft(a, draft(b, "again"), ORIGIN, 14)
    await env.drafts.clear_drafts(a, None, ORIGIN, 15)
    assert await env.drafts.all_drafts(a) == []


async def test_the_action_bar_of_a_chat_a_stranger_started(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    from telesrv.services.peer_settings import NO_BAR, STRANGER_BAR
    from telesrv.store import contacts
    from telesrv.store import peer_settings as bar_store

    async def not_closed_live(*args: Any, **kwargs: Any) -> bool:
        return False

    # What the chat's own rows say, without the send's closing of the bar (and its event),
    # which the tests below check.
    monkeypatch.setattr(bar_store, "close_on_reply", not_closed_live)

    a = new_user()
    hidden, replied, added, untouched = await env.chats(a, 4)
    assert await env.dialogs.peer_settings(a, untouched) == STRANGER_BAR
    assert await env.dialogs.peer_settings(untouched, a) == NO_BAR  # they started it
    assert await env.dialogs.peer_settings(a, a) == NO_BAR
    assert await env.dialogs.peer_settings(a, new_user()) == NO_BAR  # no chat at all

    await env.dialogs.hide_peer_settings_bar(a, hidden, ORIGIN, 1)
    await env.dialogs.hide_peer_settings_bar(a, hidden, ORIGIN, 2)  # hidden already
    await env.send(a, replied)
    await contacts.save_contacts(env.db.pool, a, [contacts.NewContact(added, "Ann", "")])
    for peer in (hidden, replied, added):
        assert await env.dialogs.peer_settings(a, peer) == NO_BAR
    assert await env.dialogs.peer_settings(a, untouched) == STRANGER_BAR
    bars = [(p, e) for t, p, e in await env.events(a) if t == "peer_settings"]
    assert bars == [(hidden, NO_BAR.to_json())]


async def test_a_forward_into_an_archived_chat_brings_it_back(env: Env) -> None:
    from telesrv.services.forwards import ForwardRequest

    forwards = env.forwards
    a = new_user()
    (b,) = await env.chats(a, 1)  # b wrote to a: b's box 1 is that message
    await env.dialogs.edit_folders(a, [(b, 1)], ORIGIN, 2)
    await forwards.forward(
        ForwardRequest(owner=b, from_peer=a, to_peer=a, ids=[1], random_ids=[77], drop_author=True),
        lambda author, date: b"",
        ORIGIN,
        3,
    )
    [row] = await dialogs_store.page(
        env.db.pool,
        a,
        folder_id=None,
        exclude_pinned=False,
        offset_date=None,
        offset_id=None,
        offset_peer=None,
        limit=10,
    )
    assert row.peer_user_id == b and row.folder_id == 0


async def test_listing_every_folder_leads_with_the_main_pins_and_keeps_archived_pins(
    env: Env,
) -> None:
    a = new_user()
    b, c, d = await env.chats(a, 3)  # d is the newest
    await env.dialogs.edit_folders(a, [(c, 1)], ORIGIN, 1)
    await env.dialogs.toggle_pin(a, c, True, ORIGIN, 2)  # pinned in the archive
    await env.dialogs.toggle_pin(a, b, True, ORIGIN, 3)  # pinned in the main list

    async def listing(folder: int | None, exclude_pinned: bool = False) -> list[int]:
        page = await env.dialogs.dialogs(
            a,
            folder_id=folder,
            exclude_pinned=exclude_pinned,
            offset_date=None,
            offset_id=None,
            offset_peer=None,
            limit=10,
            now=4,
        )
        return [r.peer_user_id for r in page.rows]

    assert await listing(None) == [b, d, c]
    assert await listing(0) == [b, d]
    assert await listing(1) == [c]
    assert await listing(None, exclude_pinned=True) == [d]
    assert await listing(1, exclude_pinned=True) == []


async def test_a_custom_filter_lists_what_its_rule_shows(env: Env) -> None:
    from telesrv.store import contacts

    a = new_user()
    friend, stranger, quiet, archived, read, pinned = await env.chats(a, 6)
    await contacts.save_contacts(env.db.pool, a, [contacts.NewContact(friend, "F", "")])
    mute = notify_settings_store.NotifyRow("peer", quiet, None, None, 2**31 - 1, None)
    await env.notify_settings.update_notify_settings(a, mute, ORIGIN, 1)
    await env.dialogs.edit_folders(a, [(archived, 1)], ORIGIN, 1)
    await env.read_receipts.read_history(a, read, 0, ORIGIN, 2)

    async def shown(**kw: Any) -> list[int]:
        values: dict[str, Any] = {
            "pinned": [],
            "included": [],
            "excluded": [],
            "contacts": False,
            "non_contacts": False,
            "exclude_muted": False,
            "exclude_read": False,
            "exclude_archived": False,
        }
        values.update(kw)
        page = await env.dialogs.filtered(
            a,
            dialogs_store.FilterRule(**values),
            exclude_pinned=False,
            offset_date=None,
            offset_id=None,
            offset_peer=None,
            limit=10,
            now=5,
        )
        assert page.count == len(page.rows)
        return [r.peer_user_id for r in page.rows]

    newest_first = [pinned, read, archived, quiet, stranger, friend]
    assert await shown(contacts=True) == [friend]
    assert await shown(non_contacts=True) == [p for p in newest_first if p != friend]
    assert await shown(contacts=True, non_contacts=True, excluded=[stranger]) == [
        p for p in newest_first if p != stranger
    ]
    assert await shown(
        contacts=True,
        non_contacts=True,
        exclude_muted=True,
        exclude_read=True,
        exclude_archived=True,
        pinned=[pinned],
        included=[read],  # included chats show whatever the flags say
    ) == [pinned, read, stranger, friend]
    assert await shown(included=[quiet, archived]) == [archived, quiet]


async def test_the_bar_closes_live_when_the_owner_replies_or_adds_the_contact(
    env: Env,
) -> None:
    from telesrv.services.peer_settings import NO_BAR, STRANGER_BAR

    messages, contacts = env.messages, env.contacts
    a = new_user()
    replied, added, imported_later, untouched = await env.chats(a, 4)
    assert await env.dialogs.peer_settings(a, replied) == STRANGER_BAR

    async def send(sender: int, recipient: int, rid: int) -> None:
        await messages.send_text(
            OutgoingText(sender=sender, recipient=recipient, random_id=rid, text="hi"), ORIGIN, 5
        )

    await send(a, replied, 1)
    await send(a, replied, 2)  # closed already: nothing more
    await contacts.add_contact(a, added, "Ann", "", ORIGIN)
    await contacts.add_contact(a, added, "Ann", "B", ORIGIN)  # a contact already
    await contacts.add_contact(a, untouched + 10_000, "Nobody", "", ORIGIN)  # no chat
    stranger_chat = new_user()
    await send(a, stranger_chat, 3)  # a chat the owner started never showed a bar
    await send(stranger_chat, a, 4)
    for peer in (replied, added, stranger_chat):
        assert await env.dialogs.peer_settings(a, peer) == NO_BAR
    assert await env.dialogs.peer_settings(a, untouched) == STRANGER_BAR
    assert await env.dialogs.peer_settings(a, imported_later) == STRANGER_BAR
    bars = [(p, e) for t, p, e in await env.events(a) if t == "peer_settings"]
    assert bars == [(replied, NO_BAR.to_json()), (added, NO_BAR.to_json())]
    # The other side of the chat is not touched.
    assert [t for t, _, _ in await env.events(replied) if t == "peer_settings"] == []


async def test_a_forward_into_a_strangers_chat_closes_its_bar(env: Env) -> None:
    from telesrv.services.forwards import ForwardRequest
    from telesrv.services.peer_settings import NO_BAR, STRANGER_BAR

    forwards = env.forwards
    a = new_user()
    b, c = await env.chats(a, 2)  # a's box 1: b's message; box 2: c's
    assert await env.dialogs.peer_settings(a, c) == STRANGER_BAR
    await forwards.forward(
        ForwardRequest(owner=a, from_peer=b, to_peer=c, ids=[1], random_ids=[78], drop_author=True),
        lambda author, date: b"",
        ORIGIN,
        4,
    )
    assert await env.dialogs.peer_settings(a, c) == NO_BAR
    assert await env.dialogs.peer_settings(a, b) == STRANGER_BAR
    bars = [(p, e) for t, p, e in await env.events(a) if t == "peer_settings"]
    assert bars == [(c, NO_BAR.to_json())]


async def test_a_bar_shown_again_after_the_chat_was_deleted_closes_live_again(env: Env) -> None:
    # A deleted chat that a stranger starts again shows the bar again; the owner's next
    # reply must close it live again, though this process saw it closed before (the send
    # reports the sender's bar state from the dialog row it writes).
    from telesrv.services.peer_settings import NO_BAR, STRANGER_BAR

    messages, deletes = env.messages, env.deletes
    a, s = new_user(), new_user()

    async def send(sender: int, recipient: int, rid: int) -> None:
        await messages.send_text(
            OutgoingText(sender=sender, recipient=recipient, random_id=rid, text="hi"), ORIGIN, 5
        )

    await send(s, a, 1)
    await send(a, s, 2)
    assert await env.dialogs.peer_settings(a, s) == NO_BAR
    while True:
        done = await deletes.delete_history(
            a, s, 0, just_clear=False, revoke=False, origin=ORIGIN, now=6
        )
        if done.deleted is None:
            break
    await send(s, a, 3)
    assert await env.dialogs.peer_settings(a, s) == STRANGER_BAR
    await send(a, s, 4)
    assert await env.dialogs.peer_settings(a, s) == NO_BAR
    bars = [(p, e) for t, p, e in await env.events(a) if t == "peer_settings"]
    assert bars == [(s, NO_BAR.to_json()), (s, NO_BAR.to_json())]
