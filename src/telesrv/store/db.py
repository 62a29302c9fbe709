"""asyncpg pool and named transactions.

Every store write goes through `Db.run_txn(name, fn, *args)`: `fn(conn, *args)` runs in
one transaction, is retried on serialization failures and deadlocks (so it must be safe
to run again: no side effects outside the connection), and its duration is logged and
recorded per name. Reads that must agree with each other (several statements over one
state) go through `Db.run_read_txn`: one read-only snapshot.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import random
import re
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Literal, TypeVar

import asyncpg
import redis.exceptions
from prometheus_client import Counter, Histogram

from telesrv.store.refusals import BY_NAME as REFUSALS_BY_NAME

log = logging.getLogger(__name__)


# Seconds during which asyncpg's pool repeats a warning unseen (see _QuietRepeats).
POOL_WARNING_QUIET = 60.0


class _QuietRepeats(logging.Filter):
    """asyncpg's pool warns with a full traceback each time it fails to reopen its
    floor of connections, with a backoff from one second: a database away for a
    while filled the log with tracebacks. Here the warning is one line carrying the
    error, and the same line again is dropped for POOL_WARNING_QUIET seconds."""

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        text = record.getMessage()
        now = time.monotonic()
        if now - self._last.get(text, -POOL_WARNING_QUIET) < POOL_WARNING_QUIET:
            return False
        if len(self._last) >= 64:  # bounded: texts may differ (an address, a pid)
            self._last.clear()
        self._last[text] = now
        if record.exc_info and record.exc_info[1] is not None:
            record.msg, record.args = f"{text} ({record.exc_info[1]!r})", ()
            record.exc_info = record.exc_text = None
        return True


logging.getLogger("asyncpg.pool").addFilter(_QuietRepeats())

T = TypeVar("T")

# What a single-statement store function accepts: a pool (which borrows a connection for
# the statement) or a connection, possibly inside a run_txn transaction.
Executor = asyncpg.Connection | asyncpg.Pool

IsolationLevel = Literal["read_committed", "repeatable_read", "serializable"]

TXN_SECONDS = Histogram(
    "telesrv_db_txn_seconds",
    "Duration of named database transactions, including retries.",
    ["name"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
TXN_RETRIES = Counter(
    "telesrv_db_txn_retries_total",
    "Named transactions retried after a serialization failure or deadlock.",
    ["name", "sqlstate"],
)
TXN_FAILURES = Counter(
    "telesrv_db_txn_failures_total",
    "Named transactions that raised (after any retries).",
    ["name"],
)
WARMED_CONNECTIONS = Counter(
    "telesrv_db_warmed_connections_total",
    "Pooled connections warmed before the process took requests (Db.warm).",
)

# TXN_SECONDS children by transaction name (a fixed set), not looked up per call.
_txn_seconds = functools.cache(TXN_SECONDS.labels)

# 40001 serialization_failure, 40P01 deadlock_detected: the transaction did nothing
# durable, and running it again can succeed.
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.exceptions.SerializationError,
    asyncpg.exceptions.DeadlockDetectedError,
)

DEFAULT_MAX_ATTEMPTS = 5
_BACKOFF_BASE = 0.005
_BACKOFF_CAP = 0.2

# Database names we create ourselves (tests, the embedded server): keep them identifiers.
_DATABASE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

# Short OLTP statements never profit from JIT compilation; it only adds latency spikes.
# A pooled connection may stay idle for long (connections are kept, below): over TCP
# the server then probes it every minute, which keeps the entries of NAT gateways and
# firewalls that forget quiet flows alive, and ends the session of a client that
# vanished. Unix sockets (the embedded server) ignore these.
DEFAULT_SERVER_SETTINGS = {
    "application_name": "telesrv",
    "jit": "off",
    "tcp_keepalives_idle": "60",
    "tcp_keepalives_interval": "10",
    "tcp_keepalives_count": "6",
}


# Callbacks to run once the run_txn transaction of this task commits (None: no such
# transaction is running).
_AFTER_COMMIT: ContextVar[list[Callable[[], None]] | None] = ContextVar(
    "telesrv_after_commit", default=None
)


def after_commit(callback: Callable[[], None]) -> None:
    """Call ``callback`` once the run_txn transaction in progress commits (not at all if
    it rolls back), or at once outside one. Waking the outbox workers from inside the
    transaction would have them claim before the rows are visible."""
    pending = _AFTER_COMMIT.get()
    if pending is None:
        callback()
    else:
        pending.append(callback)


class Db:
    """The connection pool plus the named-transaction runner."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        distributed: bool = False,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.pool = pool
        self.max_attempts = max_attempts
        # The database is Citus (its tables distributed by user): some reads take the
        # shape Citus can plan, one user's rows per statement or subquery.
        self.distributed = distributed

    async def run_txn(
        self,
        name: str,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        isolation: IsolationLevel = "read_committed",
        readonly: bool = False,
        single_statement: bool = False,
    ) -> T:
        """Run `fn(conn, *args)` in a transaction named `name` and return its result.

        ``readonly``: the transaction may not write (PostgreSQL refuses any write).
        ``single_statement``: `fn` runs exactly one statement (e.g. a server-side
        function), which PostgreSQL already runs atomically; skipping BEGIN/COMMIT
        saves two round trips on hot paths.
        """
        started = time.perf_counter()
        attempt = 1
        pending: list[Callable[[], None]] = []
        token = _AFTER_COMMIT.set(pending)
        try:
            while True:
                pending.clear()  # a retried attempt's callbacks are queued again
                try:
                    async with self.pool.acquire() as conn:
                        if single_statement:
                            result = await fn(conn, *args)
                        else:
                            async with conn.transaction(isolation=isolation, readonly=readonly):
                                result = await fn(conn, *args)
                    break
                except RETRYABLE_ERRORS as exc:
                    sqlstate = getattr(exc, "sqlstate", "?")
                    if attempt >= self.max_attempts:
                        log.warning(
                            "txn %s failed with %s after %d attempts", name, sqlstate, attempt
                        )
                        raise
                    TXN_RETRIES.labels(name, sqlstate).inc()
                    delay = random.uniform(0, min(_BACKOFF_CAP, _BACKOFF_BASE * 2**attempt))
                    log.info(
                        "txn %s: %s on attempt %d, retrying in %.1f ms",
                        name,
                        sqlstate,
                        attempt,
                        delay * 1000,
                    )
                    attempt += 1
                    await asyncio.sleep(delay)
        except Exception:
            TXN_FAILURES.labels(name).inc()
            raise
        finally:
            _AFTER_COMMIT.reset(token)
            elapsed = time.perf_counter() - started
            _txn_seconds(name).observe(elapsed)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("txn %s took %.2f ms (%d attempts)", name, elapsed * 1000, attempt)
        for callback in pending:
            callback()
        return result

    async def run_read_txn(self, name: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run `fn(conn, *args)` in a read-only REPEATABLE READ transaction named `name`:
        every statement of `fn` sees the same snapshot, taken at its first statement, so
        reads of several tables (or of one table twice) cannot straddle a commit."""
        return await self.run_txn(name, fn, *args, isolation="repeatable_read", readonly=True)

    async def warm(
        self, warm_connection: Callable[[asyncpg.Connection], Awaitable[None]], *, timeout: float
    ) -> int:
        """Open the pool up to its ``max_size`` and run ``warm_connection`` once on each
        connection not in use, all at once; return on how many it finished. Meant for
        before the process takes requests: the connections a load would open at its
        start are then open and warm before it. Within ``timeout`` seconds in all: a
        database too slow for it, or a warm-up that fails, is logged and leaves those
        connections as they were (cold, and still pooled, or closed if they were still
        connecting); startup goes on either way. Not on Citus: the warm-up walks
        telesrv's own partitions, which a Citus database does not have."""
        if self.distributed:
            log.info("no connection warm-up on Citus")
            return 0
        warmed = 0
        in_use = self.pool.get_size() - self.pool.get_idle_size()
        count = self.pool.get_max_size() - in_use

        async def warm_one() -> None:
            nonlocal warmed
            async with self.pool.acquire() as conn:
                await warm_connection(conn)
            warmed += 1
            WARMED_CONNECTIONS.inc()

        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                results = await asyncio.gather(
                    *(warm_one() for _ in range(count)), return_exceptions=True
                )
        except TimeoutError:
            log.warning(
                "warmed %d of %d pooled connections; gave up after %.1f s",
                warmed,
                count,
                timeout,
            )
            return warmed
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            log.warning(
                "warmed %d of %d pooled connections; a warm-up failed: %r",
                warmed,
                count,
                failures[0],
            )
        else:
            log.info(
                "warmed %d pooled connections in %.0f ms",
                warmed,
                (time.perf_counter() - started) * 1000,
            )
        return warmed

    async def close(self) -> None:
        await self.pool.close()


async def _init_connection(conn: asyncpg.Connection) -> None:
    # jsonb columns (event payloads) travel as Python values, not JSON text.
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


# Raised when PostgreSQL or Redis does not answer in time or at all (a statement past
# its timeout, no pooled connection free in time, the server cancelling a statement
# past statement_timeout, Redis down): the request failed, nothing is known to be
# wrong with it.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    TimeoutError,
    asyncpg.exceptions.QueryCanceledError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)


