"""The chat list as users organise it: listing (and custom filters), pins, unread marks,
the archive and the chat's action bar, kept in step across the user's devices. Its
notification settings and drafts are NotifySettings (notify_settings.py) and Drafts
(drafts.py), services of their own.

Pins, marks, settings and drafts have updates with no pts: each change appends a
state-log event in its own transaction (durable, pushed live, handed to an offline
device by getDifference, never taking a pts). Each event carries the resulting state,
so applying it twice is harmless. Moving dialogs between folders is updateFolderPeers,
which carries a pts: it goes to the pts log like messages do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import asyncpg

from telesrv.services.drafts import DraftRow
from telesrv.services.errors import (
    FolderIdInvalid,
    PeerHistoryEmpty,
    PeerIdInvalid,
    PinnedDialogsTooMuch,
)
from telesrv.services.history import MAX_ANSWER_BYTES
from telesrv.services.messages import Origin
from telesrv.services.notify_settings import NotifyRow
from telesrv.services.peer_settings import NO_BAR, STRANGER_BAR, Bar
from telesrv.services.update_log import EventType, state_event
from telesrv.store import dialog_list as dialog_list_store
from telesrv.store import dialogs as dialogs_store
from telesrv.store import drafts as drafts_store
from telesrv.store import messages as messages_store
from telesrv.store import notify_settings as notify_settings_store
from telesrv.store import peer_settings as bar_store
from telesrv.store import reactions as reactions_store
from telesrv.store.counters import Allocation, Counters
from telesrv.store.db import Db
from telesrv.store.log_payloads import DialogPinned, PinnedDialogs, UnreadMark
from telesrv.store.log_writes import LogWrites, PtsDelivery, fill_unused_pts

# The store's rows are the domain's records: rpc builds and renders them as they are.
FilterRule = dialogs_store.FilterRule

ARCHIVE = 1
FOLDERS = (0, ARCHIVE)
# Pinned dialogs per folder, as Telegram's defaults for accounts without Premium
# (app config dialogs_pinned_limit_default / dialogs_folder_pinned_limit_default).
PINNED_LIMITS = {0: 5, ARCHIVE: 100}
MAX_FOLDER_PEERS = 100  # peers per folders.editPeerFolders call


@dataclass(frozen=True, slots=True)
class DialogsPage:
    rows: list[dialog_list_store.DialogRow]
    tops: list[messages_store.BoxMessage]
    count: int
    archive: dialogs_store.FolderSummary | None  # the archive's entry, heading the main list's pins
    notify: dict[int, NotifyRow]
    drafts: dict[int, DraftRow]
    unread_reactions: dict[int, int]  # per peer, when not 0


@dataclass(frozen=True, slots=True)
class FolderMoves:
    pts: int
    moves: list[tuple[int, int]]  # (peer, folder) that changed


class DialogService:
    def __init__(
        self,
        db: Db,
        counters: Counters,
        *,
        on_commit: Callable[[], None] = lambda: None,
        answer_bytes: int = MAX_ANSWER_BYTES,
        delivery: PtsDelivery | None = None,
    ) -> None:
        self._db = db
        self._log = LogWrites(db, counters, delivery)
        self._on_commit = on_commit  # wakes the outbox delivery
        # A page's top messages stop at this many bytes: past it a dialog is listed
        # without its message (clients page on by the dialogs), so oversized messages
        # cannot make the answer unbounded.
        self._answer_bytes = answer_bytes
        # (owner, peer) chats whose action bar this process saw closed

    # -- listing ---------------------------------------------------------------------------

    async def dialogs(
        self,
        owner: int,
        *,
        folder_id: int | None,
        exclude_pinned: bool,
        offset_date: int | None,
        offset_id: int | None,
        offset_peer: int | None,
        limit: int,
        now: int,
        count: int | None = None,
    ) -> DialogsPage:
        """A page of dialogs. The first page (no offset) starts with the folder's pinned
        dialogs in their order, unless ``exclude_pinned``; the rest come newest first.
        ``folder_id`` None lists every folder (the main list's pins first). No page
        carries the archive's own entry: Telegram lists it with the main list's pins
        (:meth:`pinned_dialogs`), and clients that page getDialogs (Telethon's
        folder=0 listing among them) know only dialogs there. ``count``: the folder's
        number of dialogs, when the caller has read it already (:meth:`summary`)."""
        pool = self._db.pool
        first = offset_date is None
        rows: list[dialog_list_store.DialogRow] = []
        head = folder_id if folder_id is not None else 0  # whose pins lead the list
        pins_first = first and not exclude_pinned
        if pins_first:
            rows = (await dialogs_store.pinned(pool, owner, head))[:limit]
        rest = limit - len(rows)
        if rest > 0:
            rows += await dialogs_store.page(
                pool,
                owner,
                folder_id=folder_id,
                exclude_pinned=exclude_pinned,
                skip_pins_of=head if pins_first else None,
                offset_date=offset_date,
                offset_id=offset_id,
                offset_peer=offset_peer,
                limit=rest,
            )
        if count is None:
            count = await dialogs_store.count(pool, owner, folder_id)
        return await self._decorate(owner, rows, count, None)

    async def filtered(
        self,
        owner: int,
        rule: dialogs_store.FilterRule,
        *,
        exclude_pinned: bool,
        offset_date: int | None,
        offset_id: int | None,
        offset_peer: int | None,
        limit: int,
        now: int,
    ) -> DialogsPage:
        """A page of the dialogs a custom filter shows: its pinned chats first (on the
        first page, unless ``exclude_pinned``), then the others newest first."""
        pool = self._db.pool
        rows: list[dialog_list_store.DialogRow] = []
        if offset_date is None and not exclude_pinned and rule.pinned:
            found = {
                d.peer_user_id: d
                for d in await dialog_list_store.get_peer_dialogs(pool, owner, rule.pinned)
            }
            rows = [found[p] for p in rule.pinned if p in found][:limit]
        if limit > len(rows):
            rows += await dialogs_store.filter_page(
                pool,
                owner,
                rule,
                now,
                skip=rule.pinned,
                offset_date=offset_date,
                offset_id=offset_id,
                offset_peer=offset_peer,
                limit=limit - len(rows),
            )
        count = await dialogs_store.filter_count(pool, owner, rule, now)
        return await self._decorate(owner, rows, count, None)

    async def _decorate(
        self,
        owner: int,
        rows: list[dialog_list_store.DialogRow],
        count: int,
        archive: dialogs_store.FolderSummary | None,
    ) -> DialogsPage:
        pool = self._db.pool
        peers = [d.peer_user_id for d in rows]
        ids = [d.top_message for d in rows if d.top_message > 0]
        if archive is not None and archive.top.top_message > 0:
            ids.append(archive.top.top_message)
        tops = (
            (
                await messages_store.get_boxes_within(
                    pool, owner, ids, self._answer_bytes, distributed=self._db.distributed
                )
            ).boxes
            if ids
            else []
        )
        notify = (
            await notify_settings_store.peers_notify_settings(pool, owner, peers) if peers else {}
        )
        drafts = (
            {d.peer_user_id: d for d in await drafts_store.drafts(pool, owner, peers)}
            if peers
            else {}
        )
        unread_reactions = await reactions_store.unread_counts(pool, owner, peers) if peers else {}
        return DialogsPage(rows, tops, count, archive, notify, drafts, unread_reactions)

    async def summary(self, owner: int, folder_id: int | None) -> tuple[int, int]:
        """(count, hash) of the folder's dialogs: the hash a client sends back to be
        told its list is unchanged. Reads every dialog of the folder."""
        return await dialogs_store.summary(self._db.pool, owner, folder_id)

    async def filtered_summary(
        self, owner: int, rule: dialogs_store.FilterRule, now: int
    ) -> tuple[int, int]:
        """(count, hash) of what a custom filter shows, as :meth:`summary` for a folder."""
        return await dialogs_store.filter_summary(self._db.pool, owner, rule, now)

    async def peer_dialogs(self, owner: int, peers: list[int]) -> DialogsPage:
        rows = await dialog_list_store.get_peer_dialogs(self._db.pool, owner, peers)
        return await self._decorate(owner, rows, len(rows), None)

    async def pinned_dialogs(self, owner: int, folder_id: int, now: int) -> DialogsPage:
        """A folder's pinned dialogs in order; the main list's start with the archive's
        entry when the archive is not empty, pinned at its head as Telegram shows it."""
        if folder_id not in FOLDERS:
            raise FolderIdInvalid()
        pool = self._db.pool
        rows = await dialogs_store.pinned(pool, owner, folder_id)
        archive = None
        if folder_id == 0:
            archive = await dialogs_store.folder_summary(pool, owner, ARCHIVE, now)
        return await self._decorate(owner, rows, len(rows), archive)

    # -- pins ------------------------------------------------------------------------------

    async def toggle_pin(
        self, owner: int, peer: int, pinned: bool, origin: Origin, now: int
    ) -> None:
        """Pin a dialog at the top of its folder's pins, or unpin it. PEER_HISTORY_EMPTY
        for a chat with no dialog; PINNED_DIALOGS_TOO_MUCH past the folder's limit."""

        async def txn(conn: asyncpg.Connection) -> bool:
            await dialogs_store.lock_pins_txn(conn, owner)
            dialog = await dialogs_store.dialog_for_update_txn(conn, owner, peer)
            if dialog is None:
                raise PeerHistoryEmpty()
            folder = dialog.folder_id
            order = await dialogs_store.pinned_peers_txn(conn, owner, folder)
            if pinned == (peer in order):
                return False
            if pinned:
                if len(order) >= PINNED_LIMITS[folder]:
                    raise PinnedDialogsTooMuch()
                order.insert(0, peer)
            else:
                order.remove(peer)
            await dialogs_store.set_pinned_order_txn(conn, owner, folder, order)
            await state_event(
                conn,
                owner,
                EventType.DIALOG_PINNED,
                now,
                origin,
                peer=peer,
                payload=DialogPinned(pinned, folder),
            )
            return True

        if await self._db.run_txn("toggle_dialog_pin", txn):
            self._on_commit()

    async def reorder_pinned(
        self,
        owner: int,
        folder_id: int,
        order: Sequence[int],
        force: bool,
        origin: Origin,
        now: int,
    ) -> None:
        """Set the folder's pinned order. Peers with no dialog in the folder are skipped;
        pinned dialogs left out stay pinned after the given ones, unless ``force``."""
        if folder_id not in FOLDERS:
            raise FolderIdInvalid()
        wanted = list(dict.fromkeys(order))

        async def txn(conn: asyncpg.Connection) -> bool:
            await dialogs_store.lock_pins_txn(conn, owner)
            current = await dialogs_store.pinned_peers_txn(conn, owner, folder_id)
            known = await dialogs_store.peers_in_folder_txn(conn, owner, folder_id, wanted)
            new = [p for p in wanted if p in known]
            if not force:
                new += [p for p in current if p not in new]
            if len(new) > PINNED_LIMITS[folder_id]:
                raise PinnedDialogsTooMuch()
            if new == current:
                return False
            await dialogs_store.set_pinned_order_txn(conn, owner, folder_id, new)
            await state_event(
                conn,
                owner,
                EventType.PINNED_DIALOGS,
                now,
                origin,
                payload=PinnedDialogs(folder_id, new),
            )
            return True

        if await self._db.run_txn("reorder_pinned_dialogs", txn):
            self._on_commit()

    # -- unread marks ----------------------------------------------------------------------

    async def mark_unread(
        self, owner: int, peer: int, unread: bool, origin: Origin | None, now: int
    ) -> None:
        async def txn(conn: asyncpg.Connection) -> bool:
            before = await dialogs_store.set_unread_mark_txn(conn, owner, peer, unread)
            if before is None:
                raise PeerIdInvalid()
            if before == unread:
                return False
            await state_event(
                conn,
                owner,
                EventType.DIALOG_UNREAD_MARK,
                now,
                origin,
                peer=peer,
                payload=UnreadMark(unread),
            )
            return True

        if await self._db.run_txn("mark_dialog_unread", txn):
            self._on_commit()

    async def clear_unread_mark(self, owner: int, peer: int, now: int) -> None:
        """Reading a chat clears its mark: updateDialogUnreadMark to every device."""
        if await dialogs_store.has_unread_mark(self._db.pool, owner, peer):
            try:
                await self.mark_unread(owner, peer, False, None, now)
            except PeerIdInvalid:
                pass  # the dialog went away meanwhile

    async def unread_marks(self, owner: int) -> list[int]:
        return await dialogs_store.unread_marks(self._db.pool, owner)

    # -- archive ---------------------------------------------------------------------------

    async def edit_folders(
        self, owner: int, moves: Sequence[tuple[int, int]], origin: Origin | None, now: int
    ) -> FolderMoves | None:
        """Move dialogs between the main list and the archive: one updateFolderPeers
        (one pts) for what changed; None when nothing did (no pts is taken)."""
        if any(folder not in FOLDERS for _, folder in moves):
            raise FolderIdInvalid()
        wanted = dict(moves)  # the last move of a peer wins
        pool = self._db.pool
        rows = await dialog_list_store.get_peer_dialogs(pool, owner, list(wanted))
        if not any(wanted[d.peer_user_id] != d.folder_id for d in rows):
            return None

        async def txn(
            conn: asyncpg.Connection, allocations: list[Allocation]
        ) -> list[tuple[int, int]]:
            done = []
            for peer in sorted(wanted):  # one lock order for concurrent calls
                if await dialogs_store.move_to_folder_txn(conn, owner, peer, wanted[peer]):
                    done.append((peer, wanted[peer]))
            if done:
                await dialogs_store.write_folder_peers_txn(
                    conn,
                    owner,
                    allocations[0].first_pts,
                    now,
                    done,
                    origin.auth_key_id if origin else None,
                    origin.session_id if origin else None,
                )
            return done

        done, (allocation,) = await self._log.write(
            "edit_peer_folders", [(owner, 1, 0)], txn, now=now
        )
        pts = allocation.first_pts
        if not done:
            # Changed by a concurrent call since the look above: the pts becomes a noop.
            await fill_unused_pts(self._db, [(owner, pts, pts)], now, "nothing to move")
            return None
        self._on_commit()
        return FolderMoves(pts, done)

    async def unarchive_on_message(self, owner: int, peer: int, now: int) -> None:
        """A new incoming message brings an archived chat that is not muted back to the
        main list, as Telegram does (updateFolderPeers to every device)."""
        if await dialogs_store.archived_unmuted(self._db.pool, owner, peer, now):
            await self.edit_folders(owner, [(peer, 0)], None, now)

    # -- peer settings (the chat's action bar) ---------------------------------------------

    async def peer_settings(self, owner: int, peer: int) -> Bar:
        """A chat started by someone not in the owner's contacts offers add, block and
        report until the owner hides the bar, adds the contact or writes in the chat."""
        if owner == peer:
            return NO_BAR
        facts = await bar_store.bar_facts(self._db.pool, owner, peer)
        if facts is None or facts.hidden or facts.contact or facts.replied:
            return NO_BAR
        return STRANGER_BAR

    async def hide_peer_settings_bar(self, owner: int, peer: int, origin: Origin, now: int) -> None:
        async def txn(conn: asyncpg.Connection) -> bool:
            if not await bar_store.hide_bar_txn(conn, owner, peer):
                return False
            await state_event(
                conn,
                owner,
                EventType.PEER_SETTINGS,
                now,
                origin,
                peer=peer,
                payload=NO_BAR,
            )
            return True

        if await self._db.run_txn("hide_peer_settings_bar", txn):
            self._on_commit()

    async def close_bar_on_reply(self, owner: int, peer: int, now: int) -> None:
        """The owner wrote in a chat a non-contact started: the bar goes, and every device
        of the owner is told (updatePeerSettings). Runs after a send only when the send
        found the sender's bar in this chat not closed yet (the send function reports it),
        so a chat costs this query once, and once more if it is deleted and started again."""
        if owner == peer:
            return

        shown = await bar_store.close_on_reply(
            self._db.pool,
            owner,
            peer,
            now,
            EventType.PEER_SETTINGS,
            NO_BAR.to_json(),
            distributed=self._db.distributed,
        )
        if shown:
            self._on_commit()
