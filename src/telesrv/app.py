"""Process wiring: settings -> embedded servers -> pools -> migrations -> key -> gateway.

This is the one place that builds the process's resources; tests build theirs with
the same functions (`open_resources`, `telesrv.store.redis_client.open_redis`,
`telesrv.store.db.open_db`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, cast

from telesrv import accel
from telesrv.config import Settings
from telesrv.logs import announce
from telesrv.server_key import ServerKey, ServerKeyError, load_or_create_server_key
from telesrv.services.code_delivery import warn_about_login_codes
from telesrv.startup import StartupError, database_failure, preflight, redis_failure
from telesrv.store import db as dbmod
from telesrv.store import migrate, warmup
from telesrv.store.embedded import EmbeddedPostgres, EmbeddedRedis, EmbeddedServerError
from telesrv.store.embedded_watch import EmbeddedWatch
from telesrv.store.redis_client import RedisClient, open_redis
from telesrv.workers import DataDirLock

log = logging.getLogger(__name__)

# Database the embedded PostgreSQL serves telesrv from (the server also has `postgres`).
EMBEDDED_DATABASE = "telesrv"

# The gateway's entry point: `async def run(settings, resources) -> None`. It prints
# the ready line once listening and serves until cancelled.
GATEWAY_MODULE = "telesrv.wiring"
GATEWAY_FUNCTION = "run"

# At most this long warming the pooled connections at startup (see store/warmup.py);
# a database slower than that starts serving with connections that are still cold.
WARM_UP_SECONDS = 5.0


@dataclass(frozen=True)
class Resources:
    settings: Settings
    db: dbmod.Db
    redis: RedisClient
    server_key: ServerKey
    # The partition count the schema was created with (wins over settings.partition_count).
    partition_count: int
    database_url: str
    redis_url: str
    # Watches the embedded servers this process started or attached to (None: none).
    watch: EmbeddedWatch | None = None


# Net new container objects between two collections of the youngest generation.
# CPython's 700 suits small scripts: an outbox batch or a burst of requests makes far
# more objects that live until the batch is done, so each of them was walked by
# several young and middle collections on its way out (a fifth of the process's CPU
# in an outbox drain). Ten thousand keeps a young collection to a few milliseconds.
GC_YOUNG_THRESHOLD = 10_000


def settle_heap() -> Callable[[], None]:
    """Take what the process holds after startup (modules, the generated TL classes,
    pools) out of the cyclic collector's sight, and collect the young generation less
    often. Otherwise every full collection walks all of the startup heap again: a
    pause of a hundred milliseconds or more in the middle of serving, which every
    request in flight waits out. Garbage from before is collected first, so nothing
    unreachable is kept for good. Returns what undoes it: a process that starts again
    (tests do, many times) would otherwise keep each start's heap frozen for good,
    cycles that die later included."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)

    def unsettle() -> None:
        gc.unfreeze()
        gc.set_threshold(young, middle, old)

    return unsettle


async def _check_connection_room(db: dbmod.Db, settings: Settings) -> None:
    """Warn when the pools of every process of this group cannot all be open at once:
    each opens its whole pool at startup, so the last to start would run short of
    connections."""
    room = await dbmod.connection_room(db.pool)
    wanted = settings.workers * settings.pg_pool_max_size
    if room is not None and wanted > room:
        log.warning(
            "%d processes x %d pooled connections need %d PostgreSQL connections; "
            "max_connections leaves %d: raise it or lower --pg-pool-max-size",
            settings.workers,
            settings.pg_pool_max_size,
            wanted,
            room,
        )


