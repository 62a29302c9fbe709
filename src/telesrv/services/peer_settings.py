"""What the action bar of a private chat offers (peerSettings), shared by the chat list
(which shows and hides it) and the account events that close it (a contact added)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bar:
    """The action bar of a private chat (peerSettings)."""

    report_spam: bool = False
    add_contact: bool = False
    block_contact: bool = False

    def payload(self) -> dict[str, bool]:
        return {
            "report_spam": self.report_spam,
            "add_contact": self.add_contact,
            "block_contact": self.block_contact,
        }


NO_BAR = Bar()
# A chat a non-contact started: add them, block them, or report spam.
STRANGER_BAR = Bar(report_spam=True, add_contact=True, block_contact=True)
