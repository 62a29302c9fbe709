"""Generic plans of statements, for tests: the plan PostgreSQL makes without the
values of a statement's parameters, which a prepared statement (or a function's, with
``plan_cache_mode = force_generic_plan``) runs on."""

from __future__ import annotations

from typing import Any

import asyncpg

_GENERIC_PLAN = """
CREATE FUNCTION pg_temp.generic_plan(q text, fmt text) RETURNS SETOF text
LANGUAGE plpgsql AS $f$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (GENERIC_PLAN, COSTS OFF, FORMAT ' || fmt || ') ' || q LOOP
        RETURN NEXT line;
    END LOOP;
END
$f$
"""


async def generic_plans(
    conn: asyncpg.Connection, statements: list[str], fmt: str = "TEXT"
) -> list[str]:
    """Each statement's generic plan, in ``fmt`` (TEXT or JSON), as one text."""
    assert fmt in ("TEXT", "JSON")
    await conn.execute(_GENERIC_PLAN)
    try:
        return [
            "\n".join(
                await conn.fetchval(
                    "SELECT array_agg(p) FROM pg_temp.generic_plan($1, $2) p", statement, fmt
                )
            )
            for statement in statements
        ]
    finally:
        await conn.execute("DROP FUNCTION pg_temp.generic_plan(text, text)")


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of a JSON plan, the plan's own first."""
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes.extend(plan_nodes(child))
    return nodes
