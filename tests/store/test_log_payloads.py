"""Each event kind's payload: what a writer stores reads back the same, and the forms
already in logs (keys left out, as earlier writers did) still read."""

from __future__ import annotations

from typing import Any

import pytest

from telesrv.store import log_payloads as lp

ROUND_TRIPS: list[Any] = [
    lp.DialogPinned(True, 1),
    lp.DialogPinned(False),
    lp.PinnedDialogs(0, [5, 3, 9]),
    lp.UnreadMark(True),
    lp.NotifySettingsChanged("peer", 42, True, False, 2**31 - 1, b"\x01\x02"),
    lp.NotifySettingsChanged("users", 0),
    lp.DialogFilterChanged(7, b"\x00\xff"),
    lp.DialogFilterChanged(7),
    lp.DialogFilterOrder([3, 1, 2]),
    lp.FolderPeers([(5, 1), (6, 0)]),
    lp.PeerSettingsChanged(True, True, False),
    lp.PeerBlocked(True),
    lp.MessageReactions(12, [[1000001, "👍", False, 1700000000]], True),
    lp.MessagesPinned(True),
    lp.MessagesPinned(False),
]


@pytest.mark.parametrize("payload", ROUND_TRIPS, ids=lambda p: type(p).__name__)
def test_what_is_written_reads_back(payload: Any) -> None:
    assert type(payload).from_json(payload.to_json()) == payload


def test_drafts_read_back_with_the_event_date_as_fallback() -> None:
    saved = lp.DraftChanged(1700, "hi", b"\x05", 3, True, False)
    assert lp.DraftChanged.from_json(saved.to_json(), 1) == saved
    cleared = lp.DraftChanged(1700)
    assert cleared.to_json() == {"date": 1700}
    assert lp.DraftChanged.from_json({}, 99) == lp.DraftChanged(99)


def test_forms_already_in_logs_still_read() -> None:
    # A notify reset was written with its scope only; a deleted filter with its id only.
    reset = lp.NotifySettingsChanged.from_json({"kind": "peer", "peer": 5})
    assert reset == lp.NotifySettingsChanged("peer", 5) and reset.is_default
    assert lp.DialogFilterChanged.from_json({"id": 4}) == lp.DialogFilterChanged(4)
    assert lp.ReadInbox.from_json({"still_unread": 3}).still_unread == 3
    # Nothing stored (an event of no payload) reads as the defaults.
    assert lp.ReadInbox.from_json(None).still_unread == 0
    assert lp.PeerBlocked.from_json(None) == lp.PeerBlocked(False)
    assert lp.MessageReactions.from_json({"reactions": []}) is None  # names no message