def sql_refusal(e: asyncpg.RaiseError) -> Exception:
    """What to raise for an exception a SQL function raised: a function refuses a write
    by raising the refusal's catalogue name as its message (``RAISE EXCEPTION
    'MESSAGE_ID_INVALID'``), which becomes that domain error; any other message means
    the function found something it never expects, and stays as it is (INTERNAL)."""
    refusal = REFUSALS_BY_NAME.get(str(e))
    return e if refusal is None else refusal()


def refusal_named(message: str) -> Exception:
    """What to raise for a refusal a SQL function answered as a row instead of raising
    it (its message, as ``sql_refusal`` reads one raised)."""
    refusal = REFUSALS_BY_NAME.get(message)
    return RuntimeError(f"unexpected refusal from SQL: {message}") if refusal is None else refusal()


def _release_settled(task: asyncio.Future[Any]) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        # asyncpg has terminated the connection already; the pool opens a new one.
        log.debug("a pooled connection was dropped on release: %r", error)


def _read_when_done(holder: object) -> None:
    """Have the outcome of the release asyncpg runs on for ``holder`` read when it
    ends: its task is found among the running ones by the holder its coroutine
    belongs to (only on this rare path, so a release costs nothing more)."""
    if holder is None:
        return
    for task in asyncio.all_tasks():
        frame = getattr(task.get_coro(), "cr_frame", None)
        if frame is not None and frame.f_locals.get("self") is holder:
            task.add_done_callback(_release_settled)


