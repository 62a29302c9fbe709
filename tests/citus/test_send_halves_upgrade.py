"""A cluster placed before 0034 (the send's halves) gets them delegated on the start
that applies 0034: the functions reach the workers and are distributed by their user."""

from __future__ import annotations

import asyncpg

from telesrv.store import citus, migrate, send_halves

from .test_send_halves import params, users_on_two_workers


async def test_a_placed_cluster_gets_the_halves_delegated(citus_url: str) -> None:
    conn = await asyncpg.connect(citus_url)
    try:
        before = [m for m in migrate.load_migrations() if m.version < 34]
        await migrate.migrate(conn, partition_count=16, migrations=before)
        assert await citus.tables_placed(conn)
        await migrate.migrate(conn, partition_count=16)
        rows = await conn.fetch(
            "SELECT p.proname::text AS name, d.distribution_argument_index AS arg,"
            " d.force_delegation AS forced"
            " FROM pg_proc p JOIN pg_dist_object d"
            "  ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid"
            " WHERE p.proname = ANY($1::text[])",
            list(citus.DELEGATED),
        )
        assert {r["name"]: (r["arg"], r["forced"]) for r in rows} == {
            name: (0, True) for name in citus.DELEGATED
        }
        a, b = await users_on_two_workers(conn, 8_500_001)
        for sender, recipient in ((a, b), (b, a)):
            async with conn.transaction():
                sent = await send_halves.send_private_message_halves_txn(
                    conn, params(sender, recipient, 1, (1 + (sender == b), 1 + (sender == b)))
                )
            assert not sent.duplicate and sent.recipient_box is not None
    finally:
        await conn.close()
