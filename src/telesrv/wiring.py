"""The composition root: the serving process, built in one place.

settings + resources (pools) -> services -> the gateway, its dispatcher, the cluster
bus and the outbox delivery -> the RPC handlers, found in ``telesrv.rpc`` and built
from the parts by name. Each part is built once, before what uses it, so nothing
here refers forward. Tests and benchmarks build the same process with
:func:`build_server`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING

from telesrv.config import format_host_port
from telesrv.delivery.cluster import Cluster
from telesrv.delivery.outbox import OutboxDelivery, OutboxWakeup
from telesrv.gateway.metrics import CONNECTIONS, SESSIONS
from telesrv.gateway.server import Gateway, GatewayLimits
from telesrv.gateway.websocket import tls_context
from telesrv.logs import announce
from telesrv.parts import AccountServices, Parts, account_parts
from telesrv.rpc.dialogs import ChatViews
from telesrv.rpc.discovery import build_handlers
from telesrv.rpc.handlers import build_dispatcher
from telesrv.rpc.help import ServerAddress
from telesrv.rpc.profile_pushes import ProfilePushes
from telesrv.rpc.reactions import icon_attributes
from telesrv.rpc.registry import Registry, register_all
from telesrv.rpc.render import UpdateRenderer
from telesrv.rpc.users_tl import UsersTl
from telesrv.server import Server
from telesrv.server_key import access_hash_secret_for, salt_secret_for
from telesrv.services.access_hashes import AccessHashes
from telesrv.services.account_ttl import AccountTtl
from telesrv.services.accounts import AccountEvents, AuthorizationService, NoAccountEvents
from telesrv.services.auth_keys import AuthKeyService
from telesrv.services.blobs import (
    BlobCollector,
    BlobGcLimits,
    UnsentMediaCollector,
    UnsentMediaLimits,
)
from telesrv.services.chat_hooks import AfterSend
from telesrv.services.code_delivery import (
    CodeDelivery,
    CommandHook,
    DeliveryHook,
    DeliveryLimits,
    WebhookHook,
    parse_command,
)
from telesrv.services.compat import UnknownMethods
from telesrv.services.contacts import ContactService, PhoneLookupLimits
from telesrv.services.deletes import Deletes
from telesrv.services.dialog_filters import DialogFilterService
from telesrv.services.dialogs import DialogService
from telesrv.services.drafts import Drafts
from telesrv.services.edits import Edits
from telesrv.services.files import MediaFiles
from telesrv.services.forwards import Forwards
from telesrv.services.history import History
from telesrv.services.login import (
    CodeSender,
    FixedCodeSender,
    LoginPolicy,
    LoginService,
    RandomCodeSender,
)
from telesrv.services.messages import MessageService
from telesrv.services.notify_settings import NotifySettings
from telesrv.services.passwords import PasswordPolicy, Passwords
from telesrv.services.people_search import PeopleSearch
from telesrv.services.pins import Pins
from telesrv.services.privacy import PrivacyService
from telesrv.services.profile_photos import ProfilePhotoAccess, ProfilePhotos
from telesrv.services.projection import UserProjection
from telesrv.services.projection_cache import ProjectionCache
from telesrv.services.qr_login import QrLoginPolicy, QrLoginService
from telesrv.services.reaction_icons import ReactionIcons
from telesrv.services.reactions import AVAILABLE_REACTIONS, ReactionService
from telesrv.services.read_receipts import ContentReads, ReadReceipts
from telesrv.services.search import Search
from telesrv.services.sends import SendPipeline
from telesrv.services.top_peers import TopPeers
from telesrv.services.update_log import UpdateLogEvents
from telesrv.services.updates import UpdatesService
from telesrv.services.uploads import UploadLimits, Uploads
from telesrv.services.users import UserService
from telesrv.serving import EndedElsewhere, LoginTokenPushes, SharedInvalidations
from telesrv.store.blobs import LocalBlobStore
from telesrv.store.counters import Counters
from telesrv.store.db import Db
from telesrv.store.login_tokens import LoginTokens
from telesrv.store.metrics import sample_gauge, watch_pool
from telesrv.store.rate_limits import RateLimits
from telesrv.store.redis_batch import CommandBatcher
from telesrv.store.redis_client import RedisClient
from telesrv.store.send_groups import SendGroups
from telesrv.store.srp_sessions import SrpSessions
from telesrv.store.uploads import UploadArea, UploadQuota
from telesrv.workers import (
    MULTIPROC_ENV,
    WorkerGroup,
    prepare_metrics_dir,
    publish_gauges,
    worker_settings,
)

if TYPE_CHECKING:
    from telesrv.app import Resources
    from telesrv.config import Settings


def build_server(settings: Settings, resources: Resources) -> Server:
    """The whole process from its settings, each part built once, before what uses it."""
    db: Db = resources.db
    private_key = resources.server_key.private_key
    # One batcher for the hot Redis commands: a send's allocations and its push's holder
    # lookup, and those of concurrent sends, leave in the same round trips.
    redis_batch = CommandBatcher(resources.redis)
    counters = Counters(resources.redis, db, redis_batch)
    rate_limits = RateLimits(resources.redis)
    auth_keys = AuthKeyService(db)
    address = ServerAddress(settings.advertised_host, settings.advertised_port)
    # Writers signal the outbox through this; the delivery itself comes later, once
    # what renders and pushes (the services, the gateway) exists.
    committed = OutboxWakeup()
    wake = committed.wake

    accounts = build_account_services(
        db,
        access_secret=access_hash_secret_for(private_key),
        code_sender=code_sender_of(settings),
        login_policy=LoginPolicy(
            auto_register=settings.auto_register,
            max_sends=settings.login_code_limit,
            max_sends_per_ip=settings.login_code_ip_limit,
            send_window=settings.login_code_window,
        ),
        events=UpdateLogEvents(counters, on_commit=wake),
        on_commit=wake,
        counters=counters,
        rate_limits=rate_limits,
        lookup_limits=PhoneLookupLimits(
            per_minute=settings.phone_lookup_rate_limit,
            per_day=settings.phone_lookup_daily_limit,
        ),
        redis=resources.redis,
        profile_change_rate_limit=settings.profile_change_rate_limit,
        qr_policy=QrLoginPolicy(
            ttl=settings.login_token_ttl,
            per_key_per_minute=settings.login_token_rate_limit,
            global_per_minute=settings.login_token_global_rate_limit,
        ),
    )
    users_tl = UsersTl(accounts.projection)
    history = History(db)
    renderer = UpdateRenderer(
        history.boxes,
        users_tl,
        load_boxes_of_owners=history.boxes_of_owners,
        users_wire_many=users_tl.wire_many,
    )

    # The methods are registered once the services exist (below); the gateway only
    # needs the dispatcher that will look them up.
    registry = Registry()
    dispatcher = build_dispatcher(
        registry,
        auth_keys,
        UnknownMethods(db),
        password_waiting=None if accounts.passwords is None else accounts.passwords.is_waiting,
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
    cluster = Cluster(
        resources.redis,
        resources.redis_url,
        gateway,
        batch=redis_batch,
        timeout=settings.db_statement_timeout,
    )
    outbox = OutboxDelivery(
        db,
        renderer.push_bytes,
        gateway.push_to_user,
        workers=settings.outbox_workers,
        batch=settings.outbox_batch_size,
        interval=settings.outbox_poll_interval,
        lease=settings.outbox_lease_timeout,
        order_wait=settings.outbox_order_wait,
        online=gateway.has_sessions,
        render_batch=renderer.batch_bytes,
        locate=cluster.locate,
        render_known=renderer.known_bytes,
        wakeup=committed,
    )

    # Writes of pts events push them right after their commit, through the outbox.
    dialogs = DialogService(db, counters, on_commit=wake, delivery=outbox.held)
    notify_settings = NotifySettings(db, on_commit=wake)
    drafts = Drafts(db, on_commit=wake)
    # Texts, albums and forwarded copies all go through this one send pipeline.
    sends = SendPipeline(
        db,
        counters,
        rate_limits,
        send_rate_limit=settings.send_rate_limit,
        after=AfterSend(
            after_delivery=dialogs.unarchive_on_message,
            after_clear_draft_send=drafts.clear_draft_on_send,
            after_send=dialogs.close_bar_on_reply,
        ),
        on_commit=wake,
        held_pushes=outbox.held,
        # 1: every send written alone, as it comes (no queue behind the one in flight).
        groups=SendGroups(db, max_sends=settings.send_group_size)
        if settings.send_group_size > 1
        else None,
    )
    messages = MessageService(db, counters, sends)
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
    reactions = ReactionService(db, on_commit=wake)
    photo_access = ProfilePhotoAccess(db, accounts.projection)
    media_files = MediaFiles(
        db,
        uploads,
        blobs,
        rate_limits,
        media_rate_limit=settings.media_rate_limit,
        icons=reaction_icons,
        # Profile photos are downloaded by whoever may see them, not only by the
        # holders of a message.
        photo_access=photo_access.may_see_photo,
    )
    profile_photos = ProfilePhotos(
        db, media_files, photo_access, accounts.projection, on_commit=wake
    )
    privacy = accounts.privacy
    parts = Parts(
        account=account_parts(accounts, users_tl),
        address=address,
        auth_keys=auth_keys,
        counters=counters,
        committed=committed,
        history=history,
        renderer=renderer,
        sends=sends,
        messages=messages,
        push_ephemeral=cluster.push_anywhere,
        updates=UpdatesService(db, counters, in_flight=outbox.lowest_expected),
        read_receipts=ReadReceipts(
            db,
            counters,
            on_commit=wake,
            after_read=dialogs.clear_unread_mark,
            delivery=outbox.held,
        ),
        content_reads=ContentReads(db, counters, on_commit=wake, delivery=outbox.held),
        edits=Edits(db, counters, on_commit=wake, delivery=outbox.held),
        deletes=Deletes(db, counters, on_commit=wake, delivery=outbox.held),
        forwards=Forwards(db, sends),
        search=Search(db),
        dialogs=dialogs,
        notify_settings=notify_settings,
        drafts=drafts,
        dialog_filters=DialogFilterService(db, on_commit=wake),
        chat_view=ChatViews(dialogs, notify_settings),
        uploads=uploads,
        media_files=media_files,
        profile_photos=profile_photos,
        reactions=reactions,
        reaction_icons=reaction_icons,
        default_reaction=reactions.default_reaction,
        top_peers=TopPeers(db),
        account_ttl=AccountTtl(db),
        pins=Pins(
            db,
            counters,
            rate_limits,
            send_rate_limit=settings.send_rate_limit,
            on_commit=wake,
            delivery=outbox.held,
        ),
        people_search=PeopleSearch(db, rate_limits, per_minute=settings.people_search_rate_limit),
        privacy=privacy,
        profile_pushes=ProfilePushes(privacy.profile_audience, users_tl, cluster.locate),
    )
    register_all(registry, *build_handlers(parts.by_name()))

    # Read at scrape time; the server built last is the one measured.
    sample_gauge(CONNECTIONS, gateway.connection_count)
    sample_gauge(SESSIONS, gateway.session_count)
    watch_pool(db.pool)
    SharedInvalidations(
        cluster, gateway, auth_keys, accounts.authorizations, accounts.projection.cache
    ).subscribe()
    if accounts.qr_login is not None:
        LoginTokenPushes(cluster, gateway).subscribe(accounts.qr_login)
    return Server(
        gateway=gateway,
        outbox=outbox,
        counters=counters,
        rate_limits=rate_limits,
        cluster=cluster,
        resources=resources,
        on_ended_elsewhere=EndedElsewhere(accounts.authorizations, gateway),
        parts=parts,
        accounts=accounts,
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


def code_sender_for(dev_login_code: str | None) -> CodeSender:
    return FixedCodeSender(dev_login_code) if dev_login_code else RandomCodeSender()


def code_sender_of(settings: Settings) -> CodeSender:
    """How login codes reach people: the dev code (nothing is sent), or random codes
    handed to the operator's hooks."""
    if settings.dev_login_code:
        return FixedCodeSender(settings.dev_login_code)
    timeout = settings.login_code_hook_timeout
    hooks: list[DeliveryHook] = []
    if settings.login_code_command is not None:
        hooks.append(CommandHook(parse_command(settings.login_code_command), timeout))
    if settings.login_code_webhook is not None:
        hooks.append(WebhookHook(settings.login_code_webhook, timeout))
    limits = DeliveryLimits(
        retries=settings.login_code_hook_retries,
        concurrency=settings.login_code_hook_concurrency,
    )
    return RandomCodeSender(CodeDelivery(hooks, limits), log_codes=settings.log_login_codes)