@contextlib.asynccontextmanager
async def open_resources(settings: Settings, *, warm: bool = True) -> AsyncIterator[Resources]:
    """Start what `settings` asks for, yield it, and stop it all again on exit.

    ``warm``: open the whole pool and warm it before yielding (a process about to serve
    requests); a one-off command leaves it at its floor."""
    async with AsyncExitStack() as stack:
        postgres: EmbeddedPostgres | None = None
        embedded_redis: EmbeddedRedis | None = None
        database_url = settings.database_url
        if database_url is None:
            postgres = EmbeddedPostgres(settings.embedded_postgres_dir)
            try:
                server_url = await asyncio.to_thread(postgres.start)
            except (EmbeddedServerError, OSError) as exc:
                raise StartupError(f"embedded PostgreSQL: {exc}") from exc
            stack.push_async_callback(asyncio.to_thread, postgres.stop)
            database_url = await dbmod.create_database(server_url, EMBEDDED_DATABASE, exist_ok=True)

        redis_url = settings.redis_url
        if redis_url is None:
            embedded_redis = EmbeddedRedis(settings.embedded_redis_dir)
            try:
                redis_url = await asyncio.to_thread(embedded_redis.start)
            except (EmbeddedServerError, OSError) as exc:
                raise StartupError(f"embedded Redis: {exc}") from exc
            stack.push_async_callback(asyncio.to_thread, embedded_redis.stop)

        # Before the migrations: a Redis that refuses us fails the start at once.
        try:
            redis_client = await open_redis(redis_url, timeout=settings.db_statement_timeout)
        except Exception as exc:
            raise redis_failure(exc, redis_url) from exc
        stack.push_async_callback(redis_client.aclose)

        # Migrations may run long (index builds): on their own connection, no timeouts.
        try:
            migration_pool = await dbmod.create_pool(database_url, min_size=1, max_size=1)
        except Exception as exc:
            raise database_failure(exc, database_url) from exc
        try:
            migration = await migrate.migrate_pool(
                migration_pool, partition_count=settings.partition_count
            )
        except Exception as exc:
            raise database_failure(exc, database_url) from exc
        finally:
            await migration_pool.close()
        db = await dbmod.open_db(
            database_url,
            min_size=settings.pg_pool_min_size,
            max_size=settings.pg_pool_max_size,
            statement_timeout=settings.db_statement_timeout,
            acquire_timeout=settings.db_acquire_timeout,
            # An outbox worker keeps its claim's transaction open while it pushes: a
            # worker stuck that long loses its claim, and the rows are due again. Never
            # shorter than a healthy transaction may wait between two statements (a
            # Redis call or another pooled connection, each bounded by these timeouts).
            idle_transaction_timeout=max(
                settings.outbox_lease_timeout,
                settings.db_statement_timeout + settings.db_acquire_timeout,
            ),
        )
        stack.push_async_callback(db.close)
        # Before any request: a new connection's first sends would otherwise pay for
        # loading the schema and planning the send while requests queue up.
        if warm:
            await db.warm(
                warmup.warm_connection,
                timeout=min(WARM_UP_SECONDS, settings.db_statement_timeout),
            )
            await _check_connection_room(db, settings)

        # RSA key generation takes a noticeable moment; keep the loop free meanwhile.
        try:
            server_key = await asyncio.to_thread(load_or_create_server_key, settings.data_dir)
        except ServerKeyError as exc:
            raise StartupError(str(exc)) from exc
        except OSError as exc:
            raise StartupError(f"server key in {settings.data_dir}: {exc}") from exc

        watch: EmbeddedWatch | None = None
        if postgres is not None or embedded_redis is not None:
            watch = EmbeddedWatch(postgres, embedded_redis)
            watching = asyncio.get_running_loop().create_task(watch.run())
            # Stopped first: the servers stopping on the way out are no outage.
            stack.push_async_callback(_cancelled, watching)

        stack.callback(settle_heap())
        yield Resources(
            settings=settings,
            db=db,
            redis=redis_client,
            server_key=server_key,
            partition_count=migration.partition_count,
            database_url=database_url,
            redis_url=redis_url,
            watch=watch,
        )


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class GatewayUnavailable(NotImplementedError):
    pass