class SettledPool(asyncpg.Pool):  # type: ignore[misc]  # asyncpg ships no types
    """A pool whose release always has its outcome looked at.

    asyncpg runs a release in a shielded task so that a cancelled caller still gives
    the connection back; when the caller is gone and that task then fails (a
    database frozen mid-statement: the wait for the statement's cancellation times
    out, and the connection is terminated), nobody reads its exception and asyncio
    logs "Task exception was never retrieved" with a traceback. Here a caller
    cancelled during a release has that task's outcome read when it ends. (A pool
    without an acquire timeout, the migrations', waits for the server without bound
    instead.)"""

    async def release(self, connection: Any, *, timeout: float | None = None) -> None:
        holder = getattr(connection, "_holder", None)
        try:
            await super().release(connection, timeout=timeout)
        except asyncio.CancelledError:
            _read_when_done(holder)
            raise


class TimedPool(SettledPool):
    """A pool whose every acquire (including the implicit one of ``pool.fetch*``) gives
    up after ``acquire_timeout`` seconds, and whose release waits as long at most
    before dropping a connection stuck in a cancelled statement."""

    def __init__(self, *args: Any, acquire_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.acquire_timeout = acquire_timeout

    def acquire(self, *, timeout: float | None = None) -> Any:
        return super().acquire(timeout=self.acquire_timeout if timeout is None else timeout)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool release hook in place of asyncpg's default reset query (``RESET ALL;
    UNLISTEN *; CLOSE ALL; pg_advisory_unlock_all()``, one more round trip per
    release). Our code changes no session state: no SET, LISTEN, cursors kept past a
    transaction or advisory locks. asyncpg still rolls back an open transaction first."""


async def connection_room(pool: asyncpg.Pool) -> int | None:
    """How many connections our role may open: max_connections less the slots kept for
    superusers and for members of pg_use_reserved_connections, unless we are one (the
    embedded server's role is a superuser); None when it cannot be read."""
    try:
        room = await pool.fetchval(
            """
            SELECT current_setting('max_connections')::integer
                   - CASE WHEN current_setting('is_superuser')::boolean THEN 0
                     ELSE current_setting('superuser_reserved_connections')::integer
                          + CASE WHEN EXISTS (SELECT 1 FROM pg_roles
                                               WHERE rolname = 'pg_use_reserved_connections'
                                                 AND pg_has_role(oid, 'MEMBER'))
                                 THEN 0
                                 ELSE COALESCE(
                                     current_setting('reserved_connections', true)::integer, 0)
                            END
                     END
            """
        )
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError):
        return None  # only a warning depends on it
    return None if room is None else int(room)


