"""Functions whose statements keep one plan per connection (``plan_cache_mode =
force_generic_plan``): the group send and the users' projection. A kept plan is made
once, with whatever statistics the tables had then (a fresh database is warmed at
startup), so what it reads must not depend on them: their tables are read by index
probes at any size."""

from __future__ import annotations

import json
from typing import Any

from generic_plans import generic_plans, plan_nodes

from telesrv.store import users as users_store
from telesrv.store.db import Db

_SEND_GROUP = (
    "telesrv_send_group(bigint[], bigint[], bigint[], integer[], text[], bytea[], bytea[],"
    " boolean[], boolean[], boolean[], integer[], text[], bytea[], integer[], integer[],"
    " integer[], integer[], integer[], bigint[], bigint[], jsonb[], bigint[], text[],"
    " bigint[], double precision[])"
)
_PROJECTION = "telesrv_project_user_pairs(bigint[], bigint[], text[])"
# What reads a whole table, or hashes or sorts one to join it.
_WHOLE_TABLE = {"Seq Scan", "Hash Join", "Merge Join", "Bitmap Heap Scan"}


async def _settings(db: Db, signature: str) -> list[str]:
    config: list[str] = await db.pool.fetchval(
        "SELECT proconfig FROM pg_proc WHERE oid = $1::regprocedure", signature
    )
    return config


async def _projection_plan(db: Db) -> list[dict[str, Any]]:
    """The plan nodes of the projection's statement as its function keeps it: planned
    for any arrays, with the function's own settings."""
    source: str = await db.pool.fetchval(
        "SELECT prosrc FROM pg_proc WHERE oid = $1::regprocedure", _PROJECTION
    )
    statement = source[source.index("RETURN QUERY") + len("RETURN QUERY") : source.rindex(";")]
    statement = (
        statement.replace("p_viewer_ids", "$1::bigint[]")
        .replace("p_target_ids", "$2::bigint[]")
        .replace("p_keys", "$3::text[]")
    )
    async with db.pool.acquire() as conn, conn.transaction():
        for setting in await _settings(db, _PROJECTION):
            name, _, value = setting.partition("=")
            await conn.execute("SELECT set_config($1, $2, true)", name, value)
        [text] = await generic_plans(conn, [statement], "JSON")
    return plan_nodes(json.loads(text)[0]["Plan"])


async def test_the_functions_keep_their_plans(db: Db) -> None:
    assert await _settings(db, _SEND_GROUP) == [
        "plan_cache_mode=force_generic_plan",
        "enable_seqscan=off",
    ]
    assert await _settings(db, _PROJECTION) == [
        "plan_cache_mode=force_generic_plan",
        "enable_hashjoin=off",
        "enable_mergejoin=off",
        "enable_seqscan=off",
    ]


async def test_the_projection_probes_its_tables_when_they_are_small_and_when_not(
    db: Db,
) -> None:
    # Small: the test database as migrated, its users and contacts analyzed. Then a
    # table of users and contacts big enough that per-pair probes are what the planner
    # picks on its own.
    for users_added in (0, 20_000):
        if users_added:
            await db.pool.execute(
                """
                INSERT INTO users (user_id, phone, first_name)
                SELECT 8_800_000 + g, (8_800_000 + g)::text, 'U'
                  FROM generate_series(1, $1::int) AS g
                """,
                users_added,
            )
            await db.pool.execute(
                """
                INSERT INTO contacts (owner_user_id, contact_user_id, first_name, last_name)
                SELECT 8_800_000 + g, 8_800_000 + g % 500 + 1, 'C', ''
                  FROM generate_series(1, $1::int) AS g
                """,
                users_added,
            )
        await db.pool.execute("ANALYZE users; ANALYZE contacts")
        nodes = await _projection_plan(db)
        types = [n["Node Type"] for n in nodes]
        assert not _WHOLE_TABLE & set(types), (users_added, types)
        assert any(
            n["Node Type"] in ("Index Scan", "Index Only Scan")
            and n.get("Relation Name") == "users"
            for n in nodes
        ), (users_added, types)
    # And it answers: the pairs of users that exist, with the viewer's contact.
    found = await users_store.project_user_pairs(
        db.pool, [8_800_001, 8_800_002, -1], [8_800_002, 8_800_001, -2], ["status_timestamp"]
    )
    facts = {(viewer, row.user_id): row for viewer, row in found}
    assert set(facts) == {(8_800_001, 8_800_002), (8_800_002, 8_800_001)}
    assert facts[8_800_001, 8_800_002].in_viewer_contacts
    assert not facts[8_800_002, 8_800_001].in_viewer_contacts
