"""The serving object graph, built in one place.

settings + resources (pools) -> stores -> services -> RPC handlers -> gateway,
plus the outbox delivery that pushes committed updates through the gateway.
Tests and benchmarks build the same graph with :func:`build_server`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from telesrv.config import format_host_port
from telesrv.delivery.cluster import Cluster, keys_of
from telesrv.delivery.metrics import sample_backlog
from telesrv.delivery.outbox import OutboxDelivery
from telesrv.gateway.metrics import CHECK_TIMEOUT, CONNECTIONS, SESSIONS, MetricsServer, Readiness
from telesrv.gateway.server import Gateway, GatewayLimits
from telesrv.gateway.websocket import tls_context
from telesrv.rpc.deletes import DeleteHandlers
from telesrv.rpc.dialog_filters import DialogFilterHandlers
from telesrv.rpc.dialogs import DialogsHandlers
from telesrv.rpc.drafts import DraftHandlers
from telesrv.rpc.edits import EditHandlers
from telesrv.rpc.empty_lists import EmptyListHandlers
from telesrv.rpc.forwards import ForwardHandlers
from telesrv.rpc.handlers import build_dispatcher
from telesrv.rpc.help import ServerAddress
from telesrv.rpc.history import HistoryHandlers
from telesrv.rpc.message_media import MessageMediaHandlers
from telesrv.rpc.messages import MessagesHandlers
from telesrv.rpc.notify_settings import NotifySettingsHandlers
from telesrv.rpc.payments import PaymentsHandlers
from telesrv.rpc.peers import Peers
from telesrv.rpc.privacy import PrivacyHandlers
from telesrv.rpc.profile import ProfileHandlers
from telesrv.rpc.qr_login import login_token_update
from telesrv.rpc.reaction_catalog import ReactionCatalogHandlers
from telesrv.rpc.reactions import ReactionHandlers, icon_attributes
from telesrv.rpc.read_receipts import ContentReadHandlers, ReadHistoryHandlers
from telesrv.rpc.received import ReceivedHandlers
from telesrv.rpc.render import UpdateRenderer, UsersFor
from telesrv.rpc.saved_messages import SavedMessagesHandlers
from telesrv.rpc.search import SearchHandlers
from telesrv.rpc.stickers import StickerHandlers
from telesrv.rpc.stories import StoriesHandlers
from telesrv.rpc.top_peers import TopPeersHandlers
from telesrv.rpc.updates import UpdatesHandlers
from telesrv.rpc.uploads import UploadHandlers
from telesrv.rpc.users_tl import UsersTl
from telesrv.services.account_services import build_account_services
from telesrv.services.accounts import AuthorizationService
from telesrv.services.auth_keys import AuthKeyService
from telesrv.services.blobs import (
    BlobCollector,
    BlobGcLimits,
    UnsentMediaCollector,
    UnsentMediaLimits,
)
from telesrv.services.compat import UnknownMethods
from telesrv.services.contacts import PhoneLookupLimits
from telesrv.services.deletes import Deletes
from telesrv.services.dialog_filters import DialogFilterService
from telesrv.services.dialogs import DialogService
from telesrv.services.drafts import Drafts
from telesrv.services.edits import Edits
from telesrv.services.files import MediaFiles
from telesrv.services.forwards import Forwards
from telesrv.services.history import History
from telesrv.services.messages import MessageService
from telesrv.services.notify_settings import NotifySettings
from telesrv.services.qr_login import QrLoginPolicy, QrLoginService
from telesrv.services.reaction_icons import ReactionIcons
from telesrv.services.reactions import AVAILABLE_REACTIONS, ReactionService
from telesrv.services.read_receipts import ContentReads, ReadReceipts
from telesrv.services.search import Search
from telesrv.services.top_peers import TopPeers
from telesrv.services.update_log import UpdateLogEvents
from telesrv.services.updates import UpdatesService
from telesrv.services.uploads import UploadLimits, Uploads
from telesrv.services.users import ProjectionCache
from telesrv.store import admin_events, migrate
from telesrv.store import messages as messages_store
from telesrv.store.blobs import LocalBlobStore
from telesrv.store.counters import Counters
from telesrv.store.db import Db
from telesrv.store.metrics import watch_pool
from telesrv.store.redis_batch import CommandBatcher
from telesrv.store.uploads import UploadArea, UploadQuota
from telesrv.tl import types
from telesrv.workers import WorkerGroup, worker_settings

if TYPE_CHECKING:
    from telesrv.app import Resources
    from telesrv.config import Settings

# How long a stopping server waits for finished uploads' removals (parts and places).
UPLOAD_REMOVALS_GRACE = 5.0


def _secret(private_key: Any, label: bytes) -> bytes:
    d = private_key.private_numbers().d
    return hashlib.sha256(label + b"\0" + d.to_bytes(256, "big")).digest()


def salt_secret_for(private_key: Any, start_nonce: bytes) -> bytes:
    """Server salts derive from the server key and a nonce drawn at each start.

    Which msg_ids a session has seen is remembered only in the process, so a
    message captured before a restart would be executed again if its salt were
    still valid. With a new nonce per start the new process answers it with
    bad_server_salt instead; real clients then send again with the new salt. For
    the same reason processes do not share salts: each remembers only its own
    msg_ids, and a client moving to another process pays one bad_server_salt.
    """
    return hashlib.sha256(_secret(private_key, b"telesrv server salts") + start_nonce).digest()


def access_hash_secret_for(private_key: Any) -> bytes:
    """Access hashes derive from the server key: those clients hold survive restarts."""
    return _secret(private_key, b"telesrv access hashes")


def readiness(resources: Resources) -> Readiness:
    """/readyz: PostgreSQL answers and has every migration of this build, Redis answers."""

    async def postgres() -> dict[str, str | None]:
        try:
            pending = await asyncio.wait_for(
                migrate.pending_versions(resources.db.pool), CHECK_TIMEOUT
            )
        except Exception as e:
            return {"postgres": f"unreachable ({type(e).__name__}: {e})"}
        missing = ", ".join(f"{v:04d}" for v in pending)
        return {"postgres": None, "migrations": f"not applied: {missing}" if pending else None}

    async def redis() -> dict[str, str | None]:
        try:
            await asyncio.wait_for(resources.redis.ping(), CHECK_TIMEOUT)
        except Exception as e:
            return {"redis": f"unreachable ({type(e).__name__}: {e})"}
        return {"redis": None}

    async def check() -> dict[str, str | None]:
        pg, rd = await asyncio.gather(postgres(), redis())
        return pg | rd

    return check


@dataclass
class Server:
    gateway: Gateway
    outbox: OutboxDelivery
    counters: Counters
    cluster: Cluster
    resources: Resources
    # An admin command ended this key's authorization: forget it, close its sessions.
    on_ended_elsewhere: Callable[[int], None]
    metrics: MetricsServer | None = None
    uploads: Uploads | None = None
    blob_gc: BlobCollector | None = None
    _admin_listener: asyncio.Task[None] | None = field(default=None, init=False)
    _cleanup: asyncio.Task[None] | None = field(default=None, init=False)
    _blob_gc: asyncio.Task[None] | None = field(default=None, init=False)

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> tuple[str, int]:
        await self.counters.load_scripts()
        # Subscribed and announced before the first client: pushes for it reach us.
        await self.cluster.start()
        bound = await self.gateway.start(host, port, reuse_port=reuse_port)
        self.outbox.start()
        subscribed = asyncio.Event()
        self._admin_listener = asyncio.create_task(
            admin_events.listen_ended(self.resources.redis, self.on_ended_elsewhere, subscribed.set)
        )
        # Subscribed before the server reports ready, so no admin message is missed.
        waiter = asyncio.ensure_future(subscribed.wait())
        await asyncio.wait(
            [waiter, self._admin_listener],
            timeout=CHECK_TIMEOUT,
            return_when=asyncio.FIRST_COMPLETED,
        )
        waiter.cancel()
        if self.uploads is not None:
            self._cleanup = asyncio.get_running_loop().create_task(self.uploads.run_cleanup())
        if self.blob_gc is not None:
            self._blob_gc = asyncio.get_running_loop().create_task(self.blob_gc.run_periodic())
        return bound

    async def start_metrics(self, host: str, port: int) -> tuple[str, int]:
        """Serve /metrics, /healthz and /readyz on their own port."""
        db = self.resources.db
        self.metrics = MetricsServer(
            readiness(self.resources), refresh=lambda: sample_backlog(db.pool)
        )
        return await self.metrics.start(host, port)

    async def stop(self) -> None:
        if self._admin_listener is not None:
            self._admin_listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._admin_listener
        if self.metrics is not None:
            await self.metrics.stop()
        if self._cleanup is not None:
            self._cleanup.cancel()
        if self._blob_gc is not None:
            self._blob_gc.cancel()
        await self.gateway.stop()
        if self.uploads is not None:
            # Removals the stopped requests left running free their shared places now;
            # cut off at shutdown, those places would stay taken for the idle time.
            await self.uploads.wait_removals(timeout=UPLOAD_REMOVALS_GRACE)
        await self.outbox.stop()
        await self.cluster.stop()


def app_screen_handlers(
    db: Db, history: History, peers: Peers, users_for: UsersFor
) -> tuple[object, ...]:
    """What apps ask for on their own screens (stickers, stories, themes, stars, top
    peers ...): mostly the empty forms of things this server does not have."""
    return (
        StickerHandlers(),
        ReactionCatalogHandlers(peers.resolve_input_peer),
        EmptyListHandlers(),
        PrivacyHandlers(),
        PaymentsHandlers(peers.resolve_input_peer),
        StoriesHandlers(peers.resolve_input_peer, users_for),
        TopPeersHandlers(TopPeers(db), users_for),
        ReceivedHandlers(history),
        ProfileHandlers(peers),
        SavedMessagesHandlers(history, peers.resolve_input_peer, users_for),
    )


def build_server(settings: Settings, resources: Resources) -> Server:
    db: Db = resources.db
    private_key = resources.server_key.private_key
    # One batcher for the hot Redis commands: a send's allocations and its push's holder
    # lookup, and those of concurrent sends, leave in the same round trips.
    redis_batch = CommandBatcher(resources.redis)
    counters = Counters(resources.redis, db, redis_batch)
    auth_keys = AuthKeyService(db)
    address = ServerAddress(settings.advertised_host, settings.advertised_port)

    gateway_ref: list[Gateway] = []
    cluster_ref: list[Cluster] = []

    async def locate(user_ids: list[int]) -> Any:
        return await cluster_ref[0].locate(user_ids)

    def push_anywhere(user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int:
        return cluster_ref[0].push_anywhere(user_id, body, exclude)

    def push(user_id: int, body: bytes, exclude: tuple[int, int] | None) -> int:
        return gateway_ref[0].push_to_user(user_id, body, exclude)

    def online(user_id: int) -> bool:
        return bool(gateway_ref and gateway_ref[0].sessions.sessions_of_user(user_id))

    async def render_push(user_id: int, events: list[Any], date: int) -> bytes | None:
        updates = await renderer.push_updates(user_id, events, date)
        return None if updates is None else updates.to_bytes()

    async def render_batch(groups: list[tuple[int, list[Any]]], date: int) -> list[bytes | None]:
        prefetched = await renderer.prefetch(groups)
        bodies: list[bytes | None] = []
        for index in range(len(groups)):
            updates = renderer.push_prefetched(prefetched, index, date)
            bodies.append(None if updates is None else updates.to_bytes())
        return bodies

    async def render_known(
        groups: list[tuple[int, list[Any]]], date: int, boxes: Sequence[Any]
    ) -> list[bytes | None]:
        prefetched = await renderer.prefetch(groups, boxes)
        return [
            None
            if (updates := renderer.push_prefetched(prefetched, index, date)) is None
            else updates.to_bytes()
            for index in range(len(groups))
        ]

    outbox = OutboxDelivery(
        db,
        render_push,
        push,
        workers=settings.outbox_workers,
        batch=settings.outbox_batch_size,
        interval=settings.outbox_poll_interval,
        lease=settings.outbox_lease_timeout,
        order_wait=settings.outbox_order_wait,
        online=online,
        render_batch=render_batch,
        locate=locate,
        render_known=render_known,
    )
    accounts = build_account_services(
        db,
        access_secret=access_hash_secret_for(private_key),
        dev_login_code=settings.dev_login_code,
        auto_register=settings.auto_register,
        events=UpdateLogEvents(counters, on_commit=outbox.wake),
        counters=counters,
        lookup_limits=PhoneLookupLimits(
            per_minute=settings.phone_lookup_rate_limit,
            per_day=settings.phone_lookup_daily_limit,
        ),
        redis=resources.redis,
        qr_policy=QrLoginPolicy(
            ttl=settings.login_token_ttl,
            per_key_per_minute=settings.login_token_rate_limit,
            global_per_minute=settings.login_token_global_rate_limit,
        ),
    )
    users_tl = UsersTl(accounts.projection)

    async def users_for(viewer: int, ids: Iterable[int]) -> list[types.TypeUser]:
        return await users_tl(viewer, ids, time.time())

    async def load_boxes(owner: int, box_ids: list[int]) -> list[messages_store.BoxMessage]:
        return await messages_store.get_boxes(db.pool, owner, box_ids)

    async def load_boxes_of_owners(keys: list[tuple[int, int]]) -> list[Any]:
        return await messages_store.get_boxes_of_owners(db.pool, keys)

    async def users_for_many(wanted: dict[int, list[int]]) -> dict[int, list[types.TypeUser]]:
        return await users_tl.many(wanted, time.time())

    renderer = UpdateRenderer(
        load_boxes,
        users_for,
        load_boxes_of_owners=load_boxes_of_owners,
        users_for_many=users_for_many,
    )
    dialogs = DialogService(db, counters, on_commit=outbox.wake)
    notify_settings = NotifySettings(db, on_commit=outbox.wake)
    drafts = Drafts(db, on_commit=outbox.wake)
    dialog_filters = DialogFilterService(db, on_commit=outbox.wake)
    messages = MessageService(
        db,
        counters,
        send_rate_limit=settings.send_rate_limit,
        on_commit=outbox.wake,
        held_pushes=outbox,
        after_delivery=dialogs.unarchive_on_message,
        after_clear_draft_send=drafts.clear_draft_on_send,
        after_send=dialogs.close_bar_on_reply,
    )
    history = History(db)
    read_receipts = ReadReceipts(
        db, counters, on_commit=outbox.wake, after_read=dialogs.clear_unread_mark
    )
    updates = UpdatesService(db, counters, in_flight=outbox.lowest_expected)
    peers = Peers(accounts.access_hashes)
    dialogs_handlers = DialogsHandlers(
        dialogs, notify_settings, updates, peers.resolve_input_peer, users_for, dialog_filters
    )
    blobs = LocalBlobStore(settings.files_dir)
    uploads = Uploads(
        UploadArea(settings.uploads_dir),
        blobs,
        UploadLimits(
            max_uploads_per_user=settings.max_uploads_per_user,
            max_bytes_per_user=settings.max_upload_bytes_per_user,
            idle_ttl=settings.upload_idle_ttl,
            cleanup_interval=settings.upload_cleanup_interval,
        ),
        # Counted across processes; an upload stays counted after its last part for as
        # long as the cleanup may take to remove it.
        UploadQuota(
            resources.redis,
            max_files=settings.max_uploads_per_user,
            max_bytes=settings.max_upload_bytes_per_user,
            ttl=settings.upload_idle_ttl + settings.upload_cleanup_interval,
        ),
    )
    reaction_icons = ReactionIcons(AVAILABLE_REACTIONS, icon_attributes)
    edits = Edits(db, counters, on_commit=outbox.wake)
    deletes = Deletes(db, counters, on_commit=outbox.wake)
    content_reads = ContentReads(db, counters, on_commit=outbox.wake)
    search = Search(db)
    forwards = Forwards(
        db,
        counters,
        send_rate_limit=settings.send_rate_limit,
        on_commit=outbox.wake,
        after_delivery=dialogs.unarchive_on_message,
        after_send=dialogs.close_bar_on_reply,
    )
    media_files = MediaFiles(
        db,
        uploads,
        blobs,
        counters,
        media_rate_limit=settings.media_rate_limit,
        icons=reaction_icons,
    )
    reactions = ReactionService(db, on_commit=outbox.wake)
    dispatcher = build_dispatcher(
        settings,
        auth_keys,
        address,
        accounts,
        unknown_methods=UnknownMethods(db),
        users_tl=users_tl,
        extra_handlers=(
            MessagesHandlers(
                messages, peers.resolve_input_peer, users_for, push_ephemeral=push_anywhere
            ),
            HistoryHandlers(history, peers.resolve_input_peer, users_for),
            ReadHistoryHandlers(read_receipts, updates, peers.resolve_input_peer),
            dialogs_handlers,
            NotifySettingsHandlers(notify_settings, peers.resolve_input_peer),
            DraftHandlers(drafts, peers.resolve_input_peer, users_for),
            DialogFilterHandlers(dialog_filters, peers.resolve_input_peer),
            UpdatesHandlers(updates, renderer),
            EditHandlers(edits, peers.resolve_input_peer, users_for),
            DeleteHandlers(deletes, updates, peers.resolve_input_peer),
            ForwardHandlers(forwards, peers.resolve_input_peer, users_for),
            ContentReadHandlers(content_reads, updates, peers.resolve_input_peer),
            SearchHandlers(search, peers.resolve_input_peer, users_for),
            UploadHandlers(uploads, media_files, peers.resolve_input_peer),
            MessageMediaHandlers(messages, media_files, peers.resolve_input_peer, users_for),
            ReactionHandlers(
                reactions,
                updates,
                peers.resolve_input_peer,
                users_for,
                reaction_icons,
            ),
            *app_screen_handlers(db, history, peers, users_for),
        ),
        chat_view=dialogs_handlers.chat_view,
        default_reaction=reactions.default_reaction,
    )
    gateway = Gateway(
        auth_keys=auth_keys,
        dispatcher=dispatcher,
        rsa_key=private_key,
        fingerprint=resources.server_key.fingerprint,
        salt_secret=salt_secret_for(private_key, os.urandom(16)),
        resolve_user=accounts.authorizations.user_for_key,
        limits=GatewayLimits.from_settings(settings),
    )
    gateway.address = address
    gateway_ref.append(gateway)
    # Read at scrape time; the server built last is the one measured.
    CONNECTIONS.set_function(lambda: len(gateway.connections))
    SESSIONS.set_function(lambda: len(gateway.sessions))
    watch_pool(db.pool)

    def ended_elsewhere(perm_auth_key_id: int) -> None:
        accounts.authorizations.ended_elsewhere(perm_auth_key_id)
        gateway.sessions.close_key(perm_auth_key_id)

    cluster = Cluster(resources.redis, resources.redis_url, gateway, batch=redis_batch)
    cluster_ref.append(cluster)
    _share_invalidations(
        cluster, gateway, auth_keys, accounts.authorizations, accounts.projection.cache
    )
    if accounts.qr_login is not None:
        _push_login_tokens(cluster, gateway, accounts.qr_login)
    return Server(
        gateway=gateway,
        outbox=outbox,
        counters=counters,
        cluster=cluster,
        resources=resources,
        on_ended_elsewhere=ended_elsewhere,
        uploads=uploads,
        blob_gc=BlobCollector(
            db,
            blobs,
            BlobGcLimits(
                grace=settings.blob_gc_grace,
                interval=settings.blob_gc_interval,
                batch=settings.blob_gc_batch,
            ),
            UnsentMediaCollector(db, UnsentMediaLimits()),
        ),
    )


def _share_invalidations(
    cluster: Cluster,
    gateway: Gateway,
    auth_keys: AuthKeyService,
    authorizations: AuthorizationService,
    projections: ProjectionCache,
) -> None:
    """What one process changes, the others forget (their caches and sessions)."""

    def logins_changed(keys: list[int], close: bool) -> None:
        cluster.broadcast("auth", ids=keys, close=close)

    def on_logins(message: dict[str, Any]) -> None:
        keys = list(keys_of(message))
        authorizations.forget(keys)
        for key in keys:
            if message.get("close"):
                gateway.sessions.close_key(key)
            else:
                gateway.sessions.authorization_unknown(key)

    def keys_changed(ids: list[int]) -> None:
        cluster.broadcast("key", ids=ids)

    def on_keys(message: dict[str, Any]) -> None:
        auth_keys.forget(keys_of(message))

    def users_changed(ids: list[int]) -> None:
        cluster.broadcast("users", ids=ids)

    def on_users(message: dict[str, Any]) -> None:
        projections.forget(keys_of(message))

    def forget_all() -> None:
        authorizations.forget(None)
        auth_keys.forget(None)
        projections.forget(None)

    authorizations.on_change = logins_changed
    auth_keys.on_change = keys_changed
    cluster.on("auth", on_logins)
    cluster.on("key", on_keys)
    projections.on_change = users_changed
    cluster.on("users", on_users)
    cluster.on_resubscribe(forget_all)


def _push_login_tokens(cluster: Cluster, gateway: Gateway, qr_login: QrLoginService) -> None:
    """An accepted QR login token: updateLoginToken to the sessions of the key that
    shows it, here and (over the bus, as the key's sessions are not registered
    anywhere: it has no account yet) in every other process."""

    def accepted(perm_auth_key_id: int) -> None:
        gateway.push_to_key(perm_auth_key_id, login_token_update(int(time.time())))
        cluster.broadcast("login_token", ids=[perm_auth_key_id])

    def on_accepted(message: dict[str, Any]) -> None:
        for key in keys_of(message):
            gateway.push_to_key(key, login_token_update(int(time.time())))

    qr_login.on_accepted = accepted
    cluster.on("login_token", on_accepted)


async def run(settings: Settings, resources: Resources) -> None:
    """Serve until cancelled (the contract's `telesrv serve`)."""
    server = build_server(settings, resources)
    host, port = await server.start(
        settings.listen_host,
        settings.listen_port,
        reuse_port=settings.reuse_port or settings.workers > 1,
    )
    ws_bound: tuple[str, int] | None = None
    if settings.ws_listen_host is not None and settings.ws_listen_port is not None:
        try:
            tls = None
            if settings.ws_tls_cert is not None and settings.ws_tls_key is not None:
                tls = tls_context(settings.ws_tls_cert, settings.ws_tls_key)
            ws_bound = await server.gateway.start_websocket(
                settings.ws_listen_host,
                settings.ws_listen_port,
                ssl_context=tls,
                reuse_port=settings.reuse_port or settings.workers > 1,
            )
        except BaseException:
            await server.stop()
            raise
        # Before the ready line: once a client sees that, both listeners accept.
        print(f"telesrv websocket listening on {format_host_port(*ws_bound)}", flush=True)
    if settings.metrics_host is not None and settings.metrics_port is not None:
        try:
            m_host, m_port = await server.start_metrics(
                settings.metrics_host, settings.metrics_port
            )
        except BaseException:
            await server.stop()
            raise
        print(f"telesrv metrics on http://{format_host_port(m_host, m_port)}/metrics", flush=True)
    group = WorkerGroup()
    try:
        if settings.workers > 1:
            more = worker_settings(
                settings,
                host,
                port,
                resources.database_url,
                resources.redis_url,
                resources.partition_count,
                ws=ws_bound,
            )
            await group.start(more, settings.workers - 1)
        print(f"telesrv listening on {host}:{port}", flush=True)
        await asyncio.Event().wait()
    finally:
        await asyncio.shield(group.stop())
        await asyncio.shield(server.stop())
