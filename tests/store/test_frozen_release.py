"""A connection given back while PostgreSQL is frozen, by a caller cancelled twice (its
statement, then its wait for the release): the release fails in the background (the
statement's cancellation cannot reach the server), and that failure is read, not
left for asyncio to report as "Task exception was never retrieved"."""

from __future__ import annotations

import asyncio
import gc
import logging

import asyncpg
import pytest
from frozen_postgres import frozen, postmaster_of

from telesrv.store import db as dbmod

GUARD = 60.0  # only against a hang


async def until(condition: object, what: str) -> None:
    async with asyncio.timeout(GUARD):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)


async def test_a_release_that_fails_while_frozen_is_read(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    postmaster = await postmaster_of(database_url)
    caplog.set_level(logging.DEBUG)
    pool = await dbmod.create_pool(
        database_url,
        min_size=1,
        max_size=1,
        acquire_timeout=0.2,  # bounds the release's wait too
    )
    held: list[asyncpg.Connection] = []
    started = asyncio.Event()

    async def query() -> None:
        async with pool.acquire() as conn:
            held.append(conn._con)  # the pooled connection behind the proxy
            started.set()
            await conn.fetchval("SELECT 1")

    try:
        with frozen(postmaster):
            task = asyncio.create_task(query())
            await started.wait()
            for _ in range(3):
                await asyncio.sleep(0)  # the statement is sent and waits for the server
            task.cancel()  # the statement
            for _ in range(3):
                await asyncio.sleep(0)  # on its way back to the pool
            task.cancel()  # the caller stops waiting for the release too
            with pytest.raises(asyncio.CancelledError):
                await task
            # The release gives up on the frozen server and drops the connection.
            await until(lambda: held[0].is_closed(), "the connection dropped")
            await asyncio.sleep(0)
        gc.collect()
        await asyncio.sleep(0)
        assert "never retrieved" not in caplog.text
        # The pool recovers with a new connection once the server answers again.
        assert await pool.fetchval("SELECT 2") == 2
    finally:
        await pool.close()


def test_the_pools_repeated_warning_is_one_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # asyncpg's pool warns like this each time it fails to reopen its connections.
    caplog.set_level(logging.WARNING, logger="asyncpg.pool")
    pool_log = logging.getLogger("asyncpg.pool")
    text = f"Failed to restore the pool connection floor; retrying {id(caplog)}"
    for _ in range(3):
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError:
            pool_log.warning(text, exc_info=True)
    [record] = [r for r in caplog.records if r.name == "asyncpg.pool"]
    assert record.exc_info is None and "Traceback" not in caplog.text
    assert record.getMessage() == f"{text} (ConnectionRefusedError(111, 'Connection refused'))"
