"""The sound of a chat's notification settings, with unmodified Telethon: the default,
no sound and a local sound are kept and shown back; a saved ringtone's id is refused
(SETTINGS_INVALID, nothing stored), as this server keeps no saved ringtones, so no id
names one."""

from __future__ import annotations

import pytest
from telethon import errors, functions, types

from telesrv.rpc.notify_settings import MAX_SOUND_DATA, MAX_SOUND_TITLE

from .conftest import ClientFactory
from .test_state_updates import sign_in

KEPT = [
    types.NotificationSoundDefault(),
    types.NotificationSoundNone(),
    types.NotificationSoundLocal(title="t" * MAX_SOUND_TITLE, data="d" * MAX_SOUND_DATA),
]


async def test_kept_sounds_are_stored_and_ringtone_ids_refused(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    peer = types.InputNotifyUsers()
    for sound in KEPT:
        assert await alice(
            functions.account.UpdateNotifySettingsRequest(
                peer, types.InputPeerNotifySettings(sound=sound)
            )
        )
        shown = await alice(functions.account.GetNotifySettingsRequest(peer))
        assert shown.other_sound == sound
    for ringtone in (0, 1, 2**63 - 1, -1):
        with pytest.raises(errors.SettingsInvalidError):
            await alice(
                functions.account.UpdateNotifySettingsRequest(
                    peer,
                    types.InputPeerNotifySettings(
                        sound=types.NotificationSoundRingtone(id=ringtone)
                    ),
                )
            )
        shown = await alice(functions.account.GetNotifySettingsRequest(peer))
        assert shown.other_sound == KEPT[-1]
