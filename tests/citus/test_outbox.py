"""The outbox's statements on Citus (store/outbox.py, ``distributed=True``): two batches
that claimed rows of users on the same shards delete their rows while the other's
transaction is still open (Citus would otherwise lock each shard against every other
multi-shard delete until commit), and each deletes exactly its own rows."""

from __future__ import annotations

import asyncio

import asyncpg

from telesrv.store import citus
from telesrv.store import outbox as outbox_store

from .test_send_halves import migrated

__all__ = ["migrated"]

GUARD = 30.0  # only against a hang: a delete that waits for the other batch's commit


async def due_rows(conn: asyncpg.Connection, users: list[int]) -> None:
    for user in users:
        for pts in (1, 2):
            await conn.execute(
                "INSERT INTO dispatch_outbox (target_user_id, pts, available_at)"
                " VALUES ($1, $2, now() - interval '1 minute')",
                user,
                pts,
            )


async def test_two_batches_delete_their_rows_without_waiting_for_each_other(
    migrated: str,
) -> None:
    first, second, watcher = [await asyncpg.connect(migrated) for _ in range(3)]
    users = list(range(8_900_001, 8_900_041))  # 40 users: every worker, most shards
    try:
        await due_rows(watcher, users)
        one = first.transaction()
        two = second.transaction()
        await one.start()
        await two.start()
        mine = await outbox_store.claim_batch_txn(first, 40, distributed=True)
        theirs = await outbox_store.claim_batch_txn(second, 40, distributed=True)
        assert len(mine) == len(theirs) == 40
        assert not {r.id for r in mine} & {r.id for r in theirs}
        assert await outbox_store.delete_claimed_txn(first, mine, distributed=True) == 40
        # The first batch has not committed: the second's delete must not wait for it.
        async with asyncio.timeout(GUARD):
            deleted = await outbox_store.delete_claimed_txn(second, theirs, distributed=True)
        assert deleted == 40
        await one.commit()
        await two.commit()
        left = await watcher.fetchval(
            "SELECT count(*) FROM dispatch_outbox WHERE target_user_id = ANY($1::bigint[])",
            users,
        )
        assert left == 0
    finally:
        for conn in (first, second, watcher):
            await conn.close()


async def test_a_batch_reads_its_events_by_probes_on_every_shard(migrated: str) -> None:
    """On a small log a shard's planner would hash its whole log for the batch's keys;
    in an outbox batch's transaction the join probes the log's key instead, on the
    workers too."""
    conn = await asyncpg.connect(migrated)
    users = range(8_900_101, 8_900_201)
    await conn.execute(
        "INSERT INTO user_update_events (user_id, pts, pts_count, event_type, date)"
        " SELECT u, p, 1, 'noop', 1 FROM unnest($1::bigint[]) u, generate_series(1, 100) p",
        list(users),
    )
    await conn.execute("ANALYZE user_update_events")
    keys = ([u for u in users for _ in (1, 2)], [p for _ in users for p in (7, 8)])
    explain = (
        "EXPLAIN SELECT e.pts FROM unnest($1::bigint[], $2::integer[]) AS k(user_id, pts)"
        " JOIN user_update_events e ON e.user_id = k.user_id AND e.pts = k.pts"
    )
    try:
        await conn.execute("SET citus.explain_all_tasks = on")
        async with conn.transaction():
            unset = "\n".join(r[0] for r in await conn.fetch(explain, *keys))
        async with conn.transaction():
            await citus.probe_joins_txn(conn)
            probed = "\n".join(r[0] for r in await conn.fetch(explain, *keys))
    finally:
        await conn.close()
    assert "Hash Join" in unset, unset  # what the fix is for: it can fail
    assert "Hash Join" not in probed and "Merge Join" not in probed, probed
    assert probed.count("Index") >= probed.count("->  Task"), probed
