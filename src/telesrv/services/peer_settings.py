"""What the action bar of a private chat offers (peerSettings), shared by the chat list
(which shows and hides it) and the account events that close it (a contact added)."""

from __future__ import annotations

from telesrv.store.log_payloads import PeerSettingsChanged

# The action bar of a private chat (peerSettings), as its event carries it.
Bar = PeerSettingsChanged


NO_BAR = Bar()
# A chat a non-contact started: add them, block them, or report spam.
STRANGER_BAR = Bar(report_spam=True, add_contact=True, block_contact=True)