# Pooled connections are kept for as long as they work. A new backend's first sends
# cost it 40 to 150 ms of CPU (catalog entries of every partition, the send function
# compiled and its statements planned, each statement prepared again), and a pool
# that replaced connections after a number of queries or idle minutes (asyncpg's
# defaults, 50,000 and 5) had a fresh, cold one every few minutes under load and all
# of them after a quiet spell. What a backend keeps is bounded without that: catalog
# caches by the schema, prepared statements by the client's statement cache.
POOL_MAX_QUERIES = math.inf
POOL_IDLE_LIFETIME = 0.0  # never closed for idleness


async def create_pool(
    dsn: str,
    *,
    min_size: int,
    max_size: int,
    server_settings: dict[str, str] | None = None,
    statement_timeout: float | None = None,
    acquire_timeout: float | None = None,
    idle_transaction_timeout: float | None = None,
) -> asyncpg.Pool:
    """A pool; with ``statement_timeout`` the server cancels longer statements and the
    client stops waiting for a server that does not answer (1 s later); with
    ``acquire_timeout`` waiting for a connection is bounded too; with
    ``idle_transaction_timeout`` the server ends a session whose transaction waits that
    long for its client (a process stuck or cut off), releasing its locks and rolling
    its writes back. Migrations need none."""
    settings = dict(DEFAULT_SERVER_SETTINGS)
    if statement_timeout is not None:
        settings["statement_timeout"] = str(max(1, round(statement_timeout * 1000)))
    if idle_transaction_timeout is not None:
        settings["idle_in_transaction_session_timeout"] = str(
            max(1, round(idle_transaction_timeout * 1000))
        )
    if server_settings:
        settings.update(server_settings)
    options: dict[str, Any] = dict(
        min_size=min_size,
        max_size=max_size,
        max_queries=POOL_MAX_QUERIES,
        max_inactive_connection_lifetime=POOL_IDLE_LIFETIME,
        server_settings=settings,
        init=_init_connection,
        loop=None,
        connection_class=asyncpg.Connection,
        record_class=asyncpg.Record,
        reset=_keep_session,
    )
    if statement_timeout is not None:
        # The server's own timeout answers first with a clean error; the client's is
        # for a server that cannot answer at all (stopped, partitioned).
        options["command_timeout"] = statement_timeout + 1.0
    if acquire_timeout is None:
        pool = await asyncpg.Pool(dsn, **options)
    else:
        pool = await TimedPool(dsn, acquire_timeout=acquire_timeout, **options)
    return pool


async def open_db(
    dsn: str,
    *,
    min_size: int,
    max_size: int,
    statement_timeout: float | None = None,
    acquire_timeout: float | None = None,
    idle_transaction_timeout: float | None = None,
) -> Db:
    pool = await create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        statement_timeout=statement_timeout,
        acquire_timeout=acquire_timeout,
        idle_transaction_timeout=idle_transaction_timeout,
    )
    distributed = bool(
        await pool.fetchval("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
    )
    return Db(pool, distributed=distributed)


def database_url(server_url: str, database: str) -> str:
    """`server_url` with its database replaced by `database` (query string kept)."""
    scheme, sep, rest = server_url.partition("://")
    if not sep:
        raise ValueError(f"not a database URL: {server_url!r}")
    rest, qsep, query = rest.partition("?")
    authority, _slash, _old_database = rest.partition("/")
    return f"{scheme}://{authority}/{database}{qsep}{query}"


def _check_database_name(name: str) -> str:
    if not _DATABASE_NAME.match(name):
        raise ValueError(f"refusing database name {name!r}: use [a-z0-9_], starting with a letter")
    return name


async def create_database(
    server_url: str, name: str, *, template: str | None = None, exist_ok: bool = False
) -> str:
    """Create database `name` on the server of `server_url` and return its URL."""
    _check_database_name(name)
    conn = await asyncpg.connect(server_url)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if exists and not exist_ok:
            raise ValueError(f"database {name!r} already exists")
        if not exists:
            # Identifiers cannot be bound as parameters; the name was validated above.
            statement = f'CREATE DATABASE "{name}"'
            if template is not None:
                statement += f' TEMPLATE "{_check_database_name(template)}"'
            try:
                await conn.execute(statement)
            except asyncpg.exceptions.DuplicateDatabaseError:
                if not exist_ok:
                    raise
    finally:
        await conn.close()
    return database_url(server_url, name)


async def drop_database(server_url: str, name: str) -> None:
    _check_database_name(name)
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()
