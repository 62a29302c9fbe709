"""Notification settings (TL <-> domain; the rules are in services/notify_settings.py)."""

from __future__ import annotations

from telesrv.rpc.account_common import origin
from telesrv.rpc.context import AuthedContext, RequestContext
from telesrv.rpc.dialogs_tl import notify_tl
from telesrv.rpc.peers import PeerResolver
from telesrv.rpc.registry import method
from telesrv.services.notify_settings import NotifyRow, NotifySettings
from telesrv.tl import TLObject, functions, types
from telesrv.tl.errors import PeerIdInvalid, SettingsInvalid

# A local sound is a name the app shows and the app's own reference to the file; both
# are stored and sent back to every session, so they are bounded.
MAX_SOUND_TITLE = 128
MAX_SOUND_DATA = 1024


def check_sound(sound: types.TypeNotificationSound | None) -> None:
    """SETTINGS_INVALID for a notificationSoundLocal whose title or data is too long, and
    for every notificationSoundRingtone: a ringtone names one of the user's saved
    notification sounds, and this server saves none (account.saveRingtone is not
    served), so no id can name one. Stored as given, it would be sent to every
    device as a sound that cannot be fetched."""
    if isinstance(sound, types.NotificationSoundRingtone):
        raise SettingsInvalid()
    if isinstance(sound, types.NotificationSoundLocal) and (
        len(sound.title) > MAX_SOUND_TITLE or len(sound.data) > MAX_SOUND_DATA
    ):
        raise SettingsInvalid()


NOTIFY_KINDS = {
    types.InputNotifyUsers: "users",
    types.InputNotifyChats: "chats",
    types.InputNotifyBroadcasts: "broadcasts",
}


class NotifySettingsHandlers:
    """account.getNotifySettings, updateNotifySettings, resetNotifySettings."""

    def __init__(self, notify_settings: NotifySettings, resolve_peer: PeerResolver) -> None:
        self._notify_settings = notify_settings
        self._resolve_peer = resolve_peer

    async def _notify_peer(
        self, ctx: RequestContext, peer: types.TypeInputNotifyPeer
    ) -> tuple[str, int]:
        if isinstance(peer, types.InputNotifyPeer):
            return "peer", await self._resolve_peer(ctx, peer.peer)
        kind = NOTIFY_KINDS.get(type(peer))
        if kind is None:
            raise PeerIdInvalid()  # forum topics and communities do not exist here
        return kind, 0

    @method(functions.account.GetNotifySettings)
    async def get_notify_settings(
        self, ctx: AuthedContext, req: functions.account.GetNotifySettings
    ) -> TLObject:
        kind, peer = await self._notify_peer(ctx, req.peer)
        return notify_tl(await self._notify_settings.notify_settings(ctx.user_id, kind, peer))

    @method(functions.account.UpdateNotifySettings)
    async def update_notify_settings(
        self, ctx: AuthedContext, req: functions.account.UpdateNotifySettings
    ) -> bool:
        s = req.settings
        check_sound(s.sound)
        kind, peer = await self._notify_peer(ctx, req.peer)
        row = NotifyRow(
            kind=kind,
            peer_user_id=peer,
            show_previews=s.show_previews,
            silent=s.silent,
            mute_until=s.mute_until,
            sound=bytes(s.sound.to_bytes()) if s.sound is not None else None,
        )
        await self._notify_settings.update_notify_settings(
            ctx.user_id, row, origin(ctx), int(ctx.now)
        )
        return True

    @method(functions.account.ResetNotifySettings)
    async def reset_notify_settings(
        self, ctx: AuthedContext, req: functions.account.ResetNotifySettings
    ) -> bool:
        await self._notify_settings.reset_notify_settings(ctx.user_id, origin(ctx), int(ctx.now))
        return True
