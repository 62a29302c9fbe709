"""The chat list: dialogs, pins, unread marks, the archive and the chat's action bar
(TL <-> domain; the rules are in services/dialogs.py). Notification settings and drafts
have their own handlers, in notify_settings.py and drafts.py."""

from __future__ import annotations

from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.dialogs_tl import draft_tl, notify_tl, peer_settings_tl
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.rpc.render import (
    UsersFor,
    dialog_tl,
    message_tl,
    message_user_ids,
    peer_user,
)
from telesrv.rpc.stored_tl import decode_filter
from telesrv.services.dialog_filters import FIRST_ID, LAST_ID, DialogFilterService
from telesrv.services.dialogs import (
    ARCHIVE,
    FOLDERS,
    MAX_FOLDER_PEERS,
    PINNED_LIMITS,
    DialogService,
    DialogsPage,
    FilterRule,
)
from telesrv.services.messages import Origin
from telesrv.services.notify_settings import NotifySettings
from telesrv.services.updates import UpdatesService
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import (
    FolderIdInvalid,
    LimitInvalid,
    PeerIdInvalid,
    PinnedDialogsTooMuch,
)

MAX_DIALOGS_LIMIT = 100
ARCHIVE_TITLE = "Archived Chats"


def _origin(ctx: RequestContext) -> Origin:
    return Origin(ctx.auth_key_id, ctx.session_id)


