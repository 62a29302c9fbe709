"""What the serving process is made of: its parts, each under the name the handlers'
constructors give it (``Parts``), and the account half of them (``AccountServices``,
``AccountParts``). ``wiring.build_server`` builds them; handlers, tests and benchmarks
take them from here."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from telesrv.delivery.outbox import OutboxWakeup
from telesrv.rpc.dialogs import ChatViews
from telesrv.rpc.help import DefaultReaction, ServerAddress
from telesrv.rpc.messages import EphemeralPush
from telesrv.rpc.peers import Peers
from telesrv.rpc.profile_pushes import ProfilePushes
from telesrv.rpc.render import UpdateRenderer
from telesrv.rpc.users_tl import UsersTl
from telesrv.services.access_hashes import AccessHashes
from telesrv.services.account_ttl import AccountTtl
from telesrv.services.accounts import AccountEvents, AuthorizationService
from telesrv.services.auth_keys import AuthKeyService
from telesrv.services.contacts import ContactService
from telesrv.services.deletes import Deletes
from telesrv.services.dialog_filters import DialogFilterService
from telesrv.services.dialogs import DialogService
from telesrv.services.drafts import Drafts
from telesrv.services.edits import Edits
from telesrv.services.files import MediaFiles
from telesrv.services.forwards import Forwards
from telesrv.services.history import History
from telesrv.services.login import (
    LoginService,
)
from telesrv.services.messages import MessageService
from telesrv.services.notify_settings import NotifySettings
from telesrv.services.passwords import Passwords
from telesrv.services.people_search import PeopleSearch
from telesrv.services.pins import Pins
from telesrv.services.privacy import PrivacyService
from telesrv.services.profile_photos import ProfilePhotos
from telesrv.services.projection import UserProjection
from telesrv.services.qr_login import QrLoginService
from telesrv.services.reaction_icons import ReactionIcons
from telesrv.services.reactions import ReactionService
from telesrv.services.read_receipts import ContentReads, ReadReceipts
from telesrv.services.search import Search
from telesrv.services.sends import SendPipeline
from telesrv.services.top_peers import TopPeers
from telesrv.services.updates import UpdatesService
from telesrv.services.uploads import Uploads
from telesrv.services.users import UserService
from telesrv.store.counters import Counters

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class AccountServices:
    """The account half of the graph: what its handlers get (``account_parts``), and what
    the rest of the process and the account tests use besides."""

    access_hashes: AccessHashes
    authorizations: AuthorizationService
    users: UserService
    projection: UserProjection
    login: LoginService
    contacts: ContactService
    privacy: PrivacyService
    events: AccountEvents
    # Login by QR code; None without Redis (where its tokens live).
    qr_login: QrLoginService | None = None
    # Two-step verification; None without Redis (where its exchanges live).
    passwords: Passwords | None = None


def account_parts(accounts: AccountServices, users_tl: UsersTl | None = None) -> AccountParts:
    """``users_tl``: the process's one, so that answers and pushes share the users built."""
    return AccountParts(
        login=accounts.login,
        authorizations=accounts.authorizations,
        users=accounts.users,
        contacts=accounts.contacts,
        qr_login=accounts.qr_login,
        passwords=accounts.passwords,
        users_tl=users_tl if users_tl is not None else UsersTl(accounts.projection),
        peers=Peers(accounts.access_hashes),
    )


@dataclass(frozen=True, slots=True)
class AccountParts:
    """What the account services give handlers."""

    login: LoginService
    authorizations: AuthorizationService
    users: UserService
    contacts: ContactService
    qr_login: QrLoginService | None  # None: QR login is off
    passwords: Passwords | None  # None: no Redis, no two-step verification
    users_tl: UsersTl
    peers: Peers

    def by_name(self) -> dict[str, object]:
        named = {f.name: getattr(self, f.name) for f in fields(self)}
        # The forms handlers take these in: users for a viewer (as objects or written), a
        # peer's user id.
        named["users_for"] = self.users_tl
        named["users_wire"] = self.users_tl.wire
        named["resolve_peer"] = self.peers.resolve_input_peer
        return named


@dataclass(frozen=True, slots=True)
class Parts:
    """Every part of the process a handler (or a test, or a benchmark) may ask for, each
    under the name handlers' constructors give it."""

    account: AccountParts
    address: ServerAddress
    auth_keys: AuthKeyService
    counters: Counters
    committed: OutboxWakeup  # what writers signal the outbox delivery with
    history: History
    renderer: UpdateRenderer
    sends: SendPipeline
    messages: MessageService
    push_ephemeral: EphemeralPush
    updates: UpdatesService
    read_receipts: ReadReceipts
    content_reads: ContentReads
    edits: Edits
    deletes: Deletes
    forwards: Forwards
    search: Search
    dialogs: DialogService
    notify_settings: NotifySettings
    drafts: Drafts
    dialog_filters: DialogFilterService
    chat_view: ChatViews
    uploads: Uploads
    media_files: MediaFiles
    profile_photos: ProfilePhotos
    reactions: ReactionService
    reaction_icons: ReactionIcons
    default_reaction: DefaultReaction
    top_peers: TopPeers
    account_ttl: AccountTtl
    pins: Pins
    people_search: PeopleSearch
    privacy: PrivacyService
    profile_pushes: ProfilePushes  # status, name and photo changes, pushed live

    def by_name(self) -> dict[str, object]:
        named = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "account"}
        return named | self.account.by_name()