def _gateway_entry_point() -> Callable[[Settings, Resources], Awaitable[None]]:
    try:
        module = importlib.import_module(GATEWAY_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != GATEWAY_MODULE:
            raise
        raise GatewayUnavailable(
            f"the gateway ({GATEWAY_MODULE}.{GATEWAY_FUNCTION}) is not part of this build yet"
        ) from None
    entry = getattr(module, GATEWAY_FUNCTION, None)
    if entry is None:
        raise GatewayUnavailable(f"{GATEWAY_MODULE} has no {GATEWAY_FUNCTION}()")
    return cast(Callable[[Settings, Resources], Awaitable[None]], entry)


async def start_gateway(settings: Settings, resources: Resources) -> None:
    """Serve clients until cancelled."""
    run = _gateway_entry_point()
    await run(settings, resources)


def print_key_banner(server_key: ServerKey) -> None:
    announce(
        f"telesrv server key fingerprint {server_key.fingerprint_hex} "
        f"(public key: {server_key.public_key_path})"
    )


def print_embedded_urls(settings: Settings, resources: Resources) -> None:
    """More processes (here or elsewhere) join this server with these URLs and the same
    data directory."""
    if settings.database_url is None:
        announce(f"telesrv embedded postgresql {resources.database_url}")
    if settings.redis_url is None:
        announce(f"telesrv embedded redis {resources.redis_url}")


async def serve(settings: Settings) -> None:
    """Run the server until SIGINT/SIGTERM, then stop everything cleanly."""
    # Fail before starting databases when there is nothing to serve with, or when a
    # URL, the data directory or a listen port would only fail after initdb and the
    # migrations.
    preflight(settings)
    _gateway_entry_point()
    # One server per data directory: a second one would share its keys and embedded
    # databases without knowing (and stop them under the first on its way out).
    lock = DataDirLock(settings.data_dir)
    if settings.join:
        lock.join()
    else:
        lock.acquire()
    warn_about_login_codes(settings)
    loop = asyncio.get_running_loop()
    current = asyncio.current_task()
    assert current is not None
    stop_signals = (signal.SIGINT, signal.SIGTERM)
    stopping = False
    fatal: str | None = None

    def request_stop(signum: int) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            log.info("received %s; shutting down", signal.Signals(signum).name)
            current.cancel()

    def cannot_go_on(reason: str) -> None:
        nonlocal stopping, fatal
        if not stopping:
            stopping = True
            fatal = reason
            current.cancel()

    for signum in stop_signals:
        loop.add_signal_handler(signum, request_stop, signum)
    # Which TL/MTProto path this process runs (compiled or pure Python), and why.
    log.info("%s", accel.status().describe())
    try:
        async with open_resources(settings) as resources:
            if resources.watch is not None:

                def from_the_watch(reason: str) -> None:
                    # The watch looks from a thread; the stop is made on the loop.
                    loop.call_soon_threadsafe(cannot_go_on, reason)

                resources.watch.on_fatal = from_the_watch
            print_key_banner(resources.server_key)
            print_embedded_urls(settings, resources)
            await start_gateway(settings, resources)
    except asyncio.CancelledError:
        if not stopping:
            raise
        # Our own shutdown request; open_resources has already stopped everything.
    finally:
        for signum in stop_signals:
            loop.remove_signal_handler(signum)
        lock.release()
    if fatal is not None:
        # The watch logged why; the exit status tells a supervisor to start it again.
        log.info("telesrv stopped")
        raise SystemExit(1)
    log.info("telesrv stopped")


def run_async(main: Callable[[], Awaitable[Any]]) -> Any:
    """Run `main()` on a fresh event loop, uvloop's when installed."""
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    if sys.platform != "win32":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            loop_factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(cast(Any, main()))


def run(settings: Settings) -> None:
    run_async(lambda: serve(settings))