class DialogsHandlers:
    """The chat list: dialogs, pins, unread marks, the archive and the action bar."""

    def __init__(
        self,
        dialogs: DialogService,
        notify_settings: NotifySettings,
        updates: UpdatesService,
        resolve_peer: PeerResolver,
        users_for: UsersFor,
        dialog_filters: DialogFilterService | None = None,
    ) -> None:
        self._dialogs = dialogs
        self._notify_settings = notify_settings
        self._filters = dialog_filters
        self._updates = updates
        self._resolve_peer = resolve_peer
        self._users_for = users_for

    async def _peer(self, ctx: RequestContext, peer: types.TypeInputPeer) -> int:
        return await self._resolve_peer(ctx, peer)

    @method(functions.messages.GetDialogs)
    async def get_dialogs(self, ctx: AuthedContext, req: functions.messages.GetDialogs) -> TLObject:
        """Without folder_id: every dialog (Telegram lists the archived ones too, marked
        with their folder); folder 0: the main list (the archive's entry comes with its
        pins, from getPinnedDialogs); 1: the archive; the id of one of the user's dialog
        filters: what it shows."""
        folder = req.folder_id
        rule = None
        if folder is not None and folder not in FOLDERS:
            rule = await self._filter_rule(ctx.user_id, folder)
        offset_peer = None
        if req.offset_date > 0 and not isinstance(
            req.offset_peer, types.InputPeerEmpty | types.InputPeerSelf
        ):
            try:
                offset_peer = await self._peer(ctx, req.offset_peer)
            except PeerIdInvalid:
                offset_peer = None
        elif isinstance(req.offset_peer, types.InputPeerSelf):
            offset_peer = ctx.user_id
        limit = max(1, min(req.limit, MAX_DIALOGS_LIMIT)) if req.limit > 0 else MAX_DIALOGS_LIMIT
        if rule is not None:
            if req.hash and req.offset_date == 0:
                shown, digest = await self._dialogs.filtered_summary(
                    ctx.user_id, rule, int(ctx.now)
                )
                if req.hash == digest & 0x7FFFFFFFFFFFFFFF:
                    return types.messages.DialogsNotModified(count=shown)
            page = await self._dialogs.filtered(
                ctx.user_id,
                rule,
                exclude_pinned=bool(req.exclude_pinned),
                offset_date=req.offset_date or None,
                offset_id=req.offset_id or None,
                offset_peer=offset_peer,
                limit=limit,
                now=int(ctx.now),
            )
            return await self._dialogs_answer(ctx.user_id, req, page)
        count: int | None = None
        if req.hash and req.offset_date == 0:
            # Only a first page can be "not modified", and the hash needs every dialog
            # of the folder read and hashed: other pages only count them.
            count, digest = await self._dialogs.summary(ctx.user_id, folder)
            if req.hash == digest & 0x7FFFFFFFFFFFFFFF:
                return types.messages.DialogsNotModified(count=count)
        page = await self._dialogs.dialogs(
            ctx.user_id,
            folder_id=folder,
            exclude_pinned=bool(req.exclude_pinned),
            offset_date=req.offset_date or None,
            offset_id=req.offset_id or None,
            offset_peer=offset_peer,
            limit=limit,
            now=int(ctx.now),
            count=count,
        )
        return await self._dialogs_answer(ctx.user_id, req, page)

    async def _dialogs_answer(
        self, viewer: int, req: functions.messages.GetDialogs, page: DialogsPage
    ) -> TLObject:
        dialogs, messages, users = await self._page_tl(viewer, page)
        if req.offset_date == 0 and len(page.rows) >= page.count:
            return types.messages.Dialogs(dialogs=dialogs, messages=messages, chats=[], users=users)
        return types.messages.DialogsSlice(
            count=page.count, dialogs=dialogs, messages=messages, chats=[], users=users
        )

    async def _filter_rule(self, owner: int, filter_id: int) -> FilterRule:
        """The rule of one of the owner's dialog filters; FOLDER_ID_INVALID for any other
        id."""
        data = None
        if self._filters is not None and FIRST_ID <= filter_id <= LAST_ID:
            data = await self._filters.stored(owner, filter_id)
        if data is None:
            raise FolderIdInvalid()
        f = decode_filter(data)
        if isinstance(f, types.DialogFilterDefault):  # never stored: it has no rule
            raise FolderIdInvalid()

        def ids(peers: list[types.TypeInputPeer]) -> list[int]:
            found = []
            for p in peers:
                if isinstance(p, types.InputPeerSelf):
                    found.append(owner)
                elif isinstance(p, types.InputPeerUser):
                    found.append(int(p.user_id))
            return list(dict.fromkeys(found))

        return FilterRule(
            pinned=ids(f.pinned_peers),
            included=ids(f.include_peers),
            excluded=ids(getattr(f, "exclude_peers", None) or []),
            contacts=bool(getattr(f, "contacts", False)),
            non_contacts=bool(getattr(f, "non_contacts", False)),
            exclude_muted=bool(getattr(f, "exclude_muted", False)),
            exclude_read=bool(getattr(f, "exclude_read", False)),
            exclude_archived=bool(getattr(f, "exclude_archived", False)),
        )

    async def _page_tl(
        self, viewer: int, page: DialogsPage
    ) -> tuple[list[types.TypeDialog], list[types.TypeMessage], list[types.TypeUser]]:
        """(dialogs, messages, users) of a page, the archive's entry first."""
        user_ids = {d.peer_user_id for d in page.rows}
        for m in page.tops:
            user_ids |= message_user_ids(m)
        dialogs: list[types.TypeDialog] = []
        if page.archive is not None:
            a = page.archive
            user_ids.add(a.top.peer_user_id)
            dialogs.append(
                types.DialogFolder(
                    pinned=True,
                    folder=types.Folder(id=ARCHIVE, title=ARCHIVE_TITLE),
                    peer=peer_user(a.top.peer_user_id),
                    top_message=a.top.top_message,
                    unread_muted_peers_count=a.unread_muted_peers,
                    unread_unmuted_peers_count=a.unread_unmuted_peers,
                    unread_muted_messages_count=a.unread_muted_messages,
                    unread_unmuted_messages_count=a.unread_unmuted_messages,
                )
            )
        for d in page.rows:
            draft = page.drafts.get(d.peer_user_id)
            dialogs.append(
                dialog_tl(
                    d,
                    notify_tl(page.notify.get(d.peer_user_id)),
                    draft_tl(draft) if draft is not None else None,
                    unread_reactions=page.unread_reactions.get(d.peer_user_id, 0),
                )
            )
        users = await self._users_for(viewer, user_ids) if user_ids else []
        return dialogs, [message_tl(m) for m in page.tops], users

    async def _peer_dialogs(self, ctx: AuthedContext, page: DialogsPage) -> TLObject:
        dialogs, messages, users = await self._page_tl(ctx.user_id, page)
        state = await self._updates.state(ctx.user_id, int(ctx.now))
        return types.messages.PeerDialogs(
            dialogs=dialogs,
            messages=messages,
            chats=[],
            users=users,
            state=types.updates.State(
                pts=state.pts, qts=0, date=int(ctx.now), seq=0, unread_count=state.unread_count
            ),
        )

    async def _dialog_peer(self, ctx: RequestContext, item: types.TypeInputDialogPeer) -> int:
        """The user an InputDialogPeer names (folders and communities are not chats here)."""
        if not isinstance(item, types.InputDialogPeer):
            raise PeerIdInvalid()
        return await self._peer(ctx, item.peer)

    @method(functions.messages.GetPeerDialogs)
    async def get_peer_dialogs(
        self, ctx: AuthedContext, req: functions.messages.GetPeerDialogs
    ) -> TLObject:
        peers = []
        for item in req.peers[:100]:
            if isinstance(item, types.InputDialogPeer):
                peers.append(await self._peer(ctx, item.peer))
        return await self._peer_dialogs(ctx, await self._dialogs.peer_dialogs(ctx.user_id, peers))

    # -- pins ------------------------------------------------------------------------------

    @method(functions.messages.GetPinnedDialogs)
    async def get_pinned_dialogs(
        self, ctx: AuthedContext, req: functions.messages.GetPinnedDialogs
    ) -> TLObject:
        page = await self._dialogs.pinned_dialogs(ctx.user_id, req.folder_id, int(ctx.now))
        return await self._peer_dialogs(ctx, page)

    @method(functions.messages.ToggleDialogPin)
    async def toggle_dialog_pin(
        self, ctx: AuthedContext, req: functions.messages.ToggleDialogPin
    ) -> bool:
        peer = await self._dialog_peer(ctx, req.peer)
        await self._dialogs.toggle_pin(
            ctx.user_id, peer, bool(req.pinned), _origin(ctx), int(ctx.now)
        )
        return True

    @method(functions.messages.ReorderPinnedDialogs)
    async def reorder_pinned_dialogs(
        self, ctx: AuthedContext, req: functions.messages.ReorderPinnedDialogs
    ) -> bool:
        if req.folder_id not in FOLDERS:
            raise FolderIdInvalid()
        order = []
        # More than the largest limit cannot be valid: answer without resolving them all.
        for item in req.order[: PINNED_LIMITS[ARCHIVE] + 1]:
            if isinstance(item, types.InputDialogPeer):
                order.append(await self._peer(ctx, item.peer))
        if len(req.order) > PINNED_LIMITS[ARCHIVE]:
            raise PinnedDialogsTooMuch()
        await self._dialogs.reorder_pinned(
            ctx.user_id, req.folder_id, order, bool(req.force), _origin(ctx), int(ctx.now)
        )
        return True

    # -- unread marks ----------------------------------------------------------------------

    @method(functions.messages.MarkDialogUnread)
    async def mark_dialog_unread(
        self, ctx: AuthedContext, req: functions.messages.MarkDialogUnread
    ) -> bool:
        if req.parent_peer is not None:
            raise PeerIdInvalid()  # no monoforums here
        peer = await self._dialog_peer(ctx, req.peer)
        await self._dialogs.mark_unread(
            ctx.user_id, peer, bool(req.unread), _origin(ctx), int(ctx.now)
        )
        return True

    @method(functions.messages.GetDialogUnreadMarks)
    async def get_dialog_unread_marks(
        self, ctx: AuthedContext, req: functions.messages.GetDialogUnreadMarks
    ) -> list[TLObject]:
        if req.parent_peer is not None:
            return []
        peers = await self._dialogs.unread_marks(ctx.user_id)
        return [types.DialogPeer(peer=peer_user(p)) for p in peers]

    # -- archive ---------------------------------------------------------------------------

    @method(functions.folders.EditPeerFolders)
    async def edit_peer_folders(
        self, ctx: AuthedContext, req: functions.folders.EditPeerFolders
    ) -> TLObject:
        if len(req.folder_peers) > MAX_FOLDER_PEERS:
            raise LimitInvalid()
        moves = []
        for item in req.folder_peers:
            if item.folder_id not in FOLDERS:
                raise FolderIdInvalid()
            moves.append((await self._peer(ctx, item.peer), item.folder_id))
        done = await self._dialogs.edit_folders(ctx.user_id, moves, _origin(ctx), int(ctx.now))
        updates: list[types.TypeUpdate] = []
        users: list[types.TypeUser] = []
        if done is not None:
            updates.append(
                types.UpdateFolderPeers(
                    folder_peers=[
                        types.FolderPeer(peer=peer_user(p), folder_id=f) for p, f in done.moves
                    ],
                    pts=done.pts,
                    pts_count=1,
                )
            )
            users = await self._users_for(ctx.user_id, {p for p, _ in done.moves})
        return types.Updates(updates=updates, users=users, chats=[], date=int(ctx.now), seq=0)

    # -- peer settings ---------------------------------------------------------------------

    @method(functions.messages.GetPeerSettings)
    async def get_peer_settings(
        self, ctx: AuthedContext, req: functions.messages.GetPeerSettings
    ) -> TLObject:
        peer = await self._peer(ctx, req.peer)
        bar = await self._dialogs.peer_settings(ctx.user_id, peer)
        return types.messages.PeerSettings(
            settings=peer_settings_tl(bar.report_spam, bar.add_contact, bar.block_contact),
            chats=[],
            users=await self._users_for(ctx.user_id, [peer]),
        )

    @method(functions.messages.HidePeerSettingsBar)
    async def hide_peer_settings_bar(
        self, ctx: AuthedContext, req: functions.messages.HidePeerSettingsBar
    ) -> bool:
        peer = await self._peer(ctx, req.peer)
        await self._dialogs.hide_peer_settings_bar(ctx.user_id, peer, _origin(ctx), int(ctx.now))
        return True


class ChatViews:
    """The viewer's notify settings and action bar for their chat with a user, as
    userFull carries them (users.getFullUser answers with them)."""

    def __init__(self, dialogs: DialogService, notify_settings: NotifySettings) -> None:
        self._dialogs = dialogs
        self._notify_settings = notify_settings

    async def __call__(
        self, viewer: int, target: int
    ) -> tuple[types.TypePeerNotifySettings, types.TypePeerSettings]:
        notify = await self._notify_settings.notify_settings(viewer, "peer", target)
        bar = await self._dialogs.peer_settings(viewer, target)
        return notify_tl(notify), peer_settings_tl(
            bar.report_spam, bar.add_contact, bar.block_contact
        )