def build_account_services(
    db: Db,
    *,
    access_secret: bytes,
    dev_login_code: str | None = None,
    code_sender: CodeSender | None = None,
    auto_register: bool = False,
    events: AccountEvents | None = None,
    login_policy: LoginPolicy | None = None,
    counters: Counters | None = None,
    rate_limits: RateLimits | None = None,
    lookup_limits: PhoneLookupLimits | None = None,
    redis: RedisClient | None = None,
    profile_change_rate_limit: int = 0,
    qr_policy: QrLoginPolicy | None = None,
    password_policy: PasswordPolicy | None = None,
    on_commit: Callable[[], None] = lambda: None,
) -> AccountServices:
    """The account services, each built once (``build_server`` builds them through this).

    ``events`` is where contact/block/profile changes reach the update log; without it
    they are stored but no event is written (NoAccountEvents)."""
    events = events or NoAccountEvents()
    access_hashes = AccessHashes(access_secret)
    authorizations = AuthorizationService(db)
    policy = login_policy or LoginPolicy(auto_register=auto_register)
    # One cache of projections for the services that change what it holds and the one
    # that reads it.
    projections = ProjectionCache()
    projection = UserProjection(db, access_hashes, projections)
    # The rules are read through the projection's facts; a hidden number is found by
    # phone only as they say.
    privacy = PrivacyService(db, projection.rows_many, projections.changed, on_commit=on_commit)
    # Both ways of signing in make keys wait for a password by its policy, and say so.
    passwords = (
        None
        if redis is None
        else Passwords(db, SrpSessions(redis), authorizations, password_policy)
    )
    return AccountServices(
        access_hashes=access_hashes,
        authorizations=authorizations,
        users=UserService(
            db,
            events,
            projections,
            counters=counters,
            rate_limits=rate_limits,
            change_per_minute=profile_change_rate_limit,
        ),
        projection=projection,
        login=LoginService(
            db,
            code_sender or code_sender_for(dev_login_code),
            authorizations,
            policy,
            passwords=passwords,
            counters=counters,
            rate_limits=rate_limits,
        ),
        contacts=ContactService(
            db,
            events,
            rate_limits=rate_limits,
            lookup_limits=lookup_limits,
            projections=projections,
            findable_by_phone=privacy.findable_by_phone,
        ),
        privacy=privacy,
        events=events,
        qr_login=None
        if redis is None
        else QrLoginService(db, LoginTokens(redis), authorizations, qr_policy, passwords=passwords),
        passwords=passwords,
    )


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
        announce(f"telesrv websocket listening on {format_host_port(*ws_bound)}")
    # With workers, /metrics adds their value files (Prometheus multiprocess mode) to
    # this process's own figures; a worker publishes its gauges into them meanwhile.
    metrics_dir = prepare_metrics_dir(settings.data_dir) if settings.workers > 1 else None
    if settings.metrics_host is not None and settings.metrics_port is not None:
        try:
            m_host, m_port = await server.start_metrics(
                settings.metrics_host, settings.metrics_port, workers_dir=metrics_dir
            )
        except BaseException:
            await server.stop()
            raise
        announce(f"telesrv metrics on http://{format_host_port(m_host, m_port)}/metrics")
    publisher = asyncio.create_task(publish_gauges()) if os.environ.get(MULTIPROC_ENV) else None
    group = WorkerGroup(metrics_dir)
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
        announce(f"telesrv listening on {host}:{port}")
        await group.wait_failed()
    finally:
        if publisher is not None:
            publisher.cancel()
        # Both stop accepting at once: the workers (SIGTERM, each drains what it
        # holds) and this process, before either waits for the other.
        stopped = asyncio.gather(group.stop(), server.stop(), return_exceptions=True)
        outcomes = await asyncio.shield(stopped)
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
        for failed in outcomes:
            if isinstance(failed, BaseException):
                raise failed
